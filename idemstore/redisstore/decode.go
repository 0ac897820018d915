package redisstore

import (
	"fmt"
	"strconv"
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
	status string
	now    time.Time
	pttl   time.Duration
	fields map[string]string
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
		return nil, fmt.Errorf("%w: %s %s: status %q", idemstore.ErrUnexpectedReply, op, ref, rp.status)
	}
	if rp.status == "CORRUPT" {
		field := rp.fields["_corrupt"]
		if _, err := decodeRecord(ref, rp); err != nil {
			return nil, err
		}
		return nil, &idemstore.CorruptRecordError{Ref: ref, Field: field, Reason: "is missing or malformed"}
	}
	// Replies that describe no record.
	switch {
	case rp.status == "NOT_FOUND" && op != opClaim && op != opClaimStart && op != opInspect,
		rp.status == "RELEASED" && op == opRelease:
		switch op {
		case opStart, opComplete, opFail:
			return idemstore.TransitionOutcome(idemstore.Missing{}), nil
		case opRenew:
			return idemstore.RenewOutcome(idemstore.Missing{}), nil
		case opResolve:
			return idemstore.ResolveOutcome(idemstore.Missing{}), nil
		case opRelease:
			if rp.status == "RELEASED" {
				return idemstore.ReleaseOutcome(idemstore.Released{}), nil
			}
			return idemstore.ReleaseOutcome(idemstore.Missing{}), nil
		}
	case rp.status == "MISSING" && op == opInspect:
		return idemstore.Observation{ServerTime: rp.now}, nil
	}

	rec, err := decodeRecord(ref, rp)
	if err != nil {
		return nil, err
	}
	own := idemstore.Ownership{Ref: ref, Operation: rec.Operation, Owner: rec.Owner, Attempt: rec.Attempt, Rev: rec.Rev}

	switch op {
	case opClaim, opClaimStart:
		var out idemstore.ClaimOutcome
		switch rp.status {
		case "ACQUIRED":
			out = idemstore.Acquired{Ownership: own, Record: rec}
		case "TAKEN_OVER":
			from := idemstore.State(rp.fields["_from"])
			if !from.Valid() {
				return nil, fmt.Errorf("%w: %s %s: TAKEN_OVER from %q", idemstore.ErrUnexpectedReply, op, ref, from)
			}
			out = idemstore.TakenOver{Ownership: own, Record: rec, From: from, EffectMayHaveHappened: rec.Uncertain}
		case "REPLAYED_ACQUIRE":
			out = idemstore.ReplayedAcquire{Ownership: own, Record: rec}
		case "COMPLETED_REPLAY":
			out = idemstore.CompletedReplay{Record: rec}
		case "IN_PROGRESS":
			out = idemstore.InProgress{Record: rec}
		case "FINGERPRINT_MISMATCH":
			out = idemstore.FingerprintMismatch{Record: rec}
		case "RECOVERY_REQUIRED":
			out = idemstore.RecoveryRequired{Record: rec}
		case "OWNER_OPERATION_CONFLICT":
			out = idemstore.OwnerOperationConflict{Record: rec}
		case "CODEC_MISMATCH":
			out = idemstore.CodecMismatch{Record: rec}
		default:
			return unexpected()
		}
		return out, nil
	case opStart, opComplete, opFail:
		switch rp.status {
		case "TRANSITIONED":
			return idemstore.TransitionOutcome(idemstore.Transitioned{Ownership: own, Record: rec}), nil
		case "ALREADY":
			return idemstore.TransitionOutcome(idemstore.AlreadyTransitioned{Record: rec}), nil
		}
		if r, ok := refusal(rp.status, idemstore.RefusedNotOwner, idemstore.RefusedOperation,
			idemstore.RefusedStaleRev, idemstore.RefusedState, idemstore.RefusedNonce); ok {
			return idemstore.TransitionOutcome(idemstore.Refused{Reason: r, Record: rec}), nil
		}
	case opRenew:
		if rp.status == "RENEWED" {
			return idemstore.RenewOutcome(idemstore.Renewed{Record: rec}), nil
		}
		if r, ok := refusal(rp.status, idemstore.RefusedNotOwner, idemstore.RefusedOperation,
			idemstore.RefusedState, idemstore.RefusedNonce); ok {
			return idemstore.RenewOutcome(idemstore.Refused{Reason: r, Record: rec}), nil
		}
	case opRelease:
		if r, ok := refusal(rp.status, idemstore.RefusedNotOwner, idemstore.RefusedOperation,
			idemstore.RefusedState, idemstore.RefusedStaleRev); ok {
			return idemstore.ReleaseOutcome(idemstore.Refused{Reason: r, Record: rec}), nil
		}
	case opInspect:
		if rp.status == "FOUND" {
			return idemstore.Observation{Found: true, Record: rec, ServerTime: rp.now}, nil
		}
	case opResolve:
		switch rp.status {
		case "RESOLVED":
			return idemstore.ResolveOutcome(idemstore.Transitioned{Ownership: own, Record: rec}), nil
		case "ALREADY":
			return idemstore.ResolveOutcome(idemstore.AlreadyTransitioned{Record: rec}), nil
		}
		if r, ok := refusal(rp.status, idemstore.RefusedAttempt, idemstore.RefusedStaleRev, idemstore.RefusedState); ok {
			return idemstore.ResolveOutcome(idemstore.Refused{Reason: r, Record: rec}), nil
		}
	}
	return unexpected()
}

func refusal(status string, allowed ...idemstore.Refusal) (idemstore.Refusal, bool) {
	for _, r := range allowed {
		if string(r) == status {
			return r, true
		}
	}
	return "", false
}

// parseReply checks the common shape: status, now, pttl, then pairs.
func parseReply(raw any) (reply, error) {
	arr, ok := raw.([]any)
	if !ok {
		return reply{}, fmt.Errorf("reply is %T, not an array", raw)
	}
	if len(arr) < 3 || len(arr)%2 != 1 {
		return reply{}, fmt.Errorf("reply has %d elements, want 3 + pairs", len(arr))
	}
	strs := make([]string, len(arr))
	for i, v := range arr {
		s, ok := v.(string)
		if !ok {
			return reply{}, fmt.Errorf("element %d is %T, not a string", i, v)
		}
		strs[i] = s
	}
	nowMs, err := strconv.ParseInt(strs[1], 10, 64)
	if err != nil || nowMs <= 0 {
		return reply{}, fmt.Errorf("server time %q is not a positive integer", strs[1])
	}
	pttl, err := strconv.ParseInt(strs[2], 10, 64)
	if err != nil {
		return reply{}, fmt.Errorf("pttl %q is not an integer", strs[2])
	}
	rp := reply{status: strs[0], now: time.UnixMilli(nowMs), fields: make(map[string]string, (len(strs)-3)/2)}
	if pttl > 0 {
		rp.pttl = time.Duration(pttl) * time.Millisecond
	}
	for i := 3; i < len(strs); i += 2 {
		rp.fields[strs[i]] = strs[i+1]
	}
	return rp, nil
}

// decodeRecord validates and converts the record fields of a reply.
func decodeRecord(ref idemstore.Ref, rp reply) (idemstore.Record, error) {
	f := rp.fields
	bad := func(field, reason string) (idemstore.Record, error) {
		return idemstore.Record{}, &idemstore.CorruptRecordError{Ref: ref, Field: field, Reason: reason}
	}
	rec := idemstore.Record{ServerTime: rp.now, TTL: rp.pttl}
	rec.State = idemstore.State(f["state"])
	if !rec.State.Valid() {
		return bad("state", fmt.Sprintf("is %q, not a known state", f["state"]))
	}
	rec.Owner = idemstore.Owner(f["owner"])
	if rec.Owner.Validate() != nil {
		return bad("owner", "is not 64 lowercase hex characters")
	}
	var err error
	if rec.Attempt, err = positive(f, "attempt"); err != nil {
		return bad("attempt", err.Error())
	}
	if rec.Rev, err = positive(f, "rev"); err != nil {
		return bad("rev", err.Error())
	}
	policy, err := positive(f, "policy")
	if err != nil {
		return bad("policy", err.Error())
	}
	rec.Policy = int(policy)
	leaseUntil, err := nonNegative(f, "leaseUntil")
	if err != nil {
		return bad("leaseUntil", err.Error())
	}
	rec.LeaseUntil = time.UnixMilli(leaseUntil)
	rec.Operation = idemstore.OperationID(f["op"])
	if rec.Operation == "" {
		return bad("op", "is missing")
	}
	rec.Fingerprint = idemstore.Fingerprint(f["fp"])
	if rec.Fingerprint == "" {
		return bad("fp", "is missing")
	}
	rec.Codec = f["codec"]
	rec.Nonce = idemstore.Nonce(f["nonce"])
	rec.Reason = f["reason"]
	switch f["uncertain"] {
	case "", "0":
	case "1":
		rec.Uncertain = true
	default:
		return bad("uncertain", fmt.Sprintf("is %q, not 0 or 1", f["uncertain"]))
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"createdAt", &rec.CreatedAt}, {"updatedAt", &rec.UpdatedAt}} {
		if _, ok := f[tf.name]; !ok {
			continue
		}
		v, err := nonNegative(f, tf.name)
		if err != nil {
			return bad(tf.name, err.Error())
		}
		*tf.dst = time.UnixMilli(v)
	}
	if resp, ok := f["resp"]; ok {
		rec.Response = []byte(resp)
	}
	return rec, nil
}

func positive(f map[string]string, name string) (int64, error) {
	v, err := nonNegative(f, name)
	if err == nil && v == 0 {
		err = fmt.Errorf("is 0, must be positive")
	}
	return v, err
}

func nonNegative(f map[string]string, name string) (int64, error) {
	s, ok := f[name]
	if !ok {
		return 0, fmt.Errorf("is missing")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("is %q, not a non-negative integer", s)
	}
	return v, nil
}
