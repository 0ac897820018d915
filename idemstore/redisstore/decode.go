package redisstore

import (
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

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
	code   schema.ReplyCode
	now    time.Time // zero when the script did not read the clock
	pttl   time.Duration
	extra  string
	rec    string // the packed record, with the response after it
	hasRec bool
}

// The decoders turn a script's raw reply into the typed outcome of its
// operation, one decoder a script. They are the only place replies are
// interpreted; anything they do not recognise is an ErrUnexpectedReply,
// never a guess.

// decodeClaim decodes the reply of claim.lua to req; op is opClaim or
// opClaimStart (with nonce).
func decodeClaim(op string, req driver.ClaimRequest, nonce onceflow.Nonce, raw any) (driver.ClaimOutcome, error) {
	ref := req.Ref
	rp, err := parse(op, ref, raw)
	if err != nil {
		return nil, err
	}
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
			return nil, fmt.Errorf("%w: %s %s: TAKEN_OVER from %q", onceflow.ErrUnexpectedReply, op, ref, truncate(rp.extra))
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
// opComplete or opFail.
func decodeTransition(op string, ref onceflow.Ref, raw any) (driver.TransitionOutcome, error) {
	rp, err := parse(op, ref, raw)
	if err != nil {
		return nil, err
	}
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
		return decodeTransition(opComplete, o.Ref, raw)
	}
	if rp.extra != "" || rp.now.IsZero() {
		return nil, fmt.Errorf("%w: %s %s: TRANSITIONED without a record, with %q and time %v", onceflow.ErrUnexpectedReply, opComplete, o.Ref, truncate(rp.extra), rp.now)
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
	if rp.code == schema.NotFound {
		return driver.Missing{}, nil
	}
	if rp.code == schema.Renewed && started && !rp.hasRec {
		// renew.lua found the record equal to req.Started but for the
		// lease, and answered leaseUntil alone.
		until, ok := schema.ParseInteger(rp.extra)
		if !ok || rp.now.IsZero() {
			return nil, fmt.Errorf("%w: %s %s: RENEWED without a record, with leaseUntil %q", onceflow.ErrUnexpectedReply, opRenew, ref, truncate(rp.extra))
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

// decodeRelease decodes the reply of release.lua.
func decodeRelease(ref onceflow.Ref, raw any) (driver.ReleaseOutcome, error) {
	rp, err := parse(opRelease, ref, raw)
	if err != nil {
		return nil, err
	}
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
// reply, with a *onceflow.CorruptRecordError naming the field.
func parse(op string, ref onceflow.Ref, raw any) (reply, error) {
	rp, err := parseReply(raw)
	if err != nil {
		return reply{}, fmt.Errorf("%w: %s %s: %v", onceflow.ErrUnexpectedReply, op, ref, err)
	}
	if rp.code == schema.Corrupt {
		if rp.extra == "" {
			return reply{}, unexpected(op, ref, rp.code)
		}
		return reply{}, &onceflow.CorruptRecordError{Ref: ref, Field: rp.extra, Reason: "is missing or breaks the record schema"}
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
	return fmt.Errorf("%w: %s %s: %s", onceflow.ErrUnexpectedReply, op, ref, code)
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

// parseReply splits the one string every script answers (see
// lua/record.lua). It allocates nothing: the parts are slices of it.
func parseReply(raw any) (reply, error) {
	str, ok := raw.(string)
	if !ok {
		return reply{}, fmt.Errorf("reply is %T, not a string", raw)
	}
	codeField, rest, ok1 := strings.Cut(str, "\x00")
	nowField, rest, ok2 := strings.Cut(rest, "\x00")
	pttlField, rest, ok3 := strings.Cut(rest, "\x00")
	if !ok1 || !ok2 || !ok3 {
		return reply{}, fmt.Errorf("reply %q lacks its code, time or TTL", truncate(str))
	}
	var rp reply
	rp.extra, rp.rec, rp.hasRec = strings.Cut(rest, "\x00")
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

// unpack splits a packed record (see lua/record.lua) into its fields: NUL
// separated, in schema order, empty when absent; and the response that
// may follow the last field.
func unpack(s string) (vals [schema.NumFields]string, present [schema.NumFields]bool, resp string, hasResp bool, err error) {
	for i := range schema.NumFields {
		v, rest, more := strings.Cut(s, "\x00")
		if !more && i < schema.NumFields-1 {
			return vals, present, "", false, fmt.Errorf("packed record ends before field %s", schema.Fields[i+1].Name)
		}
		vals[i], present[i] = v, v != ""
		s = rest
		if i == schema.NumFields-1 {
			resp, hasResp = rest, more
		}
	}
	return vals, present, resp, hasResp, nil
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
	vals, present, resp, hasResp, err := unpack(rp.rec)
	if err != nil {
		return onceflow.Record{}, fmt.Errorf("%w: %s: %v", onceflow.ErrUnexpectedReply, ref, err)
	}
	bad := func(field, reason string) (onceflow.Record, error) {
		return onceflow.Record{}, &onceflow.CorruptRecordError{Ref: ref, Field: field, Reason: reason}
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
		State: onceflow.State(vals[schema.FState]), Owner: onceflow.Owner(vals[schema.FOwner]),
		Operation: onceflow.OperationID(vals[schema.FOp]), Fingerprint: onceflow.Fingerprint(vals[schema.FFp]),
		Codec: vals[schema.FCodec], Nonce: onceflow.Nonce(vals[schema.FNonce]), Reason: vals[schema.FReason],
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
	if hasResp {
		if !present[schema.FSum] {
			return bad("sum", "is missing: the response cannot be checked")
		}
		rec.Response = []byte(resp)
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

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
