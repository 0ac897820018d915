package redisstore

import (
	"strconv"
	"unsafe"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
)

// A renewal and a completion carry the record their start left
// (driver.RenewRequest.Started, driver.CompleteRequest.Started). The store
// packs m from it, as the scripts store it, for renew.lua and
// transition.lua to compare the stored m (and fp) with by equality rather
// than check them by their rules; the completion also packs the head and
// tail of the m it writes, around the server's time.

// startedMeta is m as req.Started says the caller's start left it, which
// renew.lua compares the stored m with (and fp with req.Started's); ""
// when req.Started is not that record (see appendHeld).
func startedMeta(req driver.RenewRequest) string {
	b, ok := appendHeld(nil, &req.Started, req.Owner, req.Operation, req.Nonce, req.Started.Attempt, req.Started.Rev)
	if !ok {
		return ""
	}
	return string(b)
}

// appendHeld appends m packed from r, the record a caller says its start
// left, for a script to compare the stored m with by equality; not ok
// (compare nothing) unless r is EXECUTING under the owner, operation and
// nonce the caller sends, at the attempt and revision it sends, with a
// valid fingerprint and parts that keep the schema's rules
// (schema.ParseMeta checks the packed value). A record equal to what it
// appends therefore keeps them too.
func appendHeld(dst []byte, r *onceflow.Record, owner onceflow.Owner, op onceflow.OperationID, nonce onceflow.Nonce, attempt, rev int64) ([]byte, bool) {
	if r.State != onceflow.StateExecuting || r.Owner != owner || r.Operation != op || r.Nonce != nonce ||
		r.Attempt != attempt || r.Rev != rev || r.Fingerprint.Validate() != nil {
		return dst, false
	}
	n := len(dst)
	dst = append(dst, onceflow.StateExecuting...)
	dst = append(dst, schema.MetaSep)
	dst = strconv.AppendInt(dst, r.Attempt, 10)
	dst = append(dst, schema.MetaSep)
	dst = strconv.AppendInt(dst, r.Rev, 10)
	dst = append(dst, schema.MetaSep)
	dst = strconv.AppendInt(dst, int64(r.Policy), 10)
	dst = append(dst, schema.MetaSep)
	dst = strconv.AppendInt(dst, r.CreatedAt.UnixMilli(), 10)
	dst = append(dst, schema.MetaSep)
	dst = strconv.AppendInt(dst, r.UpdatedAt.UnixMilli(), 10)
	if r.EffectUnknown {
		dst = append(dst, ":1:"...)
	} else {
		dst = append(dst, ":0:"...)
	}
	dst = append(dst, schema.MetaSep) // no sum: the record has none before COMPLETED
	dst = append(dst, r.Codec...)
	if _, bad := schema.ParseMeta(unsafe.String(unsafe.SliceData(dst[n:]), len(dst)-n)); bad != "" {
		return dst[:n], false
	}
	return dst, true
}

// appendCompleteHeld appends to dst, for a COMPLETE by o's owner with
// nonce and a response of checksum sum, m as started (the record its
// start left) packs it (held, as appendHeld), then the head and the tail
// of the m transition.lua writes around the server's time: the state
// COMPLETED, attempt, rev+1, policy and creation, each followed by the
// separator; then no uncertainty, sum and the codec. held is nil (compare
// nothing) when appendHeld refuses started.
func appendCompleteHeld(dst []byte, started *onceflow.Record, o driver.Ownership, nonce onceflow.Nonce, sum string) (b, held, head, tail []byte) {
	b, ok := appendHeld(dst, started, o.Owner, o.Operation, nonce, o.Attempt, o.Rev)
	if !ok {
		return b, nil, nil, nil
	}
	n1 := len(b)
	b = append(b, onceflow.StateCompleted...)
	b = append(b, schema.MetaSep)
	b = strconv.AppendInt(b, started.Attempt, 10)
	b = append(b, schema.MetaSep)
	b = strconv.AppendInt(b, started.Rev+1, 10)
	b = append(b, schema.MetaSep)
	b = strconv.AppendInt(b, int64(started.Policy), 10)
	b = append(b, schema.MetaSep)
	b = strconv.AppendInt(b, started.CreatedAt.UnixMilli(), 10)
	b = append(b, schema.MetaSep)
	n2 := len(b)
	b = append(b, ":0:"...)
	b = append(b, sum...)
	b = append(b, schema.MetaSep)
	b = append(b, started.Codec...)
	return b, b[len(dst):n1:n1], b[n1:n2:n2], b[n2:]
}
