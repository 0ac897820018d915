package redisstore

import (
	"bytes"
	"errors"
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

func validReply(status string) []any {
	return []any{status, "1764460000000", "3600000",
		"state", "EXECUTING", "owner", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"attempt", "1", "rev", "2", "op", "op-1", "fp", "ffff", "codec", "json-v2", "policy", "2",
		"leaseUntil", "1764460030000", "nonce", "0123456789abcdef0123456789abcdef", "uncertain", "0"}
}

func TestDecodeKnownReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		op, status string
		want       any
	}{
		{opClaim, "ACQUIRED", idemstore.Acquired{}},
		{opClaimStart, "IN_PROGRESS", idemstore.InProgress{}},
		{opStart, "ALREADY", idemstore.AlreadyTransitioned{}},
		{opRenew, "RENEWED", idemstore.Renewed{}},
		{opRenew, "NONCE_MISMATCH", idemstore.Refused{}},
		{opRelease, "RELEASED", idemstore.Released{}},
		{opInspect, "FOUND", idemstore.Observation{}},
		{opResolve, "STALE_ATTEMPT", idemstore.Refused{}},
	}
	for _, c := range cases {
		out, err := decode(c.op, testRef, validReply(c.status))
		if err != nil {
			t.Fatalf("%s %s: %v", c.op, c.status, err)
		}
		if got, want := typeName(out), typeName(c.want); got != want {
			t.Fatalf("%s %s decoded to %s, want %s", c.op, c.status, got, want)
		}
	}
	// A status that belongs to another script is not guessed at.
	for _, c := range [][2]string{{opRenew, "STALE_REV"}, {opClaim, "TRANSITIONED"}, {opInspect, "ACQUIRED"}, {opRelease, "ALREADY"}} {
		if _, err := decode(c[0], testRef, validReply(c[1])); !errors.Is(err, idemstore.ErrUnexpectedReply) {
			t.Fatalf("%s %s: err = %v, want ErrUnexpectedReply", c[0], c[1], err)
		}
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
	f.Add(uint8(0), []byte("ACQUIRED\x001764460000000\x003600000\x00state\x00CLAIMED"))
	f.Add(uint8(7), []byte("FOUND\x001\x00-2\x00state\x00COMPLETED\x00resp\x00x"))
	f.Add(uint8(2), []byte("CORRUPT\x001\x001\x00_corrupt\x00rev\x00rev\x00abc"))
	for _, st := range []string{"TAKEN_OVER", "REPLAYED_ACQUIRE", "TRANSITIONED", "RESOLVED", "NOT_FOUND"} {
		var b bytes.Buffer
		for i, v := range validReply(st) {
			if i > 0 {
				b.WriteByte(0)
			}
			b.WriteString(v.(string))
		}
		f.Add(uint8(len(st)), b.Bytes())
	}
	f.Fuzz(func(t *testing.T, opIdx uint8, data []byte) {
		op := allOps[int(opIdx)%len(allOps)]
		var raw any
		switch {
		case len(data) > 0 && data[0] == 'I': // not an array
			raw = int64(len(data))
		default:
			parts := bytes.Split(data, []byte{0})
			arr := make([]any, len(parts))
			for i, p := range parts {
				if len(p) == 1 && p[0] == 'N' {
					arr[i] = int64(7) // a non-string element
					continue
				}
				arr[i] = string(p)
			}
			raw = arr
		}
		out, err := decode(op, testRef, raw)
		checkDecoded(t, op, out, err)
	})
}
