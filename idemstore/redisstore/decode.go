package redisstore

import (
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
)

// The operations, as named in errors.
const (
	opClaim      = "claim"
	opClaimStart = "claim+start"
	opStart      = "start"
	opComplete   = "complete"
	opFail       = "fail"
	opRenew      = "renew"
	opRelease    = "release"
	opInspect    = "inspect"
	opResolve    = "resolve"
)

// reply is the common shape of every script's reply (see lua/record.lua).
type reply struct {
	code  schema.ReplyCode
	now   time.Time // zero when the script did not read the clock
	pttl  time.Duration
	extra string
	// rec holds the record's fields as the script sent them, in schema
	// order, NUL-separated, "" for the raw ones, which raw holds (in
	// rawFields' order), when hasRec; resp is the response after them,
	// when hasResp.
	rec             string
	raw             []any
	resp            string
	hasRec, hasResp bool
	// sent are the identities the call sent, which the decoded record
	// reuses where it holds the same (decodeRecord).
	sent idents
}

// idents are the hex owner, fingerprint and nonce a call sent: a decoded
// record that holds the same raw bytes takes these strings rather than
// allocating their hex anew.
type idents struct {
	owner onceflow.Owner
	fp    onceflow.Fingerprint
	nonce onceflow.Nonce
}

// The decoders turn a script's raw reply into the typed outcome of its
// operation, one decoder a script. They are the only place replies are
// interpreted; anything they do not recognise is an OutcomeCorrupt,
// never a guess.

// decodeClaim decodes the reply of claim.lua to req; op is opClaim or
// opClaimStart (with nonce).
func decodeClaim(op string, req driver.ClaimRequest, nonce onceflow.Nonce, raw any) (driver.ClaimOutcome, error) {
	ref := req.Ref
	rp, err := parse(op, ref, raw)
	if err != nil {
		return nil, err
	}
	rp.sent = idents{req.Owner, req.Fingerprint, nonce}
	if rp.code == schema.Acquired && !rp.hasRec && rp.extra == "" && !rp.now.IsZero() {
		// claim.lua's fast path: it created the record from req alone.
		rec := created(req, nonce, rp)
		return driver.Acquired{Ownership: driver.Ownership{Ref: ref, Operation: req.Operation, Owner: req.Owner, Attempt: 1, Rev: 1}, Record: rec}, nil
	}
	rec, own, err := rp.record(op, ref)
	if err != nil {
		return nil, err
	}
	switch rp.code {
	case schema.Acquired:
		return driver.Acquired{Ownership: own, Record: rec}, nil
	case schema.TakenOver:
		from := onceflow.State(rp.extra)
		if !from.Valid() {
			return nil, unexpectedReply("%s %s: TAKEN_OVER from %q", op, ref, truncate(rp.extra))
		}
		return driver.TakenOver{Ownership: own, Record: rec, From: from, EffectUnknown: rec.EffectUnknown}, nil
	case schema.ReplayedAcquire:
		return driver.ReplayedAcquire{Ownership: own, Record: rec}, nil
	case schema.CompletedReplay:
		return driver.CompletedReplay{Record: rec}, nil
	case schema.InProgress:
		return driver.InProgress{Record: rec}, nil
	case schema.FingerprintMismatch:
		return driver.FingerprintMismatch{Record: rec}, nil
	case schema.AwaitingDecision:
		return driver.AwaitingDecision{Record: rec}, nil
	case schema.OperationFailed:
		return driver.OperationFailed{Record: rec}, nil
	case schema.OwnerOperationConflict:
		return driver.OwnerOperationConflict{Record: rec}, nil
	case schema.CodecMismatch:
		return driver.CodecMismatch{Record: rec}, nil
	}
	return nil, unexpected(op, ref, rp.code)
}

// created is the record claim.lua creates for req at the reply's time:
// the fast path's ACQUIRED carries no record, as every value in it is the
// request's or the time.
func created(req driver.ClaimRequest, nonce onceflow.Nonce, rp reply) onceflow.Record {
	state := onceflow.StateClaimed
	if nonce != "" {
		state = onceflow.StateExecuting
	}
	return onceflow.Record{
		State: state, Owner: req.Owner, Attempt: 1, Rev: 1, Operation: req.Operation, Fingerprint: req.Fingerprint,
		Codec: req.Codec, Policy: req.Policy, LeaseUntil: rp.now.Add(time.Duration(ms(req.Lease)) * time.Millisecond), Nonce: nonce,
		CreatedAt: rp.now, UpdatedAt: rp.now, ServerTime: rp.now, TTL: rp.pttl,
	}
}

// decodeTransition decodes the reply of transition.lua; op is opStart,
// opComplete or opFail, sent the owner and nonce it sent.
func decodeTransition(op string, ref onceflow.Ref, sent idents, raw any) (driver.TransitionOutcome, error) {
	rp, err := parse(op, ref, raw)
	if err != nil {
		return nil, err
	}
	rp.sent = sent
	if rp.code == schema.NotFound {
		return driver.Missing{}, nil
	}
	rec, own, err := rp.record(op, ref)
	if err != nil {
		return nil, err
	}
	switch rp.code {
	case schema.Transitioned:
		return driver.Transitioned{Ownership: own, Record: rec}, nil
	case schema.Already:
		return driver.AlreadyTransitioned{Record: rec}, nil
	case schema.NotOwner, schema.OpConflict, schema.StaleRev, schema.WrongState, schema.NonceMismatch:
		return driver.Refused{Reason: refusals[rp.code], Record: rec}, nil
	}
	return nil, unexpected(op, ref, rp.code)
}

// decodeComplete decodes the reply of transition.lua to a COMPLETE that
// sent started (the record its start left, packed by appendCompleteHeld)
// for the script to compare: TRANSITIONED without a record says the
// record was started's, and is now COMPLETED at the next revision,
// updated at the reply's time. Any other reply is decoded as
// decodeTransition does.
func decodeComplete(o driver.Ownership, nonce onceflow.Nonce, started *onceflow.Record, raw any) (driver.TransitionOutcome, error) {
	rp, err := parse(opComplete, o.Ref, raw)
	if err != nil {
		return nil, err
	}
	if rp.code != schema.Transitioned || rp.hasRec {
		return decodeTransition(opComplete, o.Ref, idents{owner: o.Owner, fp: started.Fingerprint, nonce: nonce}, raw)
	}
	if rp.extra != "" || rp.now.IsZero() {
		return nil, unexpectedReply("%s %s: TRANSITIONED without a record, with %q and time %v", opComplete, o.Ref, truncate(rp.extra), rp.now)
	}
	rec := onceflow.Record{
		State: onceflow.StateCompleted, Owner: o.Owner, Attempt: started.Attempt, Rev: started.Rev + 1, Operation: o.Operation,
		Fingerprint: started.Fingerprint, Codec: started.Codec, Policy: started.Policy, Nonce: nonce,
		CreatedAt: started.CreatedAt, UpdatedAt: rp.now, ServerTime: rp.now, TTL: rp.pttl,
	}
	own := driver.Ownership{Ref: o.Ref, Operation: o.Operation, Owner: o.Owner, Attempt: rec.Attempt, Rev: rec.Rev}
	return driver.Transitioned{Ownership: own, Record: rec}, nil
}

// decodeRenew decodes the reply of renew.lua to req; started says
// whether the renewal sent req.Started's fp and m for renew.lua to
// compare.
func decodeRenew(req driver.RenewRequest, started bool, raw any) (driver.RenewOutcome, error) {
	ref := req.Ref
	rp, err := parse(opRenew, ref, raw)
	if err != nil {
		return nil, err
	}
	rp.sent = idents{req.Owner, req.Started.Fingerprint, req.Nonce}
	if rp.code == schema.NotFound {
		return driver.Missing{}, nil
	}
	if rp.code == schema.Renewed && started && !rp.hasRec {
		// renew.lua found the record equal to req.Started but for the
		// lease, and answered leaseUntil alone.
		until, ok := schema.ParseInteger(rp.extra)
		if !ok || rp.now.IsZero() {
			return nil, unexpectedReply("%s %s: RENEWED without a record, with leaseUntil %q", opRenew, ref, truncate(rp.extra))
		}
		return driver.Renewed{Record: onceflow.Record{
			State: onceflow.StateExecuting, Owner: req.Owner, Attempt: req.Started.Attempt, Rev: req.Started.Rev,
			Operation: req.Operation, LeaseUntil: time.UnixMilli(until), Nonce: req.Nonce, ServerTime: rp.now, TTL: rp.pttl,
		}}, nil
	}
	rec, _, err := rp.record(opRenew, ref)
	if err != nil {
		return nil, err
	}
	switch rp.code {
	case schema.Renewed:
		return driver.Renewed{Record: rec}, nil
	case schema.NotOwner, schema.OpConflict, schema.WrongState, schema.NonceMismatch:
		return driver.Refused{Reason: refusals[rp.code], Record: rec}, nil
	}
	return nil, unexpected(opRenew, ref, rp.code)
}

// decodeRelease decodes the reply of release.lua to a release by owner.
func decodeRelease(ref onceflow.Ref, owner onceflow.Owner, raw any) (driver.ReleaseOutcome, error) {
	rp, err := parse(opRelease, ref, raw)
	if err != nil {
		return nil, err
	}
	rp.sent = idents{owner: owner}
	switch rp.code {
	case schema.NotFound:
		return driver.Missing{}, nil
	case schema.Released:
		return driver.Released{}, nil
	}
	rec, _, err := rp.record(opRelease, ref)
	if err != nil {
		return nil, err
	}
	switch rp.code {
	case schema.NotOwner, schema.OpConflict, schema.WrongState, schema.StaleRev:
		return driver.Refused{Reason: refusals[rp.code], Record: rec}, nil
	}
	return nil, unexpected(opRelease, ref, rp.code)
}

// decodeInspect decodes the reply of inspect.lua.
func decodeInspect(ref onceflow.Ref, raw any) (driver.Observation, error) {
	rp, err := parse(opInspect, ref, raw)
	if err != nil {
		return driver.Observation{}, err
	}
	if rp.code == schema.NotFound {
		return driver.Observation{ServerTime: rp.now}, nil
	}
	rec, _, err := rp.record(opInspect, ref)
	if err != nil {
		return driver.Observation{}, err
	}
	if rp.code == schema.Found {
		return driver.Observation{Found: true, Record: rec, ServerTime: rp.now}, nil
	}
	return driver.Observation{}, unexpected(opInspect, ref, rp.code)
}

// decodeResolve decodes the reply of resolve.lua.
func decodeResolve(ref onceflow.Ref, raw any) (driver.ResolveOutcome, error) {
	rp, err := parse(opResolve, ref, raw)
	if err != nil {
		return nil, err
	}
	if rp.code == schema.NotFound {
		return driver.Missing{}, nil
	}
	rec, own, err := rp.record(opResolve, ref)
	if err != nil {
		return nil, err
	}
	switch rp.code {
	case schema.Resolved:
		return driver.Transitioned{Ownership: own, Record: rec}, nil
	case schema.Already:
		return driver.AlreadyTransitioned{Record: rec}, nil
	case schema.StaleAttempt, schema.StaleRev, schema.WrongState:
		return driver.Refused{Reason: refusals[rp.code], Record: rec}, nil
	}
	return nil, unexpected(opResolve, ref, rp.code)
}

// parse parses a raw reply and answers CORRUPT, which every script may
// reply, with a *onceflow.Error naming the field.
func parse(op string, ref onceflow.Ref, raw any) (reply, error) {
	rp, err := parseReply(raw)
	if err != nil {
		return reply{}, unexpectedReply("%s %s: %v", op, ref, err)
	}
	if rp.code == schema.Late {
		// A bounded call that ran after its bound (bound.go): nothing
		// changed, and nothing was learnt.
		return reply{}, &onceflow.Error{Outcome: onceflow.OutcomeStoreUnavailable, Op: op, Ref: ref, Err: errLate}
	}
	if rp.code == schema.Corrupt {
		if rp.extra == "" {
			return reply{}, unexpected(op, ref, rp.code)
		}
		return reply{}, &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Ref: ref, Field: rp.extra, Reason: "is missing or breaks the record schema"}
	}
	return rp, nil
}

// record decodes the record a reply carries, and the ownership it shows;
// a reply without one is unexpected.
func (rp reply) record(op string, ref onceflow.Ref) (onceflow.Record, driver.Ownership, error) {
	if !rp.hasRec {
		return onceflow.Record{}, driver.Ownership{}, unexpected(op, ref, rp.code)
	}
	rec, err := decodeRecord(ref, rp)
	if err != nil {
		return onceflow.Record{}, driver.Ownership{}, err
	}
	own := driver.Ownership{Ref: ref, Operation: rec.Operation, Owner: rec.Owner, Attempt: rec.Attempt, Rev: rec.Rev}
	return rec, own, nil
}

func unexpected(op string, ref onceflow.Ref, code schema.ReplyCode) error {
	return unexpectedReply("%s %s: %s", op, ref, code)
}

// refusals are the refusal reply codes, as idemstore names them.
var refusals = map[schema.ReplyCode]driver.Refusal{
	schema.NotOwner:      driver.RefusedNotOwner,
	schema.OpConflict:    driver.RefusedOperation,
	schema.StaleRev:      driver.RefusedStaleRev,
	schema.WrongState:    driver.RefusedState,
	schema.NonceMismatch: driver.RefusedNonce,
	schema.StaleAttempt:  driver.RefusedAttempt,
}

// rawFields are the fields the record keeps raw (schema.RawLen): a reply
// carries them as array elements of their own, in this order.
var rawFields = func() []int {
	var out []int
	for i, f := range schema.Fields {
		if schema.RawLen(f.Kind) > 0 {
			out = append(out, i)
		}
	}
	return out
}()

// parseReply splits a script's reply (see lua/record.lua): one string
// without a record; with one, an array of that string followed by the
// record's fields, the raw fields and the response. It allocates
// nothing: the parts are slices of the reply's.
func parseReply(raw any) (reply, error) {
	var rp reply
	var str string
	switch v := raw.(type) {
	case string:
		str = v
	case []any:
		if n := 1 + len(rawFields); len(v) != n && len(v) != n+1 {
			return reply{}, fmt.Errorf("reply is an array of %d elements, not a head, %d raw fields and a response", len(v), len(rawFields))
		}
		head, ok := v[0].(string)
		if !ok {
			return reply{}, fmt.Errorf("the reply's head is %T, not a string", v[0])
		}
		str, rp.raw, rp.hasRec = head, v[1:1+len(rawFields)], true
		if len(v) == 2+len(rawFields) {
			if rp.resp, rp.hasResp = v[1+len(rawFields)].(string); !rp.hasResp {
				return reply{}, fmt.Errorf("the reply's response is %T, not a string", v[1+len(rawFields)])
			}
		}
	default:
		return reply{}, fmt.Errorf("reply is %T, neither a string nor an array", raw)
	}
	codeField, rest, ok1 := strings.Cut(str, "\x00")
	nowField, rest, ok2 := strings.Cut(rest, "\x00")
	pttlField, rest, ok3 := strings.Cut(rest, "\x00")
	if !ok1 || !ok2 || !ok3 {
		return reply{}, fmt.Errorf("reply %q lacks its code, time or TTL", truncate(str))
	}
	rp.extra = rest
	if rp.hasRec {
		var ok bool
		if rp.extra, rp.rec, ok = strings.Cut(rest, "\x00"); !ok {
			return reply{}, fmt.Errorf("reply %q carries no record", truncate(str))
		}
	}
	code, err := strconv.ParseInt(codeField, 10, 64)
	if err != nil || code <= 0 {
		return reply{}, fmt.Errorf("reply code %q is not a positive integer", truncate(codeField))
	}
	rp.code = schema.ReplyCode(code)
	now, err := strconv.ParseInt(nowField, 10, 64)
	if err != nil || now < 0 {
		return reply{}, fmt.Errorf("server time %q is not a non-negative integer", truncate(nowField))
	}
	if now > 0 {
		rp.now = time.UnixMilli(now)
	}
	pttl, err := strconv.ParseInt(pttlField, 10, 64)
	if err != nil {
		return reply{}, fmt.Errorf("pttl %q is not an integer", truncate(pttlField))
	}
	if pttl > 0 {
		rp.pttl = time.Duration(pttl) * time.Millisecond
	}
	return rp, nil
}

// unpack splits a reply's record (see lua/record.lua) into its fields:
// the NUL-separated ones in schema order, empty when absent, with the raw
// ones taken from their elements.
func (rp reply) unpack() (vals [schema.NumFields]string, err error) {
	s := rp.rec
	for i := range schema.NumFields {
		v, rest, more := strings.Cut(s, "\x00")
		if more == (i == schema.NumFields-1) {
			return vals, fmt.Errorf("the record does not have %d NUL-separated fields", schema.NumFields)
		}
		vals[i], s = v, rest
	}
	for n, i := range rawFields {
		v, ok := rp.raw[n].(string)
		if !ok || vals[i] != "" {
			return vals, fmt.Errorf("the record's %s is %T in its element, and %q among the others", schema.Fields[i].Name, rp.raw[n], truncate(vals[i]))
		}
		vals[i] = v
	}
	return vals, nil
}

// replayFields are the fields a replay reply carries (claim.lua's fast
// path); the others are not read and not checked.
var replayFields = [schema.NumFields]bool{schema.FState: true, schema.FAttempt: true, schema.FRev: true, schema.FCodec: true, schema.FPolicy: true, schema.FCreatedAt: true, schema.FSum: true}

// renewFields are the fields a RENEWED reply carries (renew.lua).
var renewFields = [schema.NumFields]bool{schema.FState: true, schema.FOwner: true, schema.FAttempt: true, schema.FRev: true, schema.FOp: true, schema.FLeaseUntil: true, schema.FNonce: true}

// decodeRecord validates a reply's record against schema.Fields and the
// cross-field rules, the same ones the scripts check, and converts it. A
// response is checked against its stored checksum.
func decodeRecord(ref onceflow.Ref, rp reply) (onceflow.Record, error) {
	vals, err := rp.unpack()
	if err != nil {
		return onceflow.Record{}, unexpectedReply("%s: %v", ref, err)
	}
	var present [schema.NumFields]bool
	for i, v := range vals {
		present[i] = v != ""
	}
	bad := func(field, reason string) (onceflow.Record, error) {
		return onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Ref: ref, Field: field, Reason: reason}
	}
	var partial *[schema.NumFields]bool
	switch rp.code {
	case schema.CompletedReplay:
		partial = &replayFields
	case schema.Renewed:
		partial = &renewFields
	}
	for i := range schema.Fields {
		rule := &schema.Fields[i]
		required := rule.Required
		if partial != nil {
			required = partial[i]
		}
		switch {
		case !present[i]:
			if required {
				return bad(rule.Name, "is missing")
			}
		case !rule.Kind.Valid(vals[i]):
			return bad(rule.Name, fmt.Sprintf("is %q, not a valid %s", truncate(vals[i]), rule.Kind))
		}
	}
	rec := onceflow.Record{
		State: onceflow.State(vals[schema.FState]), Owner: onceflow.Owner(hexOf(vals[schema.FOwner], string(rp.sent.owner))),
		Operation: onceflow.OperationID(vals[schema.FOp]), Fingerprint: onceflow.Fingerprint(hexOf(vals[schema.FFp], string(rp.sent.fp))),
		Codec: vals[schema.FCodec], Nonce: onceflow.Nonce(hexOf(vals[schema.FNonce], string(rp.sent.nonce))), Reason: vals[schema.FReason],
		EffectUnknown: vals[schema.FEffectUnknown] == "1", ServerTime: rp.now, TTL: rp.pttl,
	}
	rec.Attempt, _ = schema.ParseInteger(vals[schema.FAttempt])
	rec.Rev, _ = schema.ParseInteger(vals[schema.FRev])
	policy, _ := schema.ParseInteger(vals[schema.FPolicy])
	rec.Policy = int(policy)
	for _, t := range []struct {
		i   int
		dst *time.Time
	}{{schema.FLeaseUntil, &rec.LeaseUntil}, {schema.FCreatedAt, &rec.CreatedAt}, {schema.FUpdatedAt, &rec.UpdatedAt}} {
		if present[t.i] {
			ms, _ := schema.ParseInteger(vals[t.i])
			*t.dst = time.UnixMilli(ms)
		}
	}
	if partial == nil {
		switch {
		case (rec.State == onceflow.StateClaimed || rec.State == onceflow.StateExecuting) && !present[schema.FLeaseUntil]:
			return bad("leaseUntil", "is missing from a "+string(rec.State)+" record")
		case rec.State == onceflow.StateExecuting && !present[schema.FNonce]:
			return bad("nonce", "is missing from an EXECUTING record")
		case rec.State == onceflow.StateCompleted && !present[schema.FSum]:
			return bad("sum", "is missing from a COMPLETED record")
		}
	}
	if rp.hasResp {
		if !present[schema.FSum] {
			return bad("sum", "is missing: the response cannot be checked")
		}
		rec.Response = []byte(rp.resp)
		if want, ok := schema.ParseChecksum(vals[schema.FSum]); !ok || crc32.Checksum(rec.Response, castagnoli) != want {
			return bad("resp", "does not match its checksum (sum)")
		}
	}
	return rec, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum is the stored checksum of a response: its CRC-32C, 8 hex.
func checksum(resp []byte) string {
	var sum [4]byte
	c := crc32.Checksum(resp, castagnoli)
	sum[0], sum[1], sum[2], sum[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return hex.EncodeToString(sum[:])
}

// hexOf is the hex of a field the record keeps raw (an owner, a
// fingerprint, a nonce), "" for "": sent itself when it is that hex (a
// lowercase hex that encodes the same bytes), without an allocation.
func hexOf(raw, sent string) string {
	if raw == "" {
		return ""
	}
	if len(sent) == 2*len(raw) && len(raw) <= 32 && isLowerHex(sent) {
		var b [32]byte
		if string(appendRaw(b[:0], sent)) == raw {
			return sent
		}
	}
	return hex.EncodeToString(unsafe.Slice(unsafe.StringData(raw), len(raw)))
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
