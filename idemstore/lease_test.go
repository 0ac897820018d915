package idemstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"

	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// slowRenewStore's Renew signals that it was entered, blocks until its
// context is done, and returns a little later, as a store whose reply is
// on the wire does; then it notes that it returned.
type slowRenewStore struct {
	driver.Store
	entered  chan struct{}
	returned atomic.Bool
}

func (s *slowRenewStore) Renew(ctx context.Context, req driver.RenewRequest) (driver.RenewOutcome, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	time.Sleep(30 * time.Millisecond) // the cancelled command's reply is still on its way
	defer s.returned.Store(true)
	return nil, &onceflow.Error{Outcome: onceflow.OutcomeIndeterminate, Op: "renew", Ref: req.Ref, Err: ctx.Err()}
}

// TestExecuteJoinsTheRenewalInFlight: when the action returns while a
// renewal is in flight, Execute cancels the renewal and waits for it, so
// no goroutine of the lease outlives Execute (goleak), and no "renewal
// failed" warning follows. Not parallel: goleak looks at every goroutine.
func TestExecuteJoinsTheRenewalInFlight(t *testing.T) {
	rs, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	store := &slowRenewStore{Store: rs, entered: make(chan struct{}, 1)}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	for range 3 { // the caller's ticks and the executor's own
		for _, callerTicks := range []bool{true, false} {
			store.returned.Store(false)
			req := request(storetest.NewFixture())
			ticks := make(chan time.Time, 1)
			if callerTicks {
				req.RenewTicks = ticks
				ticks <- time.Now()
			} else {
				exec, err = idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second, RenewInterval: time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
			}
			_, err := exec.Execute(context.Background(), req, func(ctx context.Context) ([]byte, error) {
				<-store.entered // a renewal is in flight
				return []byte("ok"), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !store.returned.Load() {
				t.Fatalf("callerTicks=%v: Execute returned before the renewal it cancelled did", callerTicks)
			}
			goleak.VerifyNone(t, before)
		}
	}
	if err := exec.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestDrainWaitsForARenewalThatIgnoresItsContext: Execute does not wait
// longer than half the safety margin for a Renew that ignores its
// cancellation; Drain is its owner and waits for it.
func TestDrainWaitsForARenewalThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	const timeout = 50 * time.Millisecond
	rs, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t), CommandTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	store := &misbehavingStore{Store: rs, timeout: timeout, mode: renewHangs, released: make(chan struct{})}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := request(storetest.NewFixture())
	ticks := make(chan time.Time, 1)
	req.RenewTicks = ticks
	ticks <- time.Now()
	var started atomic.Bool
	begin := time.Now()
	_, err = exec.Execute(context.Background(), req, func(ctx context.Context) ([]byte, error) {
		for {
			store.mu.Lock()
			n := len(store.deadlines)
			store.mu.Unlock()
			if n > 0 {
				started.Store(true)
				return []byte("ok"), nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	})
	if err != nil || !started.Load() {
		t.Fatalf("Execute = %v (renewal started: %v)", err, started.Load())
	}
	if took, limit := time.Since(begin), exec.Config().SafetyMargin; took > limit {
		t.Fatalf("Execute took %v, waiting for a hung renewal; want less than the safety margin %v", took, limit)
	}
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := exec.Drain(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with a renewal hung = %v, want DeadlineExceeded", err)
	}
	close(store.released)
	if err := exec.Drain(t.Context()); err != nil {
		t.Fatalf("Drain after the renewal returned = %v", err)
	}
}

// countRenewStore counts the renewals its executor asks for and notes
// when each was asked for.
type countRenewStore struct {
	*redisstore.Store
	renewals atomic.Int64
	mu       sync.Mutex
	at       []time.Time
}

func (s *countRenewStore) Renew(ctx context.Context, req driver.RenewRequest) (driver.RenewOutcome, error) {
	s.renewals.Add(1)
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return s.Store.Renew(ctx, req)
}

// TestLeasesStartedApartFallDueTogether: the executor renews every lease
// on one grid of RenewInterval, so the leases of actions started at
// different times fall due together, at the grid's ticks, and the store
// can send them as one call (redisstore's batching is tested on its
// own). Ten actions are started 9 ms apart, over most of a 100 ms
// interval: their renewals are asked for just after a tick of the grid
// (the median a few ms after; on schedules of their own their phases
// would spread over the interval, the median at least 36 ms from a tick).
func TestLeasesStartedApartFallDueTogether(t *testing.T) {
	t.Parallel()
	rs, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	store := &countRenewStore{Store: rs}
	const interval = 100 * time.Millisecond
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second, RenewInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	release := make(chan struct{})
	var started atomic.Int32
	errs := make(chan error, n)
	spread := time.NewTicker(9 * time.Millisecond)
	defer spread.Stop()
	for range n {
		<-spread.C
		go func() {
			_, err := exec.Execute(t.Context(), request(storetest.NewFixture()), func(ctx context.Context) ([]byte, error) {
				started.Add(1)
				select {
				case <-release:
					return []byte("ok"), nil
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			})
			errs <- err
		}()
	}
	redistest.WaitFor(t, 10*time.Second, func() bool { return started.Load() == n }, "the actions did not start")
	redistest.WaitFor(t, 30*time.Second, func() bool { return store.renewals.Load() >= 5*n }, "the leases were not renewed")
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	store.mu.Lock()
	phases := make([]time.Duration, len(store.at))
	for i, at := range store.at {
		phases[i] = at.Sub(at.Truncate(interval))
	}
	store.mu.Unlock()
	slices.Sort(phases)
	if median := phases[len(phases)/2]; median > 20*time.Millisecond {
		t.Errorf("the renewals were asked for a median %v after a tick of the %v grid (phases %v); want them just after one: the leases fall due together", median, interval, phases)
	}
}
