// Package storetest holds the contract suite that every driver.Store
// must pass, and a fault-injecting Store wrapper for testing callers.
//
// Run the suite from a test of the implementation:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			NewStore: func(t *testing.T) driver.Store { return newStoreUnderTest(t) },
//		})
//	}
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// Harness tells the suite how to get a store.
type Harness struct {
	// NewStore returns the store under test. It is called once per test;
	// tests run in parallel and use keys of their own, so it may return
	// the same store every time.
	NewStore func(t *testing.T) driver.Store
	// MaxResponseBytes is the response limit the store was configured
	// with. Default driver.DefaultMaxResponseBytes.
	MaxResponseBytes int
}

// Run runs the contract suite.
func Run(t *testing.T, h Harness) {
	if h.MaxResponseBytes == 0 {
		h.MaxResponseBytes = driver.DefaultMaxResponseBytes
	}
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"ClaimAcquiresAMissingRecord", testClaimAcquires},
		{"ClaimStartGoesStraightToExecuting", testClaimStart},
		{"ClaimChecksTheFingerprintBeforeAnything", testFingerprintFirst},
		{"ClaimReplaysACompletedRecord", testCompletedReplay},
		{"ClaimReportsACodecOrPolicyMismatch", testCodecMismatch},
		{"ClaimOfAbandonedRequiresRecovery", testAwaitingDecision},
		{"ClaimBySameOwnerReplaysTheAcquire", testReplayedAcquire},
		{"ClaimBySameOwnerForAnotherOperationConflicts", testOwnerOperationConflict},
		{"ClaimBySameOwnerAfterItsLeaseExpiredTakesOver", testSameOwnerTakeover},
		{"InFlightRecordsOutliveTheirLeaseByTheRetention", testInFlightTTL},
		{"ClaimTakesOverAndSaysWhatItTookOver", testTakeover},
		{"TakeoverEffectUnknownSurvivesUntilSettled", testEffectUnknownPersists},
		{"ClaimOfALiveLeaseIsInProgress", testInProgress},
		{"ConcurrentClaimsAcquireOnce", testConcurrentClaims},
		{"TransitionResentAfterLostReplyIsAlready", testTransitionAlready},
		{"TransitionRefusesStaleOrForeignWriters", testTransitionRefusals},
		{"RenewReallyExtendsLeaseAndTTL", testRenewExtends},
		{"RenewRefusesAndChangesNothing", testRenewRefusals},
		{"StartedRecordIsComparedNeverTrusted", testStartedRecord},
		{"ReleaseOnlyFromClaimed", testRelease},
		{"ResolveSettlesAbandoned", testResolve},
		{"ResolveFailsForGoodAndReopens", testResolveFailed},
		{"InvalidInputWritesNothing", testInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, h)
		})
	}
}

// Fixture builds valid requests for one fresh record.
type Fixture struct {
	Ref         onceflow.Ref
	Operation   onceflow.OperationID
	Fingerprint onceflow.Fingerprint
	Codec       string
	Policy      int
	Lease       time.Duration
	// TTL is the retention of in-flight records (ClaimRequest.Retention)
	// and the TTL of completed and failed ones.
	TTL time.Duration
}

// NewFixture returns a fixture for a record no one else uses.
func NewFixture() Fixture {
	return Fixture{
		Ref:         onceflow.Ref{Code: "charge-payment", Digest: onceflow.Digest{Version: 1, Hex: RandomHex(32)}},
		Operation:   onceflow.OperationID("op-" + RandomHex(8)),
		Fingerprint: onceflow.FingerprintOf([]byte("request")),
		Codec:       "json-v2",
		Policy:      2,
		Lease:       time.Minute,
		TTL:         time.Hour,
	}
}

// Claim returns a claim request by owner.
func (f Fixture) Claim(owner onceflow.Owner) driver.ClaimRequest {
	return driver.ClaimRequest{
		Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint, Owner: owner,
		Codec: f.Codec, Policy: f.Policy, Lease: f.Lease, Retention: f.TTL,
	}
}

// ClaimStart returns a fused claim+start request by owner with nonce.
func (f Fixture) ClaimStart(owner onceflow.Owner, nonce onceflow.Nonce) driver.ClaimRequest {
	r := f.Claim(owner)
	r.Nonce = nonce
	return r
}

// RandomHex returns 2n random lowercase hex characters.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ctx(t *testing.T) context.Context { return t.Context() }

type result[T any] struct {
	v   T
	err error
}

func res[T any](v T, err error) result[T] { return result[T]{v, err} }

func must[T any](t *testing.T, r result[T]) T {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	return r.v
}

func as[T any](t *testing.T, v any) T {
	t.Helper()
	out, ok := v.(T)
	if !ok {
		var want T
		t.Fatalf("outcome is %T %+v, want %T", v, v, want)
	}
	return out
}

func inspect(t *testing.T, s driver.Store, ref onceflow.Ref) driver.Observation {
	t.Helper()
	return must(t, res(s.Inspect(ctx(t), ref)))
}

// sameRecord compares the stored part of two snapshots (not the clock).
func sameRecord(t *testing.T, before, after driver.Observation) {
	t.Helper()
	b, a := before.Record, after.Record
	b.ServerTime, a.ServerTime, b.TTL, a.TTL = time.Time{}, time.Time{}, 0, 0
	if before.Found != after.Found || !equalRecord(b, a) {
		t.Fatalf("record changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

func equalRecord(a, b onceflow.Record) bool {
	ra, rb := a.Response, b.Response
	a.Response, b.Response = nil, nil
	return reflect.DeepEqual(a, b) && string(ra) == string(rb)
}

// executing claims and starts a record for a new owner.
func executing(t *testing.T, s driver.Store, f Fixture) (driver.Ownership, onceflow.Nonce) {
	t.Helper()
	nonce := onceflow.NewNonce()
	acq := as[driver.Acquired](t, must(t, res(s.ClaimStart(ctx(t), f.ClaimStart(onceflow.NewOwner(), nonce)))))
	return acq.Ownership, nonce
}

func complete(t *testing.T, s driver.Store, f Fixture, resp string) driver.Ownership {
	t.Helper()
	own, nonce := executing(t, s, f)
	tr := as[driver.Transitioned](t, must(t, res(s.Complete(ctx(t), driver.CompleteRequest{
		Ownership: own, Nonce: nonce, Response: []byte(resp), TTL: f.TTL,
	}))))
	return tr.Ownership
}

func fail(t *testing.T, s driver.Store, f Fixture, target onceflow.State) driver.Ownership {
	t.Helper()
	own, nonce := executing(t, s, f)
	tr := as[driver.Transitioned](t, must(t, res(s.Fail(ctx(t), driver.FailRequest{
		Ownership: own, Nonce: nonce, Target: target, Reason: "test", TTL: f.TTL,
	}))))
	return tr.Ownership
}

// WaitLeaseExpired polls the store's own clock until the record's lease has
// passed. Leases are judged by the store's clock, so that is the clock to
// wait on.
func WaitLeaseExpired(t *testing.T, s driver.Store, ref onceflow.Ref) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		obs, err := s.Inspect(ctx(t), ref)
		if errors.Is(err, onceflow.OutcomeStoreUnavailable) && time.Now().Before(deadline) {
			// A read that outlived a short command timeout on a loaded
			// machine changed nothing: ask again.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("inspect %s: %v", ref, err)
		}
		if !obs.Found || !obs.ServerTime.Before(obs.Record.LeaseUntil) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of %s did not expire: %+v", ref, obs.Record)
		}
		time.Sleep(obs.Record.LeaseUntil.Sub(obs.ServerTime) + time.Millisecond)
	}
}

func testClaimAcquires(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	owner := onceflow.NewOwner()
	acq := as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), f.Claim(owner)))))
	r := acq.Record
	if r.State != onceflow.StateClaimed || r.Owner != owner || r.Attempt != 1 || r.Rev != 1 ||
		r.Operation != f.Operation || r.Fingerprint != f.Fingerprint || r.Codec != f.Codec || r.Policy != f.Policy {
		t.Fatalf("acquired record = %+v", r)
	}
	if r.Nonce != "" || r.EffectUnknown {
		t.Fatalf("a plain claim records no nonce and no uncertainty: %+v", r)
	}
	if got := r.LeaseRemaining(); got <= f.Lease-5*time.Second || got > f.Lease {
		t.Fatalf("lease remaining = %v, want about %v", got, f.Lease)
	}
	// In flight, the key lives for the lease left plus the retention.
	if want := f.Lease + f.TTL; r.TTL <= want-5*time.Second || r.TTL > want {
		t.Fatalf("TTL = %v, want about %v (lease + retention)", r.TTL, want)
	}
	if acq.Ownership != (driver.Ownership{Ref: f.Ref, Operation: f.Operation, Owner: owner, Attempt: 1, Rev: 1}) {
		t.Fatalf("ownership = %+v", acq.Ownership)
	}
}

func testClaimStart(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	nonce := onceflow.NewNonce()
	acq := as[driver.Acquired](t, must(t, res(s.ClaimStart(ctx(t), f.ClaimStart(onceflow.NewOwner(), nonce)))))
	if acq.Record.State != onceflow.StateExecuting || acq.Record.Nonce != nonce {
		t.Fatalf("claim+start record = %+v, want EXECUTING with nonce %s", acq.Record, nonce)
	}
	if _, err := s.ClaimStart(ctx(t), f.Claim(onceflow.NewOwner())); !errors.Is(err, onceflow.OutcomeInvalid) {
		t.Fatalf("claim+start without a nonce: err = %v, want OutcomeInvalid", err)
	}
}

func testFingerprintFirst(t *testing.T, h Harness) {
	s := h.NewStore(t)
	setups := map[string]func(f Fixture) onceflow.Owner{
		"completed": func(f Fixture) onceflow.Owner { return complete(t, s, f, "ok").Owner },
		"abandoned": func(f Fixture) onceflow.Owner { return fail(t, s, f, onceflow.StateAbandoned).Owner },
		"failed":    func(f Fixture) onceflow.Owner { return fail(t, s, f, onceflow.StateFailedRetryable).Owner },
		"executing": func(f Fixture) onceflow.Owner { o, _ := executing(t, s, f); return o.Owner },
	}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			f := NewFixture()
			owner := setup(f)
			before := inspect(t, s, f.Ref)
			other := f
			other.Fingerprint = onceflow.FingerprintOf([]byte("another request"))
			// Even the owner itself, and even a claim+start, is refused.
			for _, req := range []driver.ClaimRequest{other.Claim(owner), other.Claim(onceflow.NewOwner())} {
				as[driver.FingerprintMismatch](t, must(t, res(s.Claim(ctx(t), req))))
				req.Nonce = onceflow.NewNonce()
				as[driver.FingerprintMismatch](t, must(t, res(s.ClaimStart(ctx(t), req))))
			}
			sameRecord(t, before, inspect(t, s, f.Ref))
		})
	}
}

func testCompletedReplay(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	complete(t, s, f, `{"charge":"ch_1"}`)
	claims := []func() (driver.ClaimOutcome, error){
		func() (driver.ClaimOutcome, error) { return s.Claim(ctx(t), f.Claim(onceflow.NewOwner())) },
		func() (driver.ClaimOutcome, error) {
			return s.ClaimStart(ctx(t), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
		},
	}
	for _, claim := range claims {
		rep := as[driver.CompletedReplay](t, must(t, res(claim())))
		if string(rep.Record.Response) != `{"charge":"ch_1"}` || rep.Record.Codec != f.Codec || rep.Record.Policy != f.Policy {
			t.Fatalf("replay = %+v", rep.Record)
		}
		if got, want := rep.Record.Fence(), inspect(t, s, f.Ref).Record.Fence(); got != want {
			t.Fatalf("replay fence = %+v, want the record's %+v", got, want)
		}
		// A store may replay without reading the key's TTL (zero then).
		if rep.Record.TTL < 0 || rep.Record.TTL > f.TTL {
			t.Fatalf("replay TTL = %v", rep.Record.TTL)
		}
	}
}

func testCodecMismatch(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	complete(t, s, f, "ok")
	before := inspect(t, s, f.Ref)
	codec, policy := f, f
	codec.Codec = "proto-v1"
	policy.Policy = 3
	for _, g := range []Fixture{codec, policy} {
		m := as[driver.CodecMismatch](t, must(t, res(s.Claim(ctx(t), g.Claim(onceflow.NewOwner())))))
		if m.Record.Codec != f.Codec || m.Record.Policy != f.Policy || m.Record.Response != nil {
			t.Fatalf("mismatch reports %+v; want the stored codec and policy and no payload", m.Record)
		}
	}
	sameRecord(t, before, inspect(t, s, f.Ref))
}

func testAwaitingDecision(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	own := fail(t, s, f, onceflow.StateAbandoned)
	rr := as[driver.AwaitingDecision](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	if rr.Record.State != onceflow.StateAbandoned || rr.Record.Reason != "test" {
		t.Fatalf("recovery record = %+v", rr.Record)
	}
	// Even the owner that abandoned it cannot claim it back.
	as[driver.AwaitingDecision](t, must(t, res(s.Claim(ctx(t), f.Claim(own.Owner)))))
}

func testReplayedAcquire(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	owner := onceflow.NewOwner()
	as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), f.Claim(owner)))))
	ra := as[driver.ReplayedAcquire](t, must(t, res(s.Claim(ctx(t), f.Claim(owner)))))
	if ra.Record.State != onceflow.StateClaimed || ra.Ownership.Rev != 1 || ra.Record.Nonce != "" {
		t.Fatalf("replayed acquire of CLAIMED = %+v", ra.Record)
	}

	g := NewFixture()
	nonce := onceflow.NewNonce()
	as[driver.Acquired](t, must(t, res(s.ClaimStart(ctx(t), g.ClaimStart(owner, nonce)))))
	ra = as[driver.ReplayedAcquire](t, must(t, res(s.ClaimStart(ctx(t), g.ClaimStart(owner, onceflow.NewNonce())))))
	if ra.Record.State != onceflow.StateExecuting || ra.Record.Nonce != nonce {
		t.Fatalf("replayed acquire of EXECUTING = %+v; it must report the state and the first invocation's nonce", ra.Record)
	}
}

func testOwnerOperationConflict(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	owner := onceflow.NewOwner()
	as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), f.Claim(owner)))))
	before := inspect(t, s, f.Ref)
	other := f
	other.Operation = "another-op"
	as[driver.OwnerOperationConflict](t, must(t, res(s.Claim(ctx(t), other.Claim(owner)))))
	sameRecord(t, before, inspect(t, s, f.Ref))
}

func testSameOwnerTakeover(t *testing.T, h Harness) {
	s := h.NewStore(t)
	for _, fused := range []bool{false, true} {
		for _, from := range []onceflow.State{onceflow.StateClaimed, onceflow.StateExecuting} {
			t.Run(fmt.Sprintf("%s/fused=%v", from, fused), func(t *testing.T) {
				f := NewFixture()
				// Live for the next call, then waited out: long enough for a
				// store on a loaded machine (miniredis under -race) to answer
				// that call within it.
				f.Lease = 300 * time.Millisecond
				owner := onceflow.NewOwner()
				var before driver.Ownership
				if from == onceflow.StateExecuting {
					before, _ = executing(t, s, f)
					owner = before.Owner
				} else {
					before = as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), f.Claim(owner))))).Ownership
				}
				// While the lease lives, the owner's other invocation is told
				// how far it got, with the lease left.
				g := f
				g.Lease = time.Minute
				live := as[driver.ReplayedAcquire](t, must(t, res(s.ClaimStart(ctx(t), g.ClaimStart(owner, onceflow.NewNonce())))))
				if live.Record.State != from || live.Record.LeaseRemaining() <= 0 {
					t.Fatalf("live lease: %+v", live.Record)
				}
				WaitLeaseExpired(t, s, f.Ref)
				nonce := onceflow.NewNonce()
				var out driver.ClaimOutcome
				if fused {
					out = must(t, res(s.ClaimStart(ctx(t), g.ClaimStart(owner, nonce))))
				} else {
					out = must(t, res(s.Claim(ctx(t), g.Claim(owner))))
				}
				to := as[driver.TakenOver](t, out)
				if to.From != from || to.EffectUnknown != (from == onceflow.StateExecuting) {
					t.Fatalf("took over from %s (effect may have happened: %v)", to.From, to.EffectUnknown)
				}
				r := to.Record
				if r.Owner != owner || r.Attempt != before.Attempt || r.Rev != before.Rev+1 || r.LeaseRemaining() < 50*time.Second {
					t.Fatalf("record %+v: the same owner and attempt, rev+1 (fencing the dead invocation) and a new lease", r)
				}
				if fused && (r.State != onceflow.StateExecuting || r.Nonce != nonce) || !fused && (r.State != onceflow.StateClaimed || r.Nonce != "") {
					t.Fatalf("record %+v after a takeover with fused=%v", r, fused)
				}
				// The dead invocation's ownership is stale.
				ref := as[driver.Refused](t, must(t, res(s.Fail(ctx(t), driver.FailRequest{
					Ownership: before, Target: onceflow.StateAbandoned, TTL: f.TTL,
				}))))
				if ref.Reason != driver.RefusedStaleRev {
					t.Fatalf("the dead invocation's fail refused %s, want %s", ref.Reason, driver.RefusedStaleRev)
				}
			})
		}
	}
}

func testInFlightTTL(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	f.Lease, f.TTL = 10*time.Minute, time.Minute // a retention shorter than the lease
	own, nonce := executing(t, s, f)
	about := func(what string, got, want time.Duration) {
		t.Helper()
		if got <= want-5*time.Second || got > want {
			t.Fatalf("%s: TTL %v, want about %v (the lease left plus the retention)", what, got, want)
		}
	}
	about("claim+start", inspect(t, s, f.Ref).Record.TTL, f.Lease+f.TTL)
	rn := as[driver.Renewed](t, must(t, res(s.Renew(ctx(t), driver.RenewRequest{
		Ref: f.Ref, Operation: f.Operation, Owner: own.Owner, Nonce: nonce, Lease: time.Hour, Retention: f.TTL,
	}))))
	about("renew", rn.Record.TTL, time.Hour+f.TTL)
	g := NewFixture()
	g.Lease, g.TTL = 10*time.Minute, time.Minute
	acq := as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), g.Claim(onceflow.NewOwner())))))
	about("claim", acq.Record.TTL, g.Lease+g.TTL)
	st := as[driver.Transitioned](t, must(t, res(s.Start(ctx(t), driver.StartRequest{
		Ownership: acq.Ownership, Nonce: onceflow.NewNonce(), Lease: 20 * time.Minute, Retention: g.TTL,
	}))))
	about("start", st.Record.TTL, 20*time.Minute+g.TTL)
}

func testTakeover(t *testing.T, h Harness) {
	s := h.NewStore(t)
	short := func() Fixture { f := NewFixture(); f.Lease = 20 * time.Millisecond; return f }
	cases := []struct {
		name   string
		setup  func(f Fixture)
		from   onceflow.State
		effect bool
	}{
		{"failed retryable", func(f Fixture) { fail(t, s, f, onceflow.StateFailedRetryable) }, onceflow.StateFailedRetryable, false},
		{"expired claimed", func(f Fixture) {
			as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
			WaitLeaseExpired(t, s, f.Ref)
		}, onceflow.StateClaimed, false},
		{"expired executing", func(f Fixture) {
			executing(t, s, f)
			WaitLeaseExpired(t, s, f.Ref)
		}, onceflow.StateExecuting, true},
	}
	for _, c := range cases {
		for _, fused := range []bool{false, true} {
			t.Run(c.name+"/fused="+strconv.FormatBool(fused), func(t *testing.T) {
				f := short()
				c.setup(f)
				before := inspect(t, s, f.Ref).Record
				owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
				var out driver.ClaimOutcome
				if fused {
					out = must(t, res(s.ClaimStart(ctx(t), f.ClaimStart(owner, nonce))))
				} else {
					out = must(t, res(s.Claim(ctx(t), f.Claim(owner))))
				}
				to := as[driver.TakenOver](t, out)
				if to.From != c.from || to.EffectUnknown != c.effect {
					t.Fatalf("took over from %s (effect may have happened: %v), want %s (%v)", to.From, to.EffectUnknown, c.from, c.effect)
				}
				r := to.Record
				if r.Owner != owner || r.Attempt != before.Attempt+1 || r.Rev != before.Rev+1 || r.Reason != "" {
					t.Fatalf("taken-over record = %+v, before %+v", r, before)
				}
				wantState, wantNonce := onceflow.StateClaimed, onceflow.Nonce("")
				if fused {
					wantState, wantNonce = onceflow.StateExecuting, nonce
				}
				if r.State != wantState || r.Nonce != wantNonce {
					t.Fatalf("taken-over record state %s nonce %q, want %s %q", r.State, r.Nonce, wantState, wantNonce)
				}
				if f := r.Fence(); to.Ownership.Attempt != f.Attempt || to.Ownership.Rev != f.Rev || f.Epoch != before.Fence().Epoch || !before.Fence().Less(f) {
					t.Fatalf("fence did not grow: before %v after %v", before.Fence(), r.Fence())
				}
			})
		}
	}
}

func testEffectUnknownPersists(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	f.Lease = 20 * time.Millisecond
	executing(t, s, f)
	WaitLeaseExpired(t, s, f.Ref)
	// A plain claim takes it over into CLAIMED: the state no longer says
	// EXECUTING, but the uncertainty must survive.
	to := as[driver.TakenOver](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	if !to.EffectUnknown || !to.Record.EffectUnknown {
		t.Fatalf("takeover from expired EXECUTING: %+v", to)
	}
	WaitLeaseExpired(t, s, f.Ref)
	owner := onceflow.NewOwner()
	g := f
	g.Lease = time.Minute // live for the re-sent claim below, however slow the store
	to = as[driver.TakenOver](t, must(t, res(s.Claim(ctx(t), g.Claim(owner)))))
	if to.From != onceflow.StateClaimed || !to.EffectUnknown {
		t.Fatalf("second takeover from CLAIMED of an unsettled record: %+v; the effect may still have happened", to)
	}
	// The same owner re-sending its claim is told too.
	ra := as[driver.ReplayedAcquire](t, must(t, res(s.Claim(ctx(t), g.Claim(owner)))))
	if !ra.Record.EffectUnknown {
		t.Fatalf("replayed acquire lost the uncertainty: %+v", ra.Record)
	}
	// FAILED_RETRYABLE settles it: the owner asserts no effect.
	tr := as[driver.Transitioned](t, must(t, res(s.Fail(ctx(t), driver.FailRequest{
		Ownership: to.Ownership, Target: onceflow.StateFailedRetryable, TTL: f.TTL,
	}))))
	if tr.Record.EffectUnknown {
		t.Fatalf("FAILED_RETRYABLE kept the uncertainty: %+v", tr.Record)
	}
	to = as[driver.TakenOver](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	if to.EffectUnknown {
		t.Fatalf("takeover after a settled failure: %+v", to)
	}
}

func testInProgress(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	executing(t, s, f)
	before := inspect(t, s, f.Ref)
	ip := as[driver.InProgress](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	if left := ip.Record.LeaseRemaining(); left <= 0 || left > f.Lease {
		t.Fatalf("in progress with %v left, want (0, %v]", left, f.Lease)
	}
	sameRecord(t, before, inspect(t, s, f.Ref))
}

func testConcurrentClaims(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	const n = 64
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		acquired int
		progress int
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			out, err := s.ClaimStart(context.Background(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
			mu.Lock()
			defer mu.Unlock()
			switch out.(type) {
			case driver.Acquired:
				acquired++
			case driver.InProgress:
				progress++
			default:
				t.Errorf("outcome %T, err %v", out, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if acquired != 1 || progress != n-1 {
		t.Fatalf("%d acquired, %d in progress; want 1 and %d", acquired, progress, n-1)
	}
}

func testTransitionAlready(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	owner := onceflow.NewOwner()
	acq := as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), f.Claim(owner)))))
	nonce := onceflow.NewNonce()
	start := driver.StartRequest{Ownership: acq.Ownership, Nonce: nonce, Lease: f.Lease, Retention: f.TTL}
	st := as[driver.Transitioned](t, must(t, res(s.Start(ctx(t), start))))
	if st.Record.State != onceflow.StateExecuting || st.Record.Nonce != nonce || st.Ownership.Rev != 2 {
		t.Fatalf("start = %+v", st.Record)
	}
	// The same start, re-sent with the old revision after a lost reply.
	al := as[driver.AlreadyTransitioned](t, must(t, res(s.Start(ctx(t), start))))
	if al.Record.Nonce != nonce || al.Record.Rev != 2 {
		t.Fatalf("already = %+v, want this invocation's nonce and rev 2", al.Record)
	}
	// Another invocation of the same owner is told whose nonce is stored.
	other := start
	other.Nonce = onceflow.NewNonce()
	al = as[driver.AlreadyTransitioned](t, must(t, res(s.Start(ctx(t), other))))
	if al.Record.Nonce != nonce {
		t.Fatalf("already for another invocation reports nonce %q, want %q", al.Record.Nonce, nonce)
	}
	// Complete, re-sent.
	comp := driver.CompleteRequest{Ownership: st.Ownership, Nonce: nonce, Response: []byte("r"), TTL: f.TTL}
	as[driver.Transitioned](t, must(t, res(s.Complete(ctx(t), comp))))
	al = as[driver.AlreadyTransitioned](t, must(t, res(s.Complete(ctx(t), comp))))
	if al.Record.State != onceflow.StateCompleted || al.Record.Rev != 3 {
		t.Fatalf("complete re-sent = %+v", al.Record)
	}
}

func testTransitionRefusals(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	owner := onceflow.NewOwner()
	acq := as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), f.Claim(owner)))))
	nonce := onceflow.NewNonce()
	st := as[driver.Transitioned](t, must(t, res(s.Start(ctx(t), driver.StartRequest{
		Ownership: acq.Ownership, Nonce: nonce, Lease: f.Lease, Retention: f.TTL,
	}))))
	cur := st.Ownership
	before := inspect(t, s, f.Ref)

	stranger := cur
	stranger.Owner = onceflow.NewOwner()
	otherOp := cur
	otherOp.Operation = "other"
	stale := acq.Ownership // rev 1, the record is at rev 2
	cases := []struct {
		name string
		do   func() (driver.TransitionOutcome, error)
		want driver.Refusal
	}{
		{"not owner", func() (driver.TransitionOutcome, error) {
			return s.Complete(ctx(t), driver.CompleteRequest{Ownership: stranger, Nonce: nonce, Response: []byte("x"), TTL: f.TTL})
		}, driver.RefusedNotOwner},
		{"other operation", func() (driver.TransitionOutcome, error) {
			return s.Complete(ctx(t), driver.CompleteRequest{Ownership: otherOp, Nonce: nonce, Response: []byte("x"), TTL: f.TTL})
		}, driver.RefusedOperation},
		{"stale revision, other target", func() (driver.TransitionOutcome, error) {
			return s.Fail(ctx(t), driver.FailRequest{Ownership: stale, Nonce: nonce, Target: onceflow.StateAbandoned, TTL: f.TTL})
		}, driver.RefusedStaleRev},
		{"other invocation", func() (driver.TransitionOutcome, error) {
			return s.Complete(ctx(t), driver.CompleteRequest{Ownership: cur, Nonce: onceflow.NewNonce(), Response: []byte("x"), TTL: f.TTL})
		}, driver.RefusedNonce},
	}
	for _, c := range cases {
		ref := as[driver.Refused](t, must(t, res(c.do())))
		if ref.Reason != c.want {
			t.Fatalf("%s: refused %s, want %s", c.name, ref.Reason, c.want)
		}
		sameRecord(t, before, inspect(t, s, f.Ref))
	}

	// Wrong source state: COMPLETE from CLAIMED.
	g := NewFixture()
	acq = as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), g.Claim(owner)))))
	ref := as[driver.Refused](t, must(t, res(s.Complete(ctx(t), driver.CompleteRequest{
		Ownership: acq.Ownership, Nonce: nonce, Response: []byte("x"), TTL: g.TTL,
	}))))
	if ref.Reason != driver.RefusedState {
		t.Fatalf("complete from CLAIMED refused %s, want %s", ref.Reason, driver.RefusedState)
	}
	// Missing record.
	h2 := NewFixture()
	missing := acq.Ownership
	missing.Ref = h2.Ref
	as[driver.Missing](t, must(t, res(s.Fail(ctx(t), driver.FailRequest{Ownership: missing, Target: onceflow.StateAbandoned, TTL: h2.TTL}))))
}

func testRenewExtends(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	f.Lease, f.TTL = time.Second, 2*time.Second
	own, nonce := executing(t, s, f)
	before := inspect(t, s, f.Ref).Record
	rn := as[driver.Renewed](t, must(t, res(s.Renew(ctx(t), driver.RenewRequest{
		Ref: f.Ref, Operation: f.Operation, Owner: own.Owner, Nonce: nonce, Lease: time.Minute, Retention: time.Hour,
	}))))
	after := inspect(t, s, f.Ref).Record
	if !after.LeaseUntil.After(before.LeaseUntil.Add(50*time.Second)) || after.LeaseUntil != rn.Record.LeaseUntil {
		t.Fatalf("leaseUntil %v -> %v: renew did not move it forward", before.LeaseUntil, after.LeaseUntil)
	}
	if after.TTL < 50*time.Minute {
		t.Fatalf("key TTL %v -> %v: renew did not move it forward", before.TTL, after.TTL)
	}
	if after.Rev != before.Rev || after.State != onceflow.StateExecuting {
		t.Fatalf("renew changed rev or state: %+v", after)
	}
	// A competing claim now sees in-progress with the new lease.
	ip := as[driver.InProgress](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	if ip.Record.LeaseRemaining() < 50*time.Second {
		t.Fatalf("competing claim sees %v left", ip.Record.LeaseRemaining())
	}

	// An expired lease that nobody took over can still be renewed by its owner.
	g := NewFixture()
	g.Lease = 20 * time.Millisecond
	own, nonce = executing(t, s, g)
	WaitLeaseExpired(t, s, g.Ref)
	as[driver.Renewed](t, must(t, res(s.Renew(ctx(t), driver.RenewRequest{
		Ref: g.Ref, Operation: g.Operation, Owner: own.Owner, Nonce: nonce, Lease: time.Minute, Retention: time.Hour,
	}))))
	as[driver.InProgress](t, must(t, res(s.Claim(ctx(t), g.Claim(onceflow.NewOwner())))))
}

func testRenewRefusals(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	own, nonce := executing(t, s, f)
	ok := driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: own.Owner, Nonce: nonce, Lease: time.Hour, Retention: 2 * time.Hour}
	before := inspect(t, s, f.Ref)
	cases := map[driver.Refusal]func(r *driver.RenewRequest){
		driver.RefusedNotOwner:  func(r *driver.RenewRequest) { r.Owner = onceflow.NewOwner() },
		driver.RefusedOperation: func(r *driver.RenewRequest) { r.Operation = "other" },
		driver.RefusedNonce:     func(r *driver.RenewRequest) { r.Nonce = onceflow.NewNonce() },
	}
	for want, mutate := range cases {
		req := ok
		mutate(&req)
		ref := as[driver.Refused](t, must(t, res(s.Renew(ctx(t), req))))
		if ref.Reason != want {
			t.Fatalf("renew refused %s, want %s", ref.Reason, want)
		}
		sameRecord(t, before, inspect(t, s, f.Ref))
	}
	// Another state: CLAIMED and COMPLETED are not renewed.
	g := NewFixture()
	acq := as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), g.Claim(own.Owner)))))
	before = inspect(t, s, g.Ref)
	ref := as[driver.Refused](t, must(t, res(s.Renew(ctx(t), driver.RenewRequest{
		Ref: g.Ref, Operation: g.Operation, Owner: acq.Ownership.Owner, Nonce: nonce, Lease: time.Hour, Retention: 2 * time.Hour,
	}))))
	if ref.Reason != driver.RefusedState {
		t.Fatalf("renew of CLAIMED refused %s, want %s", ref.Reason, driver.RefusedState)
	}
	sameRecord(t, before, inspect(t, s, g.Ref))
	c := NewFixture()
	comp := complete(t, s, c, "done")
	before = inspect(t, s, c.Ref)
	obs := before.Record
	ref = as[driver.Refused](t, must(t, res(s.Renew(ctx(t), driver.RenewRequest{
		Ref: c.Ref, Operation: c.Operation, Owner: comp.Owner, Nonce: obs.Nonce, Lease: time.Hour, Retention: 2 * time.Hour,
	}))))
	if ref.Reason != driver.RefusedState {
		t.Fatalf("renew of COMPLETED refused %s, want %s", ref.Reason, driver.RefusedState)
	}
	sameRecord(t, before, inspect(t, s, c.Ref))
	as[driver.Missing](t, must(t, res(s.Renew(ctx(t), driver.RenewRequest{
		Ref: NewFixture().Ref, Operation: c.Operation, Owner: comp.Owner, Nonce: nonce, Lease: time.Hour, Retention: 2 * time.Hour,
	}))))
}

func testRelease(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	acq := as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	stranger := acq.Ownership
	stranger.Owner = onceflow.NewOwner()
	if r := as[driver.Refused](t, must(t, res(s.Release(ctx(t), driver.ReleaseRequest{Ownership: stranger})))); r.Reason != driver.RefusedNotOwner {
		t.Fatalf("release by stranger refused %s", r.Reason)
	}
	as[driver.Released](t, must(t, res(s.Release(ctx(t), driver.ReleaseRequest{Ownership: acq.Ownership}))))
	if inspect(t, s, f.Ref).Found {
		t.Fatal("released record still there")
	}
	as[driver.Missing](t, must(t, res(s.Release(ctx(t), driver.ReleaseRequest{Ownership: acq.Ownership}))))

	// After EXECUTING, never.
	g := NewFixture()
	acq = as[driver.Acquired](t, must(t, res(s.Claim(ctx(t), g.Claim(onceflow.NewOwner())))))
	st := as[driver.Transitioned](t, must(t, res(s.Start(ctx(t), driver.StartRequest{
		Ownership: acq.Ownership, Nonce: onceflow.NewNonce(), Lease: g.Lease, Retention: g.TTL,
	}))))
	before := inspect(t, s, g.Ref)
	for _, o := range []driver.Ownership{acq.Ownership, st.Ownership} {
		if r := as[driver.Refused](t, must(t, res(s.Release(ctx(t), driver.ReleaseRequest{Ownership: o})))); r.Reason != driver.RefusedState {
			t.Fatalf("release of EXECUTING refused %s, want %s", r.Reason, driver.RefusedState)
		}
	}
	sameRecord(t, before, inspect(t, s, g.Ref))
}

func testResolve(t *testing.T, h Harness) {
	s := h.NewStore(t)
	f := NewFixture()
	ab := fail(t, s, f, onceflow.StateAbandoned)
	req := driver.ResolveRequest{
		Ref: f.Ref, Attempt: ab.Attempt, Rev: ab.Rev, Target: onceflow.StateCompleted,
		Response: []byte("found at provider"), Codec: f.Codec, Policy: f.Policy, Reason: "operator", TTL: f.TTL,
	}
	staleReq := req
	staleReq.Rev--
	if r := as[driver.Refused](t, must(t, res(s.Resolve(ctx(t), staleReq)))); r.Reason != driver.RefusedStaleRev {
		t.Fatalf("stale resolve refused %s", r.Reason)
	}
	as[driver.Transitioned](t, must(t, res(s.Resolve(ctx(t), req))))
	as[driver.AlreadyTransitioned](t, must(t, res(s.Resolve(ctx(t), req))))
	// A concurrent resolver that saw the same attempt and rev but decided
	// on another response is not told it succeeded.
	other := req
	other.Response = []byte("another decision")
	if r := as[driver.Refused](t, must(t, res(s.Resolve(ctx(t), other)))); r.Reason != driver.RefusedStaleRev {
		t.Fatalf("resolve with another response refused %s", r.Reason)
	}
	rep := as[driver.CompletedReplay](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	if string(rep.Record.Response) != "found at provider" {
		t.Fatalf("replay after resolve = %q", rep.Record.Response)
	}
	if r := as[driver.Refused](t, must(t, res(s.Resolve(ctx(t), driver.ResolveRequest{
		Ref: f.Ref, Attempt: ab.Attempt, Rev: ab.Rev + 1, Target: onceflow.StateFailedRetryable, TTL: f.TTL,
	})))); r.Reason != driver.RefusedState {
		t.Fatalf("resolve of COMPLETED refused %s", r.Reason)
	}

	g := NewFixture()
	g.Lease = 20 * time.Millisecond
	executing(t, s, g)
	WaitLeaseExpired(t, s, g.Ref)
	to := as[driver.TakenOver](t, must(t, res(s.Claim(ctx(t), g.Claim(onceflow.NewOwner())))))
	ab2 := as[driver.Transitioned](t, must(t, res(s.Fail(ctx(t), driver.FailRequest{
		Ownership: to.Ownership, Target: onceflow.StateAbandoned, Reason: "effect unknown", TTL: g.TTL,
	}))))
	if r := as[driver.Refused](t, must(t, res(s.Resolve(ctx(t), driver.ResolveRequest{
		Ref: g.Ref, Attempt: ab2.Record.Attempt - 1, Rev: ab2.Record.Rev, Target: onceflow.StateFailedRetryable, TTL: g.TTL,
	})))); r.Reason != driver.RefusedAttempt {
		t.Fatalf("resolve of an older attempt refused %s", r.Reason)
	}
	as[driver.Transitioned](t, must(t, res(s.Resolve(ctx(t), driver.ResolveRequest{
		Ref: g.Ref, Attempt: ab2.Record.Attempt, Rev: ab2.Record.Rev, Target: onceflow.StateFailedRetryable, TTL: g.TTL,
	}))))
	to = as[driver.TakenOver](t, must(t, res(s.Claim(ctx(t), g.Claim(onceflow.NewOwner())))))
	if to.From != onceflow.StateFailedRetryable || to.EffectUnknown {
		t.Fatalf("takeover after resolve-to-retry = %+v; the resolution settled the uncertainty", to)
	}
	as[driver.Missing](t, must(t, res(s.Resolve(ctx(t), driver.ResolveRequest{
		Ref: NewFixture().Ref, Attempt: 1, Rev: 1, Target: onceflow.StateFailedRetryable, TTL: g.TTL,
	}))))
}

func testResolveFailed(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	ab := fail(t, s, f, onceflow.StateAbandoned)
	failed := as[driver.Transitioned](t, must(t, res(s.Resolve(ctx(t), driver.ResolveRequest{
		Ref: f.Ref, Attempt: ab.Attempt, Rev: ab.Rev, Target: onceflow.StateFailed, Reason: "refunded by hand", TTL: f.TTL,
	}))))
	if failed.Record.State != onceflow.StateFailed || failed.Record.Reason != "refunded by hand" {
		t.Fatalf("resolved to %+v", failed.Record)
	}
	// Every claim, by anyone, is told the operation failed, and why.
	for _, owner := range []onceflow.Owner{onceflow.NewOwner(), ab.Owner} {
		of := as[driver.OperationFailed](t, must(t, res(s.ClaimStart(ctx(t), f.ClaimStart(owner, onceflow.NewNonce())))))
		if of.Record.Reason != "refunded by hand" {
			t.Fatalf("operation failed: %+v", of.Record)
		}
	}
	// Only a reopen (to FAILED_RETRYABLE) moves it on; then the next claim takes over.
	if r := as[driver.Refused](t, must(t, res(s.Resolve(ctx(t), driver.ResolveRequest{
		Ref: f.Ref, Attempt: failed.Record.Attempt, Rev: failed.Record.Rev, Target: onceflow.StateCompleted,
		Response: []byte("x"), Codec: f.Codec, Policy: f.Policy, TTL: f.TTL,
	})))); r.Reason != driver.RefusedState {
		t.Fatalf("completing a FAILED record refused %s, want %s", r.Reason, driver.RefusedState)
	}
	as[driver.Transitioned](t, must(t, res(s.Resolve(ctx(t), driver.ResolveRequest{
		Ref: f.Ref, Attempt: failed.Record.Attempt, Rev: failed.Record.Rev, Target: onceflow.StateFailedRetryable, Reason: "reopened", TTL: f.TTL,
	}))))
	to := as[driver.TakenOver](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	if to.From != onceflow.StateFailedRetryable || to.EffectUnknown {
		t.Fatalf("takeover after reopening: %+v", to)
	}
}

func testInvalidInput(t *testing.T, h Harness) {
	s, f := h.NewStore(t), NewFixture()
	owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
	claims := map[string]func(r *driver.ClaimRequest){
		"digest not hex":        func(r *driver.ClaimRequest) { r.Ref.Digest.Hex = "ZZ" + r.Ref.Digest.Hex[2:] },
		"digest uppercase":      func(r *driver.ClaimRequest) { r.Ref.Digest.Hex = "AB" + r.Ref.Digest.Hex[2:] },
		"digest short":          func(r *driver.ClaimRequest) { r.Ref.Digest.Hex = r.Ref.Digest.Hex[:63] },
		"digest version 0":      func(r *driver.ClaimRequest) { r.Ref.Digest.Version = 0 },
		"empty code":            func(r *driver.ClaimRequest) { r.Ref.Code = "" },
		"invalid code":          func(r *driver.ClaimRequest) { r.Ref.Code = "Charge_Payment" },
		"zero lease":            func(r *driver.ClaimRequest) { r.Lease = 0 },
		"negative lease":        func(r *driver.ClaimRequest) { r.Lease = -time.Second },
		"zero retention":        func(r *driver.ClaimRequest) { r.Retention = 0 },
		"short owner":           func(r *driver.ClaimRequest) { r.Owner = r.Owner[:62] },
		"empty operation":       func(r *driver.ClaimRequest) { r.Operation = "" },
		"NUL in operation":      func(r *driver.ClaimRequest) { r.Operation = "op\x00" + r.Operation },
		"bad fingerprint":       func(r *driver.ClaimRequest) { r.Fingerprint = "abc" },
		"empty codec":           func(r *driver.ClaimRequest) { r.Codec = "" },
		"zero policy":           func(r *driver.ClaimRequest) { r.Policy = 0 },
		"claim+start bad nonce": func(r *driver.ClaimRequest) { r.Nonce = "xyz" },
	}
	for name, mutate := range claims {
		req := f.ClaimStart(owner, nonce)
		mutate(&req)
		_, err := s.ClaimStart(ctx(t), req)
		var ve *onceflow.Error
		if !errors.Is(err, onceflow.OutcomeInvalid) || !errors.As(err, &ve) {
			t.Fatalf("%s: err = %v, want an OutcomeInvalid error", name, err)
		}
	}
	if inspect(t, s, f.Ref).Found {
		t.Fatal("an invalid claim wrote a record")
	}

	own, nonce := executing(t, s, f)
	before := inspect(t, s, f.Ref)
	_, err := s.Complete(ctx(t), driver.CompleteRequest{
		Ownership: own, Nonce: nonce, Response: make([]byte, h.MaxResponseBytes+1), TTL: f.TTL,
	})
	if !errors.Is(err, onceflow.OutcomeInvalid) {
		t.Fatalf("oversized response: err = %v, want OutcomeInvalid", err)
	}
	_, err = s.Renew(ctx(t), driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: own.Owner, Nonce: nonce, Lease: 0, Retention: f.TTL})
	if !errors.Is(err, onceflow.OutcomeInvalid) {
		t.Fatalf("zero renew lease: err = %v, want OutcomeInvalid", err)
	}
	_, err = s.Fail(ctx(t), driver.FailRequest{Ownership: own, Nonce: nonce, Target: onceflow.StateCompleted, TTL: f.TTL})
	if !errors.Is(err, onceflow.OutcomeInvalid) {
		t.Fatalf("fail to COMPLETED: err = %v, want OutcomeInvalid", err)
	}
	// A NUL byte in an operation ID or a reason breaks the record's schema:
	// written, it would make the record corrupt for its whole retention.
	nulOp := own
	nulOp.Operation = f.Operation + "\x00"
	nul := map[string]func() error{
		"start with a NUL in the operation": func() error {
			_, err := s.Start(ctx(t), driver.StartRequest{Ownership: nulOp, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
			return err
		},
		"complete with a NUL in the operation": func() error {
			_, err := s.Complete(ctx(t), driver.CompleteRequest{Ownership: nulOp, Nonce: nonce, Response: []byte("ok"), TTL: f.TTL})
			return err
		},
		"renew with a NUL in the operation": func() error {
			_, err := s.Renew(ctx(t), driver.RenewRequest{Ref: f.Ref, Operation: nulOp.Operation, Owner: own.Owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
			return err
		},
		"release with a NUL in the operation": func() error {
			_, err := s.Release(ctx(t), driver.ReleaseRequest{Ownership: nulOp})
			return err
		},
		"fail with a NUL in the reason": func() error {
			_, err := s.Fail(ctx(t), driver.FailRequest{Ownership: own, Nonce: nonce, Target: onceflow.StateAbandoned, Reason: "declined\x00", TTL: f.TTL})
			return err
		},
		"resolve with a NUL in the reason": func() error {
			_, err := s.Resolve(ctx(t), driver.ResolveRequest{Ref: f.Ref, Attempt: own.Attempt, Rev: own.Rev, Target: onceflow.StateFailed, Reason: "\x00", TTL: f.TTL})
			return err
		},
	}
	for name, call := range nul {
		var ve *onceflow.Error
		if err := call(); !errors.Is(err, onceflow.OutcomeInvalid) || !errors.As(err, &ve) {
			t.Fatalf("%s: err = %v, want an OutcomeInvalid error", name, err)
		}
	}
	sameRecord(t, before, inspect(t, s, f.Ref))
}

// testStartedRecord: a renewal and a completion that carry the record
// their start left (RenewRequest.Started, CompleteRequest.Started) are
// answered as without it; one whose Started differs from what is stored,
// or belongs to another invocation, is answered, refused and written by
// what is stored, never by what it carries.
func testStartedRecord(t *testing.T, h Harness) {
	s := h.NewStore(t)
	f := NewFixture()
	nonce := onceflow.NewNonce()
	acq := as[driver.Acquired](t, must(t, res(s.ClaimStart(ctx(t), f.ClaimStart(onceflow.NewOwner(), nonce)))))
	started := acq.Record
	renew := func(rec onceflow.Record, n onceflow.Nonce) (driver.RenewOutcome, error) {
		return s.Renew(ctx(t), driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: acq.Ownership.Owner, Nonce: n,
			Lease: time.Hour, Retention: f.TTL, Started: rec})
	}
	same := func(what string, got onceflow.Record) {
		t.Helper()
		if got.State != onceflow.StateExecuting || got.Owner != started.Owner || got.Operation != started.Operation ||
			got.Nonce != nonce || got.Attempt != started.Attempt || got.Rev != started.Rev {
			t.Fatalf("%s: renewed %+v, want the stored EXECUTING record %+v", what, got, started)
		}
	}
	same("renew with its start's record", as[driver.Renewed](t, must(t, res(renew(started, nonce)))).Record)
	other := started
	other.Attempt, other.Rev, other.Policy, other.Codec = started.Attempt+1, started.Rev+3, started.Policy+1, "other-codec"
	same("renew with another record", as[driver.Renewed](t, must(t, res(renew(other, nonce)))).Record)
	before := inspect(t, s, f.Ref)
	if ref := as[driver.Refused](t, must(t, res(renew(started, onceflow.NewNonce())))); ref.Reason != driver.RefusedNonce {
		t.Fatalf("renew by another invocation with the start's record refused %s, want %s", ref.Reason, driver.RefusedNonce)
	}
	sameRecord(t, before, inspect(t, s, f.Ref))

	// A completion whose Started differs writes what is stored.
	tr := as[driver.Transitioned](t, must(t, res(s.Complete(ctx(t), driver.CompleteRequest{
		Ownership: acq.Ownership, Nonce: nonce, Response: []byte(`{"ok":1}`), TTL: f.TTL, Started: other,
	}))))
	if r := tr.Record; r.Attempt != started.Attempt || r.Rev != started.Rev+1 || r.Codec != f.Codec || r.Policy != f.Policy {
		t.Fatalf("completed with another record: %+v, want attempt %d, rev %d, codec %s, policy %d", r, started.Attempt, started.Rev+1, f.Codec, f.Policy)
	}
	rep := as[driver.CompletedReplay](t, must(t, res(s.Claim(ctx(t), f.Claim(onceflow.NewOwner())))))
	if r := rep.Record; r.Codec != f.Codec || r.Policy != f.Policy || string(r.Response) != `{"ok":1}` {
		t.Fatalf("replay after a completion with another record: %+v", r)
	}

	// A completion with its start's record is one without it.
	g := NewFixture()
	gn := onceflow.NewNonce()
	gacq := as[driver.Acquired](t, must(t, res(s.ClaimStart(ctx(t), g.ClaimStart(onceflow.NewOwner(), gn)))))
	gtr := as[driver.Transitioned](t, must(t, res(s.Complete(ctx(t), driver.CompleteRequest{
		Ownership: gacq.Ownership, Nonce: gn, Response: []byte("r"), TTL: g.TTL, Started: gacq.Record,
	}))))
	want := gacq.Record
	if r := gtr.Record; r.State != onceflow.StateCompleted || r.Owner != want.Owner || r.Operation != want.Operation || r.Nonce != gn ||
		r.Attempt != want.Attempt || r.Rev != want.Rev+1 || r.Fingerprint != want.Fingerprint || r.Codec != want.Codec ||
		r.Policy != want.Policy || !r.CreatedAt.Equal(want.CreatedAt) || r.EffectUnknown || gtr.Ownership.Rev != want.Rev+1 {
		t.Fatalf("completed with its start's record: %+v (ownership %+v), want %+v at the next revision", r, gtr.Ownership, want)
	}
	if obs := inspect(t, s, g.Ref); obs.Record.State != onceflow.StateCompleted || obs.Record.Rev != want.Rev+1 || string(obs.Record.Response) != "r" {
		t.Fatalf("stored after a completion with its start's record: %+v", obs.Record)
	}
}
