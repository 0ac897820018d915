package redisstore

import (
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/idemstore"
)

// The operations, as named in errors and in decode.
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
	code   replyCode
	now    time.Time // zero when the script did not read the clock
	pttl   time.Duration
	extra  string
	rec    string // the packed record, with the response after it
	hasRec bool
}

// decode turns a script's raw reply into the typed outcome of op. It is the
// only place replies are interpreted; anything it does not recognise is an
// ErrUnexpectedReply, never a guess.
func decode(op string, ref idemstore.Ref, raw any) (any, error) {
	rp, err := parseReply(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %v", idemstore.ErrUnexpectedReply, op, ref, err)
	}
	unexpected := func() (any, error) {
		return nil, fmt.Errorf("%w: %s %s: %s", idemstore.ErrUnexpectedReply, op, ref, rp.code)
	}
	switch rp.code {
	case codeCorrupt:
		if rp.extra == "" {
			return unexpected()
		}
		return nil, &idemstore.CorruptRecordError{Ref: ref, Field: rp.extra, Reason: "is missing or breaks the record schema"}
	case codeNotFound:
		switch op {
		case opStart, opComplete, opFail:
			return idemstore.TransitionOutcome(idemstore.Missing{}), nil
		case opRenew:
			return idemstore.RenewOutcome(idemstore.Missing{}), nil
		case opResolve:
			return idemstore.ResolveOutcome(idemstore.Missing{}), nil
		case opRelease:
			return idemstore.ReleaseOutcome(idemstore.Missing{}), nil
		case opInspect:
			return idemstore.Observation{ServerTime: rp.now}, nil
		}
		return unexpected()
	case codeReleased:
		if op != opRelease {
			return unexpected()
		}
		return idemstore.ReleaseOutcome(idemstore.Released{}), nil
	}
	if !rp.hasRec {
		return unexpected()
	}
	rec, err := decodeRecord(ref, rp)
	if err != nil {
		return nil, err
	}
	own := idemstore.Ownership{Ref: ref, Operation: rec.Operation, Owner: rec.Owner, Attempt: rec.Attempt, Rev: rec.Rev}

	switch op {
	case opClaim, opClaimStart:
		var out idemstore.ClaimOutcome
		switch rp.code {
		case codeAcquired:
			out = idemstore.Acquired{Ownership: own, Record: rec}
		case codeTakenOver:
			from := idemstore.State(rp.extra)
			if !from.Valid() {
				return nil, fmt.Errorf("%w: %s %s: TAKEN_OVER from %q", idemstore.ErrUnexpectedReply, op, ref, from)
			}
			out = idemstore.TakenOver{Ownership: own, Record: rec, From: from, EffectMayHaveHappened: rec.Uncertain}
		case codeReplayedAcquire:
			out = idemstore.ReplayedAcquire{Ownership: own, Record: rec}
		case codeCompletedReplay:
			out = idemstore.CompletedReplay{Record: rec}
		case codeInProgress:
			out = idemstore.InProgress{Record: rec}
		case codeFingerprintMismatch:
			out = idemstore.FingerprintMismatch{Record: rec}
		case codeRecoveryRequired:
			out = idemstore.RecoveryRequired{Record: rec}
		case codeOperationFailed:
			out = idemstore.OperationFailed{Record: rec}
		case codeOwnerOperationConflict:
			out = idemstore.OwnerOperationConflict{Record: rec}
		case codeCodecMismatch:
			out = idemstore.CodecMismatch{Record: rec}
		default:
			return unexpected()
		}
		return out, nil
	case opStart, opComplete, opFail:
		switch rp.code {
		case codeTransitioned:
			return idemstore.TransitionOutcome(idemstore.Transitioned{Ownership: own, Record: rec}), nil
		case codeAlready:
			return idemstore.TransitionOutcome(idemstore.AlreadyTransitioned{Record: rec}), nil
		}
		if r, ok := refusal(rp.code, codeNotOwner, codeOpConflict, codeStaleRev, codeWrongState, codeNonceMismatch); ok {
			return idemstore.TransitionOutcome(idemstore.Refused{Reason: r, Record: rec}), nil
		}
	case opRenew:
		if rp.code == codeRenewed {
			return idemstore.RenewOutcome(idemstore.Renewed{Record: rec}), nil
		}
		if r, ok := refusal(rp.code, codeNotOwner, codeOpConflict, codeWrongState, codeNonceMismatch); ok {
			return idemstore.RenewOutcome(idemstore.Refused{Reason: r, Record: rec}), nil
		}
	case opRelease:
		if r, ok := refusal(rp.code, codeNotOwner, codeOpConflict, codeWrongState, codeStaleRev); ok {
			return idemstore.ReleaseOutcome(idemstore.Refused{Reason: r, Record: rec}), nil
		}
	case opInspect:
		if rp.code == codeFound {
			return idemstore.Observation{Found: true, Record: rec, ServerTime: rp.now}, nil
		}
	case opResolve:
		switch rp.code {
		case codeResolved:
			return idemstore.ResolveOutcome(idemstore.Transitioned{Ownership: own, Record: rec}), nil
		case codeAlready:
			return idemstore.ResolveOutcome(idemstore.AlreadyTransitioned{Record: rec}), nil
		}
		if r, ok := refusal(rp.code, codeStaleAttempt, codeStaleRev, codeWrongState); ok {
			return idemstore.ResolveOutcome(idemstore.Refused{Reason: r, Record: rec}), nil
		}
	}
	return unexpected()
}

var refusals = map[replyCode]idemstore.Refusal{
	codeNotOwner:      idemstore.RefusedNotOwner,
	codeOpConflict:    idemstore.RefusedOperation,
	codeStaleRev:      idemstore.RefusedStaleRev,
	codeWrongState:    idemstore.RefusedState,
	codeNonceMismatch: idemstore.RefusedNonce,
	codeStaleAttempt:  idemstore.RefusedAttempt,
}

func refusal(code replyCode, allowed ...replyCode) (idemstore.Refusal, bool) {
	for _, a := range allowed {
		if a == code {
			return refusals[code], true
		}
	}
	return "", false
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
	rp.code = replyCode(code)
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
func unpack(s string) (vals [numFields]string, present [numFields]bool, resp string, hasResp bool, err error) {
	for i := range numFields {
		v, rest, more := strings.Cut(s, "\x00")
		if !more && i < numFields-1 {
			return vals, present, "", false, fmt.Errorf("packed record ends before field %s", fieldRules[i+1].name)
		}
		vals[i], present[i] = v, v != ""
		s = rest
		if i == numFields-1 {
			resp, hasResp = rest, more
		}
	}
	return vals, present, resp, hasResp, nil
}

// replayFields are the fields a replay reply carries (claim.lua's fast
// path); the others are not read and not checked.
var replayFields = [numFields]bool{fState: true, fAttempt: true, fRev: true, fCodec: true, fPolicy: true, fSum: true}

// renewFields are the fields a RENEWED reply carries (renew.lua).
var renewFields = [numFields]bool{fState: true, fOwner: true, fAttempt: true, fRev: true, fOp: true, fLeaseUntil: true, fNonce: true}

// decodeRecord validates a reply's record against fieldRules and the
// cross-field rules, the same ones the scripts check, and converts it. A
// response is checked against its stored checksum.
func decodeRecord(ref idemstore.Ref, rp reply) (idemstore.Record, error) {
	vals, present, resp, hasResp, err := unpack(rp.rec)
	if err != nil {
		return idemstore.Record{}, fmt.Errorf("%w: %s: %v", idemstore.ErrUnexpectedReply, ref, err)
	}
	bad := func(field, reason string) (idemstore.Record, error) {
		return idemstore.Record{}, &idemstore.CorruptRecordError{Ref: ref, Field: field, Reason: reason}
	}
	var partial *[numFields]bool
	switch rp.code {
	case codeCompletedReplay:
		partial = &replayFields
	case codeRenewed:
		partial = &renewFields
	}
	for i, rule := range fieldRules {
		required := rule.required
		if partial != nil {
			required = partial[i]
		}
		switch {
		case !present[i]:
			if required {
				return bad(rule.name, "is missing")
			}
		case !rule.kind.valid(vals[i]):
			return bad(rule.name, fmt.Sprintf("is %q, not a valid %s", truncate(vals[i]), rule.kind))
		}
	}
	rec := idemstore.Record{
		State: idemstore.State(vals[fState]), Owner: idemstore.Owner(vals[fOwner]),
		Operation: idemstore.OperationID(vals[fOp]), Fingerprint: idemstore.Fingerprint(vals[fFp]),
		Codec: vals[fCodec], Nonce: idemstore.Nonce(vals[fNonce]), Reason: vals[fReason],
		Uncertain: vals[fUncertain] == "1", ServerTime: rp.now, TTL: rp.pttl,
	}
	rec.Attempt, _ = parseInteger(vals[fAttempt])
	rec.Rev, _ = parseInteger(vals[fRev])
	policy, _ := parseInteger(vals[fPolicy])
	rec.Policy = int(policy)
	for _, t := range []struct {
		i   int
		dst *time.Time
	}{{fLeaseUntil, &rec.LeaseUntil}, {fCreatedAt, &rec.CreatedAt}, {fUpdatedAt, &rec.UpdatedAt}} {
		if present[t.i] {
			ms, _ := parseInteger(vals[t.i])
			*t.dst = time.UnixMilli(ms)
		}
	}
	if partial == nil {
		switch {
		case (rec.State == idemstore.StateClaimed || rec.State == idemstore.StateExecuting) && !present[fLeaseUntil]:
			return bad("leaseUntil", "is missing from a "+string(rec.State)+" record")
		case rec.State == idemstore.StateExecuting && !present[fNonce]:
			return bad("nonce", "is missing from an EXECUTING record")
		case rec.State == idemstore.StateCompleted && !present[fSum]:
			return bad("sum", "is missing from a COMPLETED record")
		}
	}
	if hasResp {
		if !present[fSum] {
			return bad("sum", "is missing: the response cannot be checked")
		}
		rec.Response = []byte(resp)
		if want, ok := parseChecksum(vals[fSum]); !ok || crc32.Checksum(rec.Response, castagnoli) != want {
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

// parseChecksum reads 8 lowercase hex characters.
func parseChecksum(s string) (uint32, bool) {
	if len(s) != 8 {
		return 0, false
	}
	var v uint32
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b >= '0' && b <= '9':
			v = v<<4 | uint32(b-'0')
		case b >= 'a' && b <= 'f':
			v = v<<4 | uint32(b-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
