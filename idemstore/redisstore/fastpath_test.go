package redisstore

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestFastPathsTakeTheCommonCase runs a fresh operation (claim+start,
// renew with the record the start left and without it, complete with it)
// and another (claim+start, complete without it) on a server of its own and reads INFO commandstats: the claim found a new key
// with EXISTS, the renewals and the completion read the record with one
// HGETALL each, and none of them went on to the full path (its load is the
// only caller of HLEN).
func TestFastPathsTakeTheCommonCase(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := redistest.NewClient(t, srv.Addr())
	s, err := New(Config{Client: client, CommandTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := storetest.NewFixture()
	owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
	s.gate.misses.Store(missLimit) // no replay read first: the count is the scripts'
	s.gate.skipped.Store(1)
	out, err := s.ClaimStart(ctx, f.ClaimStart(owner, nonce))
	if err != nil {
		t.Fatal(err)
	}
	own := out.(driver.Acquired).Ownership
	for _, started := range []onceflow.Record{out.(driver.Acquired).Record, {}} {
		if _, err := s.Renew(ctx, driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL, Started: started}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Complete(ctx, driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: []byte("done"), TTL: f.TTL, Started: out.(driver.Acquired).Record}); err != nil {
		t.Fatal(err)
	}
	// And a completion without the record its start left.
	g := storetest.NewFixture()
	out, err = s.ClaimStart(ctx, g.ClaimStart(owner, nonce))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, driver.CompleteRequest{Ownership: out.(driver.Acquired).Ownership, Nonce: nonce, Response: []byte("done"), TTL: g.TTL}); err != nil {
		t.Fatal(err)
	}
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := func(cmd string) int {
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
				var n int
				fmt.Sscanf(rest, "%d", &n)
				return n
			}
		}
		return 0
	}
	for cmd, want := range map[string]int{"exists": 2, "hgetall": 4, "hmget": 0, "hlen": 0} {
		if got := calls(cmd); got != want {
			t.Errorf("%s was called %d times, want %d (a fast path fell back to the full path)", cmd, got, want)
		}
	}
}

// TestFastPathsWriteWhatTheFullPathWrites runs the same fresh operation
// (claim+start, renewals, complete) twice: on a record as its start left it,
// which the fast paths take, and on the same record with a reason, which
// the fast paths do not take (an EXECUTING record as its start left it
// has none) and load accepts, which sends renew and complete down the
// full path. After each step the records (their fields in order, the
// reason left out) and the outcomes (the reason left out) are the same,
// but for the times.
func TestFastPathsWriteWhatTheFullPathWrites(t *testing.T) {
	t.Parallel()
	s, client := sharedStore(t)
	ctx := context.Background()
	for k, size := range []int{0, 10, schema.ChunkSize, 100, schema.ChunkSize * schema.MaxChunks, schema.ChunkSize*schema.MaxChunks + 1, 0, 100, schema.ChunkSize*schema.MaxChunks + 1} {
		withStarted := k < 6
		resp := []byte(strings.Repeat("r", size))
		var steps [2][]string
		for i, extra := range []bool{false, true} {
			f := storetest.NewFixture()
			key := s.Key(f.Ref)
			owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
			step := func(out any, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				steps[i] = append(steps[i], fmt.Sprintf("%#v", scrubOutcome(out)), scrubRecord(t, client, key))
			}
			out, err := s.ClaimStart(ctx, f.ClaimStart(owner, nonce))
			step(out, err)
			if extra {
				if err := setField(ctx, client, key, "reason", "a reason the fast paths do not expect"); err != nil {
					t.Fatal(err)
				}
			}
			own := out.(driver.Acquired).Ownership
			// A lease shorter than the one left is not moved, a longer one
			// is; with the record the start left (the fast path compares
			// fp and m with it and answers leaseUntil alone) and without.
			for _, lease := range []time.Duration{time.Second, 2 * f.Lease, 3 * f.Lease} {
				for _, started := range []onceflow.Record{out.(driver.Acquired).Record, {}} {
					step(s.Renew(ctx, driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: lease, Retention: f.TTL, Started: started}))
				}
			}
			// With the record the start left (the fast path compares fp
			// and m with it and answers without the record) or without.
			var started onceflow.Record
			if withStarted {
				started = out.(driver.Acquired).Record
			}
			step(s.Complete(ctx, driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL, Started: started}))
			// Re-sent: the record is COMPLETED (the full path answers).
			step(s.Complete(ctx, driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL, Started: started}))
		}
		for n := range steps[0] {
			if steps[0][n] != steps[1][n] {
				t.Errorf("response of %d B (completed with its start's record: %v), step %d: the fast path gives\n%s\nthe full path\n%s", size, withStarted, n/2, steps[0][n], steps[1][n])
			}
		}
	}
}

// scrubOutcome zeroes what differs from run to run in an outcome: the
// record's key, owner, operation, times and nonce, and its reason.
func scrubOutcome(out any) any {
	scrub := func(r onceflow.Record) onceflow.Record {
		r.Owner, r.Operation, r.Nonce, r.Reason = "", "", "", ""
		r.LeaseUntil, r.CreatedAt, r.UpdatedAt, r.ServerTime, r.TTL = time.Time{}, time.Time{}, time.Time{}, time.Time{}, 0
		return r
	}
	own := func(o driver.Ownership) driver.Ownership {
		o.Ref, o.Owner, o.Operation = onceflow.Ref{}, "", ""
		return o
	}
	switch o := out.(type) {
	case driver.Acquired:
		return driver.Acquired{Ownership: own(o.Ownership), Record: scrub(o.Record)}
	case driver.Renewed:
		return driver.Renewed{Record: scrub(o.Record)}
	case driver.Transitioned:
		return driver.Transitioned{Ownership: own(o.Ownership), Record: scrub(o.Record)}
	case driver.AlreadyTransitioned:
		return driver.AlreadyTransitioned{Record: scrub(o.Record)}
	}
	return reflect.TypeOf(out).String()
}

// scrubRecord reads a record's fields in order, but its reason, with the
// values that differ from run to run (owner, op, nonce, times) replaced
// by their length.
func scrubRecord(t *testing.T, client redis.Cmdable, key string) string {
	t.Helper()
	// Through a script: its HGETALL is a flat list, in the hash's order.
	v, err := client.Eval(context.Background(), "return redis.call('HGETALL', KEYS[1])", []string{key}).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i+1 < len(v); i += 2 {
		k, x := v[i], v[i+1]
		switch k {
		case storedKey("reason"):
			continue
		case storedKey("owner"), storedKey("op"), storedKey("nonce"), storedKey("leaseUntil"):
			x = fmt.Sprintf("(%d bytes)", len(x))
		case schema.MetaField:
			p := strings.Split(x, string(schema.MetaSep))
			if len(p) == schema.NumMeta {
				p[4], p[5] = "created", "updated"
			}
			x = strings.Join(p, string(schema.MetaSep))
		}
		fmt.Fprintf(&b, "%s=%s ", k, x)
	}
	return b.String()
}

// TestARenewalComparesTheStartedRecordWithTheStoredOne: a renewal whose
// Started record differs from the stored one in a packed part (here the
// revision and the update time; a record the start did not leave) is
// answered from the stored record, by the full path, never from what the
// caller sent.
func TestARenewalComparesTheStartedRecordWithTheStoredOne(t *testing.T) {
	t.Parallel()
	s, _ := sharedStore(t)
	ctx := context.Background()
	f, acq, nonce := started(t, s)
	owner, stored := acq.Ownership.Owner, acq.Record
	for name, change := range map[string]func(r *onceflow.Record){
		"rev":       func(r *onceflow.Record) { r.Rev += 4 },
		"attempt":   func(r *onceflow.Record) { r.Attempt++ },
		"updatedAt": func(r *onceflow.Record) { r.UpdatedAt = r.UpdatedAt.Add(time.Millisecond) },
		"uncertain": func(r *onceflow.Record) { r.EffectUnknown = true },
		"fp":        func(r *onceflow.Record) { r.Fingerprint = onceflow.FingerprintOf([]byte("another")) },
	} {
		started := stored
		change(&started)
		rn, err := s.Renew(ctx, driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL, Started: started})
		if err != nil {
			t.Fatal(err)
		}
		got := rn.(driver.Renewed).Record
		if got.Attempt != stored.Attempt || got.Rev != stored.Rev {
			t.Errorf("started record with another %s: renewed attempt %d rev %d, want the stored %d and %d", name, got.Attempt, got.Rev, stored.Attempt, stored.Rev)
		}
	}
}

// TestACompletionComparesTheStartedRecordWithTheStoredOne: a completion
// whose Started record differs from the stored one in a packed part is
// applied and answered from the stored record, by the full path, never
// from what the caller sent.
func TestACompletionComparesTheStartedRecordWithTheStoredOne(t *testing.T) {
	t.Parallel()
	s, _ := sharedStore(t)
	ctx := context.Background()
	for name, change := range map[string]func(r *onceflow.Record){
		"policy":    func(r *onceflow.Record) { r.Policy++ },
		"codec":     func(r *onceflow.Record) { r.Codec = "other-codec" },
		"createdAt": func(r *onceflow.Record) { r.CreatedAt = r.CreatedAt.Add(-time.Millisecond) },
		"uncertain": func(r *onceflow.Record) { r.EffectUnknown = true },
		"fp":        func(r *onceflow.Record) { r.Fingerprint = onceflow.FingerprintOf([]byte("another")) },
	} {
		f, acq, nonce := started(t, s)
		sent := acq.Record
		change(&sent)
		done, err := s.Complete(ctx, driver.CompleteRequest{Ownership: acq.Ownership, Nonce: nonce, Response: []byte("r"), TTL: f.TTL, Started: sent})
		if err != nil {
			t.Fatal(err)
		}
		got := done.(driver.Transitioned).Record
		want := acq.Record
		if got.Policy != want.Policy || got.Codec != want.Codec || !got.CreatedAt.Equal(want.CreatedAt) || got.EffectUnknown || got.Fingerprint != want.Fingerprint {
			t.Errorf("started record with another %s: completed %+v, want the stored record's parts %+v", name, got, want)
		}
		obs, err := s.Inspect(ctx, f.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if r := obs.Record; r.Policy != want.Policy || r.Codec != want.Codec || !r.CreatedAt.Equal(want.CreatedAt) || r.Fingerprint != want.Fingerprint {
			t.Errorf("started record with another %s: stored %+v, want the stored record's parts kept", name, r)
		}
	}
}

// sharedStore is a store on the tests' shared redis-server, in a
// namespace of the test's own, and its client.
func sharedStore(t *testing.T) (*Store, *redis.Client) {
	t.Helper()
	client := redistest.Client(t)
	s, err := New(Config{Client: client, Namespace: redistest.Namespace(t), CommandTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, client
}

// started claims and starts a new fixture's record and returns the
// outcome and the nonce.
func started(t *testing.T, s *Store) (storetest.Fixture, driver.Acquired, onceflow.Nonce) {
	t.Helper()
	f := storetest.NewFixture()
	nonce := onceflow.NewNonce()
	out, err := s.ClaimStart(context.Background(), f.ClaimStart(onceflow.NewOwner(), nonce))
	if err != nil {
		t.Fatal(err)
	}
	return f, out.(driver.Acquired), nonce
}
