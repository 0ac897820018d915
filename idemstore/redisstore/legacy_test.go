package redisstore

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/redistest"
)

// The previous version's generated claim.lua and transition.lua (before
// the packed field m, commit 9f55e7b), as it sent them: records written
// with them are the records a rolling upgrade meets, for as long as they
// live (the replay TTL).
var (
	//go:embed testdata/unpacked/claim.lua
	unpackedClaim string
	//go:embed testdata/unpacked/transition.lua
	unpackedTransition string
)

// unpackedWriter writes records the way the previous version did.
type unpackedWriter struct {
	t      *testing.T
	client redis.Cmdable
	s      *Store
}

// claimStart is the previous version's ClaimStart.
func (w unpackedWriter) claimStart(f storetest.Fixture, owner onceflow.Owner, nonce onceflow.Nonce, lease time.Duration) {
	w.t.Helper()
	err := w.client.Eval(context.Background(), unpackedClaim, []string{w.s.Key(f.Ref)},
		string(owner), string(f.Operation), string(f.Fingerprint), f.Codec, f.Policy, lease.Milliseconds(), f.TTL.Milliseconds(), string(nonce)).Err()
	if err != nil {
		w.t.Fatal(err)
	}
}

// complete is the previous version's Complete of rev 1.
func (w unpackedWriter) complete(f storetest.Fixture, owner onceflow.Owner, nonce onceflow.Nonce, resp []byte) {
	w.t.Helper()
	err := w.client.Eval(context.Background(), unpackedTransition, []string{w.s.Key(f.Ref)},
		string(owner), string(f.Operation), 1, "COMPLETED", "EXECUTING", string(nonce), "", f.TTL.Milliseconds(), "1", resp, checksum(resp), "").Err()
	if err != nil {
		w.t.Fatal(err)
	}
}

// layoutOf says which layout a record is stored in, and fails the test on
// a mix of the two.
func layoutOf(t *testing.T, client redis.Cmdable, key string) string {
	t.Helper()
	fields, err := client.HKeys(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var packed, unpacked bool
	for _, f := range fields {
		packed = packed || f == schema.MetaField
		for _, l := range schema.LegacyFields() {
			unpacked = unpacked || f == l
		}
	}
	switch {
	case packed && !unpacked:
		return "packed"
	case unpacked && !packed:
		return "unpacked"
	}
	t.Fatalf("record %s mixes the layouts: %v", key, fields)
	return ""
}

// TestRecordsOfTheLayoutBeforeMKeepWorking writes records with the
// previous version's scripts and drives them with this one: a COMPLETED
// record is replayed (by claim.lua: the replay read declines a record
// without m) and inspected, and stays as it is; an EXECUTING one is
// renewed, completed (and then is in the packed layout, replayed by the
// read); an expired one is taken over, with its attempt and uncertainty
// carried into m.
func TestRecordsOfTheLayoutBeforeMKeepWorking(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	s := testStore(t, Config{Client: client, Namespace: redistest.Namespace(t)})
	old := unpackedWriter{t, client, s}
	ctx := context.Background()
	resp := bytes.Repeat([]byte("0123456789"), 10) // two chunks

	t.Run("completed: replayed and inspected, left as it is", func(t *testing.T) {
		f := storetest.NewFixture()
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		old.claimStart(f, owner, nonce, f.Lease)
		old.complete(f, owner, nonce, resp)
		key := s.Key(f.Ref)
		if got := layoutOf(t, client, key); got != "unpacked" {
			t.Fatalf("the previous version wrote a %s record", got)
		}
		before := redistest.Snapshot(ctx, client, key)
		for _, claim := range []func() (driver.ClaimOutcome, error){
			func() (driver.ClaimOutcome, error) { return s.Claim(ctx, f.Claim(onceflow.NewOwner())) },
			func() (driver.ClaimOutcome, error) {
				return s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
			},
		} {
			out, err := claim()
			rep, ok := out.(driver.CompletedReplay)
			if err != nil || !ok || !bytes.Equal(rep.Record.Response, resp) || rep.Record.Attempt != 1 || rep.Record.Rev != 2 {
				t.Fatalf("claim = %T %+v, %v; want the replay of attempt 1, rev 2", out, out, err)
			}
		}
		obs, err := s.Inspect(ctx, f.Ref)
		if err != nil || obs.Record.State != onceflow.StateCompleted || obs.Record.Owner != owner || !bytes.Equal(obs.Record.Response, resp) {
			t.Fatalf("inspect = %+v, %v", obs.Record, err)
		}
		other := f
		other.Codec = "other"
		if out, err := s.Claim(ctx, other.Claim(onceflow.NewOwner())); err != nil {
			t.Fatal(err)
		} else if _, ok := out.(driver.CodecMismatch); !ok {
			t.Fatalf("claim under another codec = %T", out)
		}
		if redistest.Snapshot(ctx, client, key) != before {
			t.Fatal("a replay changed the record")
		}
	})

	t.Run("executing: renewed, completed, then packed", func(t *testing.T) {
		f := storetest.NewFixture()
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		old.claimStart(f, owner, nonce, time.Second)
		key := s.Key(f.Ref)
		lease0, _ := strconv.ParseInt(client.HGet(ctx, key, "leaseUntil").Val(), 10, 64)
		out, err := s.Renew(ctx, driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
		ren, ok := out.(driver.Renewed)
		if err != nil || !ok || ren.Record.LeaseUntil.UnixMilli() <= lease0 {
			t.Fatalf("renew = %T %+v, %v; want the lease moved past %d", out, out, err, lease0)
		}
		// A start re-sent by the same invocation refreshes its lease and
		// rewrites the record in the packed layout.
		out2, err := s.ClaimStart(ctx, f.ClaimStart(owner, nonce))
		if _, ok := out2.(driver.ReplayedAcquire); err != nil || !ok {
			t.Fatalf("re-sent claim+start = %T, %v", out2, err)
		}
		if got := layoutOf(t, client, key); got != "packed" {
			t.Fatalf("after a write the record is %s", got)
		}
		own := driver.Ownership{Ref: f.Ref, Operation: f.Operation, Owner: owner, Attempt: 1, Rev: 1}
		done, err := s.Complete(ctx, driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL})
		if _, ok := done.(driver.Transitioned); err != nil || !ok {
			t.Fatalf("complete = %T %+v, %v", done, done, err)
		}
		served := s.plainReplays.Load()
		rep, err := s.Claim(ctx, f.Claim(onceflow.NewOwner()))
		if r, ok := rep.(driver.CompletedReplay); err != nil || !ok || !bytes.Equal(r.Record.Response, resp) {
			t.Fatalf("replay = %T, %v", rep, err)
		}
		if s.plainReplays.Load() != served+1 {
			t.Fatal("the converted record was not replayed by the read")
		}
	})

	t.Run("executing, completed without a write before", func(t *testing.T) {
		f := storetest.NewFixture()
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		old.claimStart(f, owner, nonce, f.Lease)
		own := driver.Ownership{Ref: f.Ref, Operation: f.Operation, Owner: owner, Attempt: 1, Rev: 1}
		done, err := s.Complete(ctx, driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL})
		if _, ok := done.(driver.Transitioned); err != nil || !ok {
			t.Fatalf("complete = %T %+v, %v", done, done, err)
		}
		if got := layoutOf(t, client, s.Key(f.Ref)); got != "packed" {
			t.Fatalf("after COMPLETE the record is %s", got)
		}
		obs, err := s.Inspect(ctx, f.Ref)
		if err != nil || obs.Record.Rev != 2 || obs.Record.Codec != f.Codec || obs.Record.Policy != f.Policy || obs.Record.EffectUnknown {
			t.Fatalf("inspect = %+v, %v", obs.Record, err)
		}
	})

	t.Run("expired: taken over, uncertain", func(t *testing.T) {
		f := storetest.NewFixture()
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		old.claimStart(f, owner, nonce, time.Millisecond)
		key := s.Key(f.Ref)
		// The lease ends by Redis' clock: wait for it there, not by a sleep.
		lease, _ := strconv.ParseInt(client.HGet(ctx, key, "leaseUntil").Val(), 10, 64)
		for {
			now, err := client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if now.UnixMilli() > lease {
				break
			}
		}
		out, err := s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
		tk, ok := out.(driver.TakenOver)
		if err != nil || !ok || tk.From != onceflow.StateExecuting || !tk.EffectUnknown || tk.Record.Attempt != 2 || tk.Record.Rev != 2 {
			t.Fatalf("claim = %T %+v, %v; want EXECUTING taken over, attempt 2, uncertain", out, out, err)
		}
		if got := layoutOf(t, client, key); got != "packed" {
			t.Fatalf("after a takeover the record is %s", got)
		}
		if v, ok, _ := getField(ctx, client, key, "uncertain"); !ok {
			t.Fatalf("uncertain = %q after the takeover", v)
		}
	})

	t.Run("a field of the old layout breaking its rule is refused", func(t *testing.T) {
		for _, field := range schema.LegacyFields() {
			f := storetest.NewFixture()
			owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
			old.claimStart(f, owner, nonce, f.Lease)
			old.complete(f, owner, nonce, resp)
			key := s.Key(f.Ref)
			if err := client.HSet(ctx, key, field, "!").Err(); err != nil {
				t.Fatal(err)
			}
			before := redistest.Snapshot(ctx, client, key)
			_, err := s.Claim(ctx, f.Claim(onceflow.NewOwner()))
			var ce *onceflow.CorruptRecordError
			if !errors.As(err, &ce) || ce.Field != field {
				t.Errorf("%s = \"!\": claim answered %v, want a CorruptRecordError naming it", field, err)
			}
			if redistest.Snapshot(ctx, client, key) != before {
				t.Errorf("%s = \"!\": the claim changed the record", field)
			}
		}
	})
}
