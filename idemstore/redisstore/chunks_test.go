package redisstore_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestStrayResponseChunksAreRefused plants a response chunk field beyond
// the record's response (resp3 of a record that has no resp2) with HSET,
// then sends what would write a response next: a takeover then COMPLETE,
// a RESOLVE to COMPLETED, a COMPLETE. Unchecked, the stray chunk was
// joined into the new response, which was reported written and then
// refused as corrupt on every replay. Every script (but a replay, which
// reads only its chunks and checks their sum) now refuses the record as
// corrupt, naming the chunk, and changes nothing; no replay ever returns
// bytes that were not written as one response.
func TestStrayResponseChunksAreRefused(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	s := newStore(t, redisstore.Config{Client: client})
	resp := bytes.Repeat([]byte("0123456789"), 10) // 100 bytes: two chunks, resp and resp2

	wantCorrupt := func(t *testing.T, what, field string, err error) {
		t.Helper()
		var ce *onceflow.Error
		if !errors.As(err, &ce) || ce.Field != field {
			t.Fatalf("%s: err = %v, want an OutcomeCorrupt error naming %s", what, err, field)
		}
	}
	plant := func(t *testing.T, f storetest.Fixture, field string) (before string) {
		t.Helper()
		key := s.Key(f.Ref)
		if err := client.HSet(t.Context(), key, field, "STRAY").Err(); err != nil {
			t.Fatal(err)
		}
		return redistest.Snapshot(t.Context(), client, key)
	}
	unchanged := func(t *testing.T, f storetest.Fixture, before string) {
		t.Helper()
		if after := redistest.Snapshot(t.Context(), client, s.Key(f.Ref)); after != before {
			t.Fatal("a script changed the record with the stray chunk")
		}
	}

	t.Run("takeover of FAILED_RETRYABLE", func(t *testing.T) {
		f := storetest.NewFixture()
		own, nonce := executingOwnership(t, s, f)
		as[driver.Transitioned](t)(s.Fail(t.Context(), driver.FailRequest{Ownership: own, Nonce: nonce, Target: onceflow.StateFailedRetryable, TTL: f.TTL}))
		before := plant(t, f, "resp3")
		_, err := s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
		wantCorrupt(t, "claim+start", "resp3", err)
		_, err = s.Inspect(t.Context(), f.Ref)
		wantCorrupt(t, "inspect", "resp3", err)
		unchanged(t, f, before)
	})
	t.Run("resolve of ABANDONED", func(t *testing.T) {
		f := storetest.NewFixture()
		own, nonce := executingOwnership(t, s, f)
		ab := as[driver.Transitioned](t)(s.Fail(t.Context(), driver.FailRequest{Ownership: own, Nonce: nonce, Target: onceflow.StateAbandoned, TTL: f.TTL}))
		before := plant(t, f, "resp3")
		_, err := s.Resolve(t.Context(), driver.ResolveRequest{Ref: f.Ref, Attempt: ab.Record.Attempt, Rev: ab.Record.Rev,
			Target: onceflow.StateCompleted, Response: resp, Codec: f.Codec, Policy: f.Policy, TTL: f.TTL})
		wantCorrupt(t, "resolve to COMPLETED", "resp3", err)
		unchanged(t, f, before)
	})
	t.Run("complete of EXECUTING", func(t *testing.T) {
		for _, field := range []string{"resp3", "resp32"} {
			f := storetest.NewFixture()
			own, nonce := executingOwnership(t, s, f)
			before := plant(t, f, field)
			_, err := s.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL})
			wantCorrupt(t, "complete with "+field, field, err)
			unchanged(t, f, before)
			// No replay of a response joined with the stray chunk.
			if out, err := s.Claim(t.Context(), f.Claim(onceflow.NewOwner())); err == nil {
				if rep, ok := out.(driver.CompletedReplay); ok {
					t.Fatalf("replayed %q after a refused complete", rep.Record.Response)
				}
			}
		}
	})
	t.Run("a gap in a completed response", func(t *testing.T) {
		// resp, resp2 and a stray resp4: the replay reads the first four
		// chunk fields, finds a chunk after a missing one and refuses the
		// record, as every other script does.
		f := storetest.NewFixture()
		own, nonce := executingOwnership(t, s, f)
		as[driver.Transitioned](t)(s.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL}))
		before := plant(t, f, "resp4")
		_, err := s.Claim(t.Context(), f.Claim(onceflow.NewOwner()))
		wantCorrupt(t, "replay", "resp4", err)
		_, err = s.Inspect(t.Context(), f.Ref)
		wantCorrupt(t, "inspect", "resp4", err)
		unchanged(t, f, before)
	})
	t.Run("a stray chunk the replay reads", func(t *testing.T) {
		// resp, resp2 (36 bytes) and a stray resp3: a chunk after one
		// shorter than a whole chunk; the replay refuses it by name.
		f := storetest.NewFixture()
		own, nonce := executingOwnership(t, s, f)
		as[driver.Transitioned](t)(s.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL}))
		plant(t, f, "resp3")
		_, err := s.Claim(t.Context(), f.Claim(onceflow.NewOwner()))
		wantCorrupt(t, "replay", "resp3", err)
		_, err = s.Inspect(t.Context(), f.Ref)
		wantCorrupt(t, "inspect", "resp3", err)
	})
	t.Run("other extra fields are refused by name", func(t *testing.T) {
		// A field that is neither the record's nor a chunk (a record of
		// this key version holds no other; a field of the layout before
		// it, a name a chunk does not have) is refused by name, as a
		// stray chunk is, and nothing is written.
		for _, field := range []string{"note", "resp1", "resp33", "response", "state", "leaseUntil"} {
			f := storetest.NewFixture()
			own, nonce := executingOwnership(t, s, f)
			before := plant(t, f, field)
			_, err := s.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL})
			wantCorrupt(t, "complete", field, err)
			_, err = s.Inspect(t.Context(), f.Ref)
			wantCorrupt(t, "inspect", field, err)
			unchanged(t, f, before)
		}
	})
}
