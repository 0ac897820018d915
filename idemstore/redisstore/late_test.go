package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// The bound's check, as the generated claim and transition scripts
// have it, and the same made never to refuse (for the tests that prove
// the check is what refuses).
const (
	boundCheck  = "> tonumber(served) + tonumber(budget) then"
	noBoundCkck = "< 0 then"
)

// lateStores is a store whose calls go through a proxy with a command
// timeout of 300 ms, and one that reads the same records directly.
func lateStores(t *testing.T) (late, direct *redisstore.Store, proxy *redistest.Proxy) {
	t.Helper()
	proxy = redistest.NewProxy(t, redistest.Addr(t))
	ns := redistest.Namespace(t)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	late = newStore(t, redisstore.Config{Client: c, Namespace: ns, CommandTimeout: 300 * time.Millisecond})
	direct = newStore(t, redisstore.Config{Client: redistest.Client(t), Namespace: ns})
	if err := late.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	return late, direct, proxy
}

// deliverLate holds every script call for a second, past the 300 ms the
// store waits, while call runs, then waits for Redis to have answered
// every held call.
func deliverLate(t *testing.T, proxy *redistest.Proxy, call func()) {
	t.Helper()
	proxy.SetDelay(time.Second)
	proxy.SetFault(redistest.DelayScripts)
	call()
	proxy.SetFault(redistest.Pass)
	redistest.WaitFor(t, 10*time.Second, func() bool {
		return proxy.LateCalls() > 0 && proxy.LateAnswers() >= proxy.LateCalls()
	}, "Redis to answer the %d late deliveries (%d answered)", proxy.LateCalls(), proxy.LateAnswers())
}

func requireIndeterminate(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, onceflow.OutcomeIndeterminate) {
		t.Fatalf("%s reached Redis after its deadline: %v, want Indeterminate", what, err)
	}
}

// TestALateClaimRefusesItself: a claim+start that reaches Redis after
// its caller's deadline (the proxy holds it past it, then delivers it)
// changes nothing: its caller heard Indeterminate at the deadline, and
// no record exists once Redis has run it. With the scripts' bound check
// cut out, the same late claim takes a lease nobody holds: the check is
// what settles a claim's fate at its deadline.
func TestALateClaimRefusesItself(t *testing.T) {
	t.Parallel()
	for _, broken := range []bool{false, true} {
		name := "bounded"
		if broken {
			name = "without the check"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, direct, proxy := lateStores(t)
			if broken {
				redisstore.MutateScript(s, "claim", boundCheck, noBoundCkck)
				if err := s.LoadScripts(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			f := storetest.NewFixture()
			deliverLate(t, proxy, func() {
				_, err := s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
				requireIndeterminate(t, "the claim", err)
			})
			if redisstore.BoundedCalls(s) != 1 {
				t.Fatalf("%d bounded calls, want the claim's", redisstore.BoundedCalls(s))
			}
			obs, err := direct.Inspect(t.Context(), f.Ref)
			if err != nil {
				t.Fatal(err)
			}
			if broken != obs.Found {
				t.Fatalf("after the late claim ran, found=%v (%s); want %v", obs.Found, obs.Record.State, broken)
			}
		})
	}
}

// TestALateTransitionRefusesItself: a start and a complete that reach
// Redis after their caller's deadline change nothing: the record is as
// the call found it, at the same revision; a lease held is still held,
// and the complete, sent again on time, applies.
func TestALateTransitionRefusesItself(t *testing.T) {
	t.Parallel()
	s, direct, proxy := lateStores(t)
	ctx := t.Context()
	f := storetest.NewFixture()

	out, err := s.Claim(ctx, f.Claim(onceflow.NewOwner()))
	acq, ok := out.(driver.Acquired)
	if err != nil || !ok {
		t.Fatalf("claim = %T, %v", out, err)
	}
	nonce := onceflow.NewNonce()
	deliverLate(t, proxy, func() {
		_, err := s.Start(ctx, driver.StartRequest{Ownership: acq.Ownership, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
		requireIndeterminate(t, "the start", err)
	})
	obs, err := direct.Inspect(ctx, f.Ref)
	if err != nil || obs.Record.State != onceflow.StateClaimed || obs.Record.Rev != acq.Ownership.Rev {
		t.Fatalf("after the late start ran: %s rev %d, %v; want CLAIMED rev %d", obs.Record.State, obs.Record.Rev, err, acq.Ownership.Rev)
	}

	st, err := s.Start(ctx, driver.StartRequest{Ownership: acq.Ownership, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
	started, ok := st.(driver.Transitioned)
	if err != nil || !ok {
		t.Fatalf("start on time = %T, %v", st, err)
	}
	complete := driver.CompleteRequest{Ownership: started.Ownership, Nonce: nonce, Response: []byte("ok"), TTL: f.TTL, Started: started.Record}
	deliverLate(t, proxy, func() {
		_, err := s.Complete(ctx, complete)
		requireIndeterminate(t, "the complete", err)
	})
	obs, err = direct.Inspect(ctx, f.Ref)
	if err != nil || obs.Record.State != onceflow.StateExecuting || obs.Record.Rev != started.Ownership.Rev {
		t.Fatalf("after the late complete ran: %s rev %d, %v; want EXECUTING rev %d", obs.Record.State, obs.Record.Rev, err, started.Ownership.Rev)
	}
	if out, err := s.Complete(ctx, complete); err != nil {
		t.Fatalf("complete on time = %T, %v", out, err)
	}
	if redisstore.UnboundedCalls(s) != 0 {
		t.Fatalf("%d calls went unbounded", redisstore.UnboundedCalls(s))
	}
}

// TestLatePipelinedClaimsRefuseThemselves: claims of 16 goroutines on one
// store, which ride the auto-pipeliner together, held past their
// deadline and then delivered as the pipelines they were sent in: none
// takes a lease.
func TestLatePipelinedClaimsRefuseThemselves(t *testing.T) {
	t.Parallel()
	s, direct, proxy := lateStores(t)
	ctx := t.Context()
	// A first claim on time, so that the store holds a reading of Redis'
	// clock before the goroutines meet.
	if _, err := s.ClaimStart(ctx, storetest.NewFixture().ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())); err != nil {
		t.Fatal(err)
	}
	fs := make([]storetest.Fixture, 16)
	deliverLate(t, proxy, func() {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range fs {
			fs[i] = storetest.NewFixture()
			wg.Go(func() {
				<-start
				_, err := s.ClaimStart(ctx, fs[i].ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
				if !errors.Is(err, onceflow.OutcomeIndeterminate) {
					t.Errorf("claim %d reached Redis late: %v, want Indeterminate", i, err)
				}
			})
		}
		close(start)
		wg.Wait()
	})
	if redisstore.PipelinedScripts(s) == 0 {
		t.Fatal("no claim rode the auto-pipeliner")
	}
	for i, f := range fs {
		obs, err := direct.Inspect(ctx, f.Ref)
		if err != nil || obs.Found {
			t.Fatalf("claim %d: found=%v (%s), %v after the late pipelines ran; want no record", i, obs.Found, obs.Record.State, err)
		}
	}
	t.Logf("%d claims pipelined, %d late deliveries, %d bounded, %d unbounded", redisstore.PipelinedScripts(s), proxy.LateCalls(),
		redisstore.BoundedCalls(s), redisstore.UnboundedCalls(s))
}

// TestBoundHoldsWithASkewedAndSteppedLocalClock: the local wall clock an
// hour off Redis' changes nothing (the bound is Redis' own reading plus a
// monotonic budget); a step of it mid-run is seen, calls go unbounded,
// and bounded again once readings agree, and a late claim still refuses
// itself.
func TestBoundHoldsWithASkewedAndSteppedLocalClock(t *testing.T) {
	t.Parallel()
	s, direct, proxy := lateStores(t)
	ctx := context.Background()
	var mu sync.Mutex
	skew := time.Hour
	redisstore.SetWallClock(s, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(skew)
	})
	claim := func() (storetest.Fixture, error) {
		f := storetest.NewFixture()
		_, err := s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
		return f, err
	}
	if _, err := claim(); err != nil || redisstore.BoundedCalls(s) != 1 {
		t.Fatalf("claim with the local clock an hour ahead: %v, %d bounded", err, redisstore.BoundedCalls(s))
	}
	mu.Lock()
	skew = -time.Hour // a step of two hours back
	mu.Unlock()
	if _, err := claim(); err != nil || redisstore.ClockSteps(s) != 1 || redisstore.UnboundedCalls(s) != 1 {
		t.Fatalf("claim after the step: %v, %d steps seen, %d unbounded; want 1 and 1", err, redisstore.ClockSteps(s), redisstore.UnboundedCalls(s))
	}
	redistest.WaitFor(t, 10*time.Second, func() bool {
		before := redisstore.BoundedCalls(s)
		_, err := claim()
		return err == nil && redisstore.BoundedCalls(s) > before
	}, "calls to be bounded again after the step")
	var late storetest.Fixture
	deliverLate(t, proxy, func() {
		var err error
		late, err = claim()
		requireIndeterminate(t, "the claim", err)
	})
	if obs, err := direct.Inspect(ctx, late.Ref); err != nil || obs.Found {
		t.Fatalf("the late claim after the step: found=%v, %v; want no record", obs.Found, err)
	}
}
