package redisstore

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/idemstore"
)

var testRef = idemstore.Ref{Code: "charge-payment", Digest: idemstore.ScopeDigest{Version: 1, Hex: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}

var allOps = []string{opClaim, opClaimStart, opStart, opComplete, opFail, opRenew, opRelease, opInspect, opResolve}

// checkDecoded fails unless decode returned a typed outcome of op's sum or
// one of the two decoding errors.
func checkDecoded(t *testing.T, op string, out any, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, idemstore.ErrUnexpectedReply) && !errors.Is(err, idemstore.ErrCorruptRecord) {
			t.Fatalf("%s: error %v is neither ErrUnexpectedReply nor ErrCorruptRecord", op, err)
		}
		return
	}
	var ok bool
	switch op {
	case opClaim, opClaimStart:
		_, ok = out.(idemstore.ClaimOutcome)
	case opStart, opComplete, opFail:
		_, ok = out.(idemstore.TransitionOutcome)
	case opRenew:
		_, ok = out.(idemstore.RenewOutcome)
	case opRelease:
		_, ok = out.(idemstore.ReleaseOutcome)
	case opInspect:
		_, ok = out.(idemstore.Observation)
	case opResolve:
		_, ok = out.(idemstore.ResolveOutcome)
	}
	if !ok {
		t.Fatalf("%s decoded to %T", op, out)
	}
}

// packRecord packs fields the way lua/record.lua does.
func packRecord(fields map[string]string) string {
	var b strings.Builder
	for _, r := range fieldRules {
		v, ok := fields[r.name]
		if !ok {
			b.WriteByte('-')
			continue
		}
		b.WriteString(strconv.Itoa(len(v)) + ":" + v)
	}
	return b.String()
}

func executingRecord() map[string]string {
	return map[string]string{
		"state": "EXECUTING", "owner": strings.Repeat("a", 64), "attempt": "1", "rev": "2", "op": "op-1",
		"fp": strings.Repeat("f", 64), "codec": "json-v2", "policy": "2", "leaseUntil": "1764460030000",
		"nonce": "0123456789abcdef0123456789abcdef", "createdAt": "1764460000000", "updatedAt": "1764460000000",
	}
}

func validReply(code replyCode) []any {
	return []any{int64(code), int64(1764460000000), int64(3600000), packRecord(executingRecord()), nil, nil}
}

func TestDecodeKnownReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		op   string
		code replyCode
		want any
	}{
		{opClaim, codeAcquired, idemstore.Acquired{}},
		{opClaimStart, codeInProgress, idemstore.InProgress{}},
		{opStart, codeAlready, idemstore.AlreadyTransitioned{}},
		{opRenew, codeRenewed, idemstore.Renewed{}},
		{opRenew, codeNonceMismatch, idemstore.Refused{}},
		{opRelease, codeReleased, idemstore.Released{}},
		{opInspect, codeFound, idemstore.Observation{}},
		{opResolve, codeStaleAttempt, idemstore.Refused{}},
	}
	for _, c := range cases {
		out, err := decode(c.op, testRef, validReply(c.code))
		if err != nil {
			t.Fatalf("%s %s: %v", c.op, c.code, err)
		}
		if got, want := typeName(out), typeName(c.want); got != want {
			t.Fatalf("%s %s decoded to %s, want %s", c.op, c.code, got, want)
		}
	}
	// A reply that belongs to another script is not guessed at.
	for _, c := range []struct {
		op   string
		code replyCode
	}{{opRenew, codeStaleRev}, {opClaim, codeTransitioned}, {opInspect, codeAcquired}, {opRelease, codeAlready}, {opClaim, codeNotFound}, {opClaim, 99}} {
		if _, err := decode(c.op, testRef, validReply(c.code)); !errors.Is(err, idemstore.ErrUnexpectedReply) {
			t.Fatalf("%s %s: err = %v, want ErrUnexpectedReply", c.op, c.code, err)
		}
	}
}

// TestDecodeChecksEveryFieldRule garbles each field of a reply's record in
// turn: the decoder refuses it with a *CorruptRecordError naming the
// field, by the same rules as the scripts.
func TestDecodeChecksEveryFieldRule(t *testing.T) {
	t.Parallel()
	garbles := []string{"", "x", "-1", "01", "9999999999999999", "99999999999999999999", strings.Repeat("Z", 64), "1e+20"}
	for _, r := range fieldRules {
		for _, g := range append(garbles, "(missing)") {
			rec := executingRecord()
			if g == "(missing)" {
				delete(rec, r.name)
			} else {
				rec[r.name] = g
			}
			if g != "(missing)" && r.kind.valid(g) {
				continue // not a garble for this kind
			}
			_, err := decode(opRenew, testRef, []any{int64(codeRenewed), int64(1), int64(1), packRecord(rec), nil, nil})
			_, present := executingRecord()[r.name]
			wantErr := g != "(missing)" || r.required || present && (r.name == "leaseUntil" || r.name == "nonce")
			var ce *idemstore.CorruptRecordError
			switch {
			case wantErr && (!errors.As(err, &ce) || ce.Field != r.name):
				t.Errorf("%s = %q: err = %v, want a CorruptRecordError naming %s", r.name, g, err, r.name)
			case !wantErr && err != nil:
				t.Errorf("%s = %q: err = %v, want none (an optional field)", r.name, g, err)
			}
		}
	}
	// A response that does not match its checksum is refused.
	rec := executingRecord()
	rec["state"], rec["sum"] = "COMPLETED", checksum([]byte("the response"))
	delete(rec, "leaseUntil")
	if _, err := decode(opInspect, testRef, []any{int64(codeFound), int64(1), int64(1), packRecord(rec), "the response", nil}); err != nil {
		t.Fatalf("intact response: %v", err)
	}
	_, err := decode(opInspect, testRef, []any{int64(codeFound), int64(1), int64(1), packRecord(rec), "the respons3", nil})
	var ce *idemstore.CorruptRecordError
	if !errors.As(err, &ce) || ce.Field != "resp" {
		t.Fatalf("tampered response: err = %v, want a CorruptRecordError naming resp", err)
	}
}

func typeName(v any) string {
	switch v.(type) {
	case idemstore.Acquired:
		return "Acquired"
	case idemstore.InProgress:
		return "InProgress"
	case idemstore.AlreadyTransitioned:
		return "AlreadyTransitioned"
	case idemstore.Renewed:
		return "Renewed"
	case idemstore.Refused:
		return "Refused"
	case idemstore.Released:
		return "Released"
	case idemstore.Observation:
		return "Observation"
	}
	return "other"
}

// FuzzDecode feeds arbitrary replies to the decoder: it must never panic
// and must answer with a typed outcome of the script's sum or a typed
// error.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(0), uint8(codeAcquired), int64(1764460000000), int64(3600000), packRecord(executingRecord()), "", "", uint8(0))
	f.Add(uint8(7), uint8(codeFound), int64(1), int64(-2), packRecord(executingRecord()), "x", "", uint8(0))
	f.Add(uint8(2), uint8(codeCorrupt), int64(1), int64(1), "", "", "rev", uint8(3))
	f.Add(uint8(1), uint8(codeCompletedReplay), int64(0), int64(5), "9:COMPLETED-1:12:3-7:json-v21:2------8:00000000", "", "", uint8(0))
	for _, c := range []replyCode{codeTakenOver, codeReplayedAcquire, codeTransitioned, codeResolved, codeNotFound} {
		f.Add(uint8(c), uint8(c), int64(1), int64(1), packRecord(executingRecord()), "", "EXECUTING", uint8(2))
	}
	f.Fuzz(func(t *testing.T, opIdx, code uint8, now, pttl int64, rec, resp, extra string, mask uint8) {
		op := allOps[int(opIdx)%len(allOps)]
		arr := []any{int64(code), now, pttl, rec, resp, extra}
		for i := range 3 { // bits 0-2: rec, resp, extra are nil
			if mask&(1<<i) != 0 {
				arr[3+i] = nil
			}
		}
		if mask&8 != 0 {
			arr[0] = "a string"
		}
		if mask&16 != 0 {
			arr = arr[:int(code)%6]
		}
		var raw any = arr
		if mask&32 != 0 {
			raw = int64(len(rec))
		}
		out, err := decode(op, testRef, raw)
		checkDecoded(t, op, out, err)
	})
}
