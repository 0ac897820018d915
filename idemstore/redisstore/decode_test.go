package redisstore

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
)

var testRef = onceflow.Ref{Code: "charge-payment", Digest: onceflow.Digest{Version: 1, Hex: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}

var allOps = []string{opClaim, opClaimStart, opStart, opComplete, opFail, opRenew, opRelease, opInspect, opResolve}

// decode runs op's typed decoder, for the tables and the fuzz test. (A nil
// outcome of a sum is a nil any.)
func decode(op string, ref onceflow.Ref, raw any) (any, error) {
	switch op {
	case opClaim, opClaimStart:
		req := driver.ClaimRequest{Ref: ref, Operation: "op", Fingerprint: onceflow.Fingerprint(testRef.Digest.Hex), Owner: onceflow.NewOwner(),
			Codec: "json", Policy: 1, Lease: time.Second, Retention: time.Second}
		var nonce onceflow.Nonce
		if op == opClaimStart {
			nonce = onceflow.NewNonce()
		}
		return decodeClaim(op, req, nonce, raw)
	case opComplete:
		// As the executor completes: with the record its start left, so
		// that both the full reply and the one without a record are
		// decoded.
		o := driver.Ownership{Ref: ref, Operation: "op", Owner: onceflow.NewOwner(), Attempt: 1, Rev: 2}
		return decodeComplete(o, onceflow.NewNonce(), &onceflow.Record{State: onceflow.StateExecuting, Attempt: 1, Rev: 2}, raw)
	case opStart, opFail:
		return decodeTransition(op, ref, idents{}, raw)
	case opRenew:
		// As the executor renews: with the record its start left, so that
		// both the full reply and the one that carries only leaseUntil
		// are decoded.
		req := driver.RenewRequest{Ref: ref, Operation: "op", Owner: onceflow.NewOwner(), Nonce: onceflow.NewNonce(), Lease: time.Second, Retention: time.Second}
		req.Started = onceflow.Record{State: onceflow.StateExecuting, Owner: req.Owner, Attempt: 1, Rev: 2, Operation: req.Operation, Nonce: req.Nonce}
		return decodeRenew(req, true, raw)
	case opRelease:
		return decodeRelease(ref, "", raw)
	case opInspect:
		out, err := decodeInspect(ref, raw)
		if err != nil {
			return nil, err
		}
		return out, nil
	case opResolve:
		return decodeResolve(ref, raw)
	}
	panic("no decoder for " + op)
}

// checkDecoded fails unless a decoder returned a typed outcome of op's sum
// or an OutcomeCorrupt error, and exactly one of them.
func checkDecoded(t *testing.T, op string, out any, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, onceflow.OutcomeCorrupt) {
			t.Fatalf("%s: error %v is not OutcomeCorrupt", op, err)
		}
		if out != nil {
			t.Fatalf("%s: error %v with an outcome %T", op, err, out)
		}
		return
	}
	var ok bool
	switch op {
	case opClaim, opClaimStart:
		_, ok = out.(driver.ClaimOutcome)
	case opStart, opComplete, opFail:
		_, ok = out.(driver.TransitionOutcome)
	case opRenew:
		_, ok = out.(driver.RenewOutcome)
	case opRelease:
		_, ok = out.(driver.ReleaseOutcome)
	case opInspect:
		_, ok = out.(driver.Observation)
	case opResolve:
		_, ok = out.(driver.ResolveOutcome)
	}
	if !ok {
		t.Fatalf("%s decoded to %T", op, out)
	}
}

// packRecord lists fields the way lua/record.lua's pack does: in schema
// order, "" when absent.
func packRecord(fields map[string]string) []string {
	parts := make([]string, len(schema.Fields))
	for i, r := range schema.Fields {
		parts[i] = fields[r.Name]
	}
	return parts
}

// replyOf builds a script's reply: the head (code, now, pttl, extra)
// alone when rec is nil, else an array of the head with the record's
// fields but the raw ones (NUL-separated, the raw ones empty), the raw
// ones, and the response when resp is not nil.
func replyOf(code schema.ReplyCode, now, pttl int64, extra string, rec []string, resp *string) any {
	h := strconv.FormatInt(int64(code), 10) + "\x00" + strconv.FormatInt(now, 10) + "\x00" + strconv.FormatInt(pttl, 10) + "\x00" + extra
	if rec == nil {
		return h
	}
	text := slices.Clone(rec)
	var raws []any
	for _, i := range rawFields {
		raws = append(raws, text[i])
		text[i] = ""
	}
	out := append([]any{h + "\x00" + strings.Join(text, "\x00")}, raws...)
	if resp != nil {
		out = append(out, *resp)
	}
	return out
}

// executingRecord is an EXECUTING record as a reply carries it: the owner,
// fingerprint and nonce raw.
func executingRecord() map[string]string {
	return map[string]string{
		"state": "EXECUTING", "owner": raw(strings.Repeat("a", 64)), "attempt": "1", "rev": "2", "op": "op-1",
		"fp": raw(strings.Repeat("f", 64)), "codec": "json-v2", "policy": "2", "leaseUntil": "1764460030000",
		"nonce": raw("0123456789abcdef0123456789abcdef"), "createdAt": "1764460000000", "updatedAt": "1764460000000",
	}
}

func validReply(code schema.ReplyCode) any {
	return replyOf(code, 1764460000000, 3600000, "", packRecord(executingRecord()), nil)
}

func TestDecodeKnownReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		op   string
		code schema.ReplyCode
		want any
	}{
		{opClaim, schema.Acquired, driver.Acquired{}},
		{opClaimStart, schema.InProgress, driver.InProgress{}},
		{opStart, schema.Already, driver.AlreadyTransitioned{}},
		{opRenew, schema.Renewed, driver.Renewed{}},
		{opRenew, schema.NonceMismatch, driver.Refused{}},
		{opRelease, schema.Released, driver.Released{}},
		{opInspect, schema.Found, driver.Observation{}},
		{opResolve, schema.StaleAttempt, driver.Refused{}},
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
		code schema.ReplyCode
	}{{opRenew, schema.StaleRev}, {opClaim, schema.Transitioned}, {opInspect, schema.Acquired}, {opRelease, schema.Already}, {opClaim, schema.NotFound}, {opClaim, 99}} {
		if _, err := decode(c.op, testRef, validReply(c.code)); !errors.Is(err, onceflow.OutcomeCorrupt) {
			t.Fatalf("%s %s: err = %v, want OutcomeCorrupt", c.op, c.code, err)
		}
	}
}

// TestDecodeChecksEveryFieldRule garbles each field of a reply's record in
// turn: the decoder refuses it with an OutcomeCorrupt error naming the
// field, by the same rules as the scripts.
func TestDecodeChecksEveryFieldRule(t *testing.T) {
	t.Parallel()
	// (An empty value packs as an absent field: "(missing)" covers it.
	// The hex of an owner, a fingerprint or a nonce is not its raw form.)
	garbles := []string{"x", "-1", "01", "9999999999999999", "99999999999999999999", strings.Repeat("Z", 64), "1e+20",
		strings.Repeat("a", 64), strings.Repeat("a", 31), strings.Repeat("a", 33), "0123456789abcdef0123456789abcdef"[:15]}
	for _, r := range schema.Fields {
		for _, g := range append(garbles, "(missing)") {
			rec := executingRecord()
			if g == "(missing)" {
				delete(rec, r.Name)
			} else {
				rec[r.Name] = g
			}
			if g != "(missing)" && r.Kind.Valid(g) {
				continue // not a garble for this kind
			}
			_, err := decode(opStart, testRef, replyOf(schema.Already, 1, 1, "", packRecord(rec), nil))
			_, present := executingRecord()[r.Name]
			wantErr := g != "(missing)" || r.Required || present && (r.Name == "leaseUntil" || r.Name == "nonce")
			var ce *onceflow.Error
			switch {
			case wantErr && (!errors.As(err, &ce) || ce.Field != r.Name):
				t.Errorf("%s = %q: err = %v, want an OutcomeCorrupt error naming %s", r.Name, g, err, r.Name)
			case !wantErr && err != nil:
				t.Errorf("%s = %q: err = %v, want none (an optional field)", r.Name, g, err)
			}
		}
	}
	// A response that does not match its checksum is refused.
	rec := executingRecord()
	rec["state"], rec["sum"] = "COMPLETED", checksum([]byte("the response"))
	delete(rec, "leaseUntil")
	resp := "the response"
	if _, err := decode(opInspect, testRef, replyOf(schema.Found, 1, 1, "", packRecord(rec), &resp)); err != nil {
		t.Fatalf("intact response: %v", err)
	}
	tampered := "the respons3"
	_, err := decode(opInspect, testRef, replyOf(schema.Found, 1, 1, "", packRecord(rec), &tampered))
	var ce *onceflow.Error
	if !errors.As(err, &ce) || ce.Field != "resp" {
		t.Fatalf("tampered response: err = %v, want an OutcomeCorrupt error naming resp", err)
	}
}

func typeName(v any) string {
	switch v.(type) {
	case driver.Acquired:
		return "Acquired"
	case driver.InProgress:
		return "InProgress"
	case driver.AlreadyTransitioned:
		return "AlreadyTransitioned"
	case driver.Renewed:
		return "Renewed"
	case driver.Refused:
		return "Refused"
	case driver.Released:
		return "Released"
	case driver.Observation:
		return "Observation"
	}
	return "other"
}

// FuzzDecode feeds arbitrary replies to the decoder: it must never panic
// and must answer with a typed outcome of the script's sum or a typed
// error.
func FuzzDecode(f *testing.F) {
	rec := packRecord(executingRecord())
	x := "x"
	replay := packRecord(map[string]string{"state": "COMPLETED", "attempt": "1", "rev": "2", "codec": "json-v2", "policy": "2", "sum": "e3069283"})
	add := func(op uint8, reply any, shape uint8) { f.Add(op, flatten(reply), shape) }
	add(0, replyOf(schema.Acquired, 1764460000000, 3600000, "", rec, nil), 0)
	add(0, replyOf(schema.Acquired, 1764460000000, 3600000, "", nil, nil), 0)
	add(7, replyOf(schema.Found, 1, -2, "", rec, &x), 0)
	add(2, replyOf(schema.Corrupt, 1, 1, "rev", nil, nil), 0)
	add(1, replyOf(schema.CompletedReplay, 0, 5, "", replay, &x), 0)
	add(5, replyOf(schema.Renewed, 1, 5, "1764460030000", nil, nil), 0)
	for _, c := range []schema.ReplyCode{schema.TakenOver, schema.ReplayedAcquire, schema.Transitioned, schema.Resolved, schema.NotFound} {
		add(uint8(c), replyOf(c, 1, 1, "EXECUTING", rec, nil), 1)
	}
	f.Fuzz(func(t *testing.T, opIdx uint8, raw string, shape uint8) {
		op := allOps[int(opIdx)%len(allOps)]
		out, err := decode(op, testRef, unflatten(raw, shape))
		checkDecoded(t, op, out, err)
	})
}

// flatten turns a reply into the fuzz test's input: a string reply as it
// is, an array's elements each after a 0x1e byte.
func flatten(reply any) string {
	arr, ok := reply.([]any)
	if !ok {
		return reply.(string)
	}
	var b strings.Builder
	for _, e := range arr {
		b.WriteByte(0x1e)
		b.WriteString(e.(string))
	}
	return b.String()
}

// unflatten is flatten's inverse, for any input: a string that starts
// with 0x1e is an array of the parts after each 0x1e, the others a string
// reply. shape bends it into what no script answers: a part that is an
// integer (odd shape: the part at shape/2), or an array nested in place
// of a part (shape over 128).
func unflatten(raw string, shape uint8) any {
	rest, ok := strings.CutPrefix(raw, "\x1e")
	if !ok {
		return raw
	}
	var out []any
	for _, p := range strings.Split(rest, "\x1e") {
		out = append(out, p)
	}
	if i := int(shape/2) % len(out); shape%2 == 1 {
		if shape > 128 {
			out[i] = []any{out[i]}
		} else {
			out[i] = int64(len(raw))
		}
	}
	return out
}

// TestDecodedIdentitiesAreTheRecords: a record's owner, fingerprint and
// nonce decode to the hex of the raw bytes the reply carries, whether or
// not the call sent the same ones (when it did, their strings are reused).
func TestDecodedIdentitiesAreTheRecords(t *testing.T) {
	t.Parallel()
	rec := executingRecord()
	reply := replyOf(schema.Already, 1, 1, "", packRecord(rec), nil)
	same := idents{owner: onceflow.Owner(strings.Repeat("a", 64)), fp: onceflow.Fingerprint(strings.Repeat("f", 64)), nonce: "0123456789abcdef0123456789abcdef"}
	other := idents{owner: onceflow.NewOwner(), fp: onceflow.Fingerprint(strings.Repeat("e", 64)), nonce: onceflow.NewNonce()}
	for _, sent := range []idents{same, other, {}, {owner: "A" + same.owner[1:], nonce: "zz"}} {
		out, err := decodeTransition(opStart, testRef, sent, reply)
		if err != nil {
			t.Fatal(err)
		}
		r := out.(driver.AlreadyTransitioned).Record
		if r.Owner != same.owner || r.Fingerprint != same.fp || r.Nonce != same.nonce {
			t.Fatalf("sent %+v: decoded owner %s, fp %s, nonce %s; want the record's", sent, r.Owner, r.Fingerprint, r.Nonce)
		}
	}
}
