package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"

	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// garbles returns the ways to break a field of the given kind: a bad
// value, out of range, a huge integer, a non-canonical integer, missing.
func garbles(k schema.Kind) []string {
	common := []string{"(missing)", "!", strings.Repeat("z", 64)}
	switch k {
	case schema.KindCount:
		return append(common, "0", "-1", "01", "1.5", "99999999999999999999", "9007199254740993", "1e+20")
	case schema.KindMillis:
		return append(common, "-1", "01", "99999999999999999999", "1e+20", " 1")
	case schema.KindFlag:
		return append(common, "2", "true")
	case schema.KindText:
		return []string{strings.Repeat("r", onceflow.MaxReasonLen+1)}
	case schema.KindOperation:
		return []string{"(missing)", "", strings.Repeat("o", onceflow.MaxOperationIDLen+1)}
	case schema.KindCodec:
		return append(common, "", "JSON", strings.Repeat("c", 33))
	case schema.KindState:
		return append(common, "RUNNING", "claimed")
	case schema.KindOwner, schema.KindFingerprint, schema.KindNonce:
		// Kept raw: any bytes of the right length are valid; the hex the
		// record kept before is not.
		n := schema.RawLen(k)
		return append(common, strings.Repeat("a", 2*n), strings.Repeat("\x00", n-1), strings.Repeat("\xff", n+1))
	}
	return append(common, "ABCDEF01", "0123456789abcdef0123456789abcdeg")
}

// TestNoScriptChangesACorruptRecord garbles every field of the schema in
// turn (a field of its own, or its part of the packed field m), in an
// EXECUTING and in a COMPLETED record, garbles m itself, and plants stray
// response chunks, and sends every script: each answers with a
// OutcomeCorrupt error naming the field and leaves the record byte for
// byte as it was. Only a replay may ignore a field it does not read.
func TestNoScriptChangesACorruptRecord(t *testing.T) {
	t.Parallel()
	s, client := sharedStore(t)
	ctx := context.Background()
	fields := []string{}
	for _, r := range schema.Fields {
		fields = append(fields, r.Name)
	}
	// resp3 and resp32: response chunks beyond the record's response (it
	// has none, or one chunk), planted.
	fields = append(fields, "resp", "resp3", "resp32", schema.MetaField)

	for _, completed := range []bool{false, true} {
		for _, field := range fields {
			kind := schema.KindText // resp: any bytes; its garble is a changed payload
			for _, r := range schema.Fields {
				if r.Name == field {
					kind = r.Kind
				}
			}
			gs := garbles(kind)
			switch field {
			case "resp":
				gs = []string{"(missing)", "tampered"}
			case "resp3", "resp32":
				gs = []string{"stray"}
			case schema.MetaField:
				// Too few parts, too many, none, m missing: m itself is
				// named (its first part, the state, valid).
				gs = []string{"EXECUTING:1", "EXECUTING:1:1:1:0:0:0::json:extra", "", "(missing)"}
			}
			for _, g := range gs {
				f := storetest.NewFixture()
				owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
				acq, err := s.ClaimStart(ctx, f.ClaimStart(owner, nonce))
				if err != nil {
					t.Fatal(err)
				}
				own, started := acq.(driver.Acquired).Ownership, acq.(driver.Acquired).Record
				if completed {
					out, err := s.Complete(ctx, driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: []byte(`{"ok":1}`), TTL: f.TTL})
					if err != nil {
						t.Fatal(err)
					}
					own = out.(driver.Transitioned).Ownership
				}
				key := s.Key(f.Ref)
				_, exists, err := getField(ctx, client, key, field)
				if err != nil {
					t.Fatal(err)
				}
				if g == "(missing)" && (!exists || !requiredIn(field, completed)) {
					continue // an optional field: missing is fine
				}
				if err := setField(ctx, client, key, field, g); err != nil {
					t.Fatal(err)
				}
				before := redistest.Snapshot(ctx, client, key)
				calls := map[string]func() (any, error){
					"claim": func() (any, error) { return s.Claim(ctx, f.Claim(onceflow.NewOwner())) },
					"claim+start by the owner": func() (any, error) {
						return s.ClaimStart(ctx, f.ClaimStart(owner, onceflow.NewNonce()))
					},
					"start": func() (any, error) {
						return s.Start(ctx, driver.StartRequest{Ownership: own, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
					},
					"complete": func() (any, error) {
						return s.Complete(ctx, driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: []byte("x"), TTL: f.TTL, Started: started})
					},
					"complete without the started record": func() (any, error) {
						return s.Complete(ctx, driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: []byte("x"), TTL: f.TTL})
					},
					"fail": func() (any, error) {
						return s.Fail(ctx, driver.FailRequest{Ownership: own, Nonce: nonce, Target: onceflow.StateAbandoned, TTL: f.TTL})
					},
					"renew": func() (any, error) {
						return s.Renew(ctx, driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL, Started: started})
					},
					"renew without the started record": func() (any, error) {
						return s.Renew(ctx, driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
					},
					"release": func() (any, error) { return s.Release(ctx, driver.ReleaseRequest{Ownership: own}) },
					"inspect": func() (any, error) { return s.Inspect(ctx, f.Ref) },
					"resolve": func() (any, error) {
						return s.Resolve(ctx, driver.ResolveRequest{Ref: f.Ref, Attempt: own.Attempt, Rev: own.Rev, Target: onceflow.StateFailedRetryable, TTL: f.TTL})
					},
				}
				for name, call := range calls {
					out, err := call()
					var ce *onceflow.Error
					corrupt := errors.As(err, &ce) && ce.Field == field
					switch {
					case corrupt:
					case completed && name != "inspect" && !replayReads(field) && isReplay(out, err):
						// A replay ignores a field it does not read.
					case completed && field == "resp" && g == "tampered" && replayIgnoresResp(name):
						// The payload is read only by a replay and INSPECT.
					default:
						t.Errorf("completed=%v %s = %.20q: %s answered %T %v, want an OutcomeCorrupt error naming %s",
							completed, field, g, name, out, err, field)
					}
				}
				if after := redistest.Snapshot(ctx, client, key); after != before {
					t.Errorf("completed=%v %s = %.20q: a script changed the corrupt record", completed, field, g)
				}
			}
		}
	}
}

// requiredIn reports whether a record in the state must have the field.
func requiredIn(field string, completed bool) bool {
	if field == schema.MetaField {
		return true
	}
	for _, r := range schema.Fields {
		if r.Name == field && r.Required {
			return true
		}
	}
	if completed {
		return field == "sum" || field == "resp"
	}
	return field == "leaseUntil" || field == "nonce"
}

// replayReads reports whether claim.lua's replay path reads the field.
func replayReads(field string) bool {
	switch field {
	case "state", "fp", "codec", "policy", "attempt", "rev", "createdAt", "sum", "resp", schema.MetaField:
		return true
	}
	return false
}

func isReplay(out any, err error) bool {
	_, ok := out.(driver.CompletedReplay)
	return ok && err == nil
}

func replayIgnoresResp(call string) bool {
	return call != "inspect" && !strings.HasPrefix(call, "claim")
}
