package idemstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"

	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/redistest"
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
	return nil, &onceflow.StoreError{Op: "renew", Ref: req.Ref, Certainty: onceflow.Indeterminate, Err: ctx.Err()}
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

// countRenewStore counts the renewals its executor asks for.
type countRenewStore struct {
	*redisstore.Store
	renewals atomic.Int64
}

func (s *countRenewStore) Renew(ctx context.Context, req driver.RenewRequest) (driver.RenewOutcome, error) {
	s.renewals.Add(1)
	return s.Store.Renew(ctx, req)
}

// evalCounter counts the script calls a client sends.
type evalCounter struct{ calls atomic.Int64 }

func (h *evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.calls.Add(1)
		}
		return next(ctx, cmd)
	}
}

// TestLeasesStartedApartAreRenewedTogether: the executor renews every
// lease on one grid of RenewInterval, so the leases of actions started at
// different times fall due together and the store sends them in a few
// calls. Ten actions started 9 ms apart (spread over most of a 100 ms
// interval) are renewed at about five leases a call; on schedules of
// their own each would go alone.
func TestLeasesStartedApartAreRenewedTogether(t *testing.T) {
	t.Parallel()
	client := redistest.NewClient(t, redistest.Addr(t))
	hook := &evalCounter{}
	client.AddHook(hook)
	rs, err := redisstore.New(redisstore.Config{Client: client, Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	store := &countRenewStore{Store: rs}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second, RenewInterval: 100 * time.Millisecond})
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
	calls0, renewals0 := hook.calls.Load(), store.renewals.Load()
	redistest.WaitFor(t, 30*time.Second, func() bool { return store.renewals.Load()-renewals0 >= 5*n }, "the leases were not renewed")
	calls, renewals := hook.calls.Load()-calls0, store.renewals.Load()-renewals0
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if per := float64(renewals) / float64(calls); per < 3 {
		t.Errorf("%d renewals took %d script calls (%.1f a call); want at least 3 a call: the leases fall due together", renewals, calls, per)
	}
}
