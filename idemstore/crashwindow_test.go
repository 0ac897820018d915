package idemstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestCrashWindowMatrix loses the reply of each store call after it was
// applied, or fails it before it was applied, and checks that the action
// ran at most once, that Execute told the truth (never a success that was
// not recorded), and that the record ends where the design says.
func TestCrashWindowMatrix(t *testing.T) {
	t.Parallel()
	type outcome int
	const (
		ran outcome = iota
		retryable
		effectUnknown
	)
	cells := []struct {
		method storetest.Method
		split  bool           // use the two-step claim → start path
		actErr error          // what the action returns
		want   outcome        // what Execute must report
		state  onceflow.State // where the record must end
	}{
		{storetest.MethodClaim, true, nil, ran, onceflow.StateCompleted},
		{storetest.MethodClaimStart, false, nil, ran, onceflow.StateCompleted},
		{storetest.MethodStart, true, nil, ran, onceflow.StateCompleted},
		{storetest.MethodRenew, false, nil, ran, onceflow.StateCompleted},
		{storetest.MethodComplete, false, nil, ran, onceflow.StateCompleted},
		{storetest.MethodFail, false, idemstore.RetryableNoEffect(errors.New("declined")), retryable, onceflow.StateFailedRetryable},
		{storetest.MethodFail, false, errors.New("timeout after send"), effectUnknown, onceflow.StateAbandoned},
	}
	e := newEnv(t, idemstore.ExecutorConfig{})
	for _, c := range cells {
		for _, fault := range []storetest.Fault{storetest.LoseReplyAfterApply, storetest.ErrorBeforeApply} {
			name := fmt.Sprintf("%s/split=%v/%v/fault=%d", c.method, c.split, c.want, fault)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := storetest.NewFixture()
				local, exec := e.isolated(t)
				local.Inject(c.method, fault)
				req := request(f)
				if c.split {
					req.BeforeStart = func(context.Context, driver.Ownership) error { return nil }
				}
				ticks := make(chan time.Time)
				req.RenewTicks = ticks
				var runs atomic.Int32
				res, err := exec.Execute(t.Context(), req, func(ctx context.Context) ([]byte, error) {
					runs.Add(1)
					// Two renewals: the second send waits until the first
					// (the faulty one) was handled.
					for range 2 {
						select {
						case ticks <- time.Now():
						case <-ctx.Done():
						}
					}
					if ctx.Err() != nil {
						return nil, context.Cause(ctx)
					}
					if c.actErr != nil {
						return nil, c.actErr
					}
					return []byte("resp"), nil
				})
				if runs.Load() != 1 {
					t.Fatalf("the action ran %d times", runs.Load())
				}
				switch c.want {
				case ran:
					if err != nil || res.Outcome != onceflow.OutcomeRan || string(res.Response) != "resp" {
						t.Fatalf("%+v, %v; want a recorded success", res, err)
					}
				case retryable:
					var re *onceflow.Error
					if !errors.As(err, &re) || !re.Recorded {
						t.Fatalf("err = %v, want a recorded onceflow.Error", err)
					}
				case effectUnknown:
					var eu *onceflow.Error
					if !errors.As(err, &eu) || !eu.Recorded {
						t.Fatalf("err = %v, want a recorded onceflow.Error", err)
					}
				}
				e.wantState(t, f.Ref, c.state)
				if local.Calls(c.method) < 1 {
					t.Fatalf("%s was never called", c.method)
				}
			})
		}
	}

	// When the store stays silent, Execute must still not lie.
	testSilentStore(t, e)
}

// testSilentStore runs TestCrashWindowMatrix's cells in which the store
// stays silent (a call fails and so does the Inspect after it, or a call
// fails every time it is sent): Execute must still not lie.
func testSilentStore(t *testing.T, e env) {
	t.Run("claim+start and inspect both fail: nothing runs", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		local, exec := e.isolated(t)
		local.Inject(storetest.MethodClaimStart, storetest.ErrorBeforeApply)
		local.Inject(storetest.MethodInspect, storetest.ErrorBeforeApply)
		var runs atomic.Int32
		_, err := exec.Execute(t.Context(), request(f), counted(&runs, "x", nil))
		if !errors.Is(err, onceflow.OutcomeIndeterminate) || !errors.Is(err, onceflow.OutcomeStoreUnavailable) || runs.Load() != 0 {
			t.Fatalf("err = %v, runs %d; want the store errors and no run", err, runs.Load())
		}
	})
	t.Run("complete and inspect both fail: awaiting a decision, never success", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		local, exec := e.isolated(t)
		local.Inject(storetest.MethodComplete, storetest.ErrorBeforeApply)
		local.Inject(storetest.MethodInspect, storetest.ErrorBeforeApply)
		var runs atomic.Int32
		_, err := exec.Execute(t.Context(), request(f), counted(&runs, "x", nil))
		if !errors.Is(err, onceflow.OutcomeAwaitingDecision) || runs.Load() != 1 {
			t.Fatalf("err = %v; want onceflow.OutcomeAwaitingDecision", err)
		}
		e.wantState(t, f.Ref, onceflow.StateExecuting)
	})
	t.Run("complete lost and the record moved on: awaiting a decision", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		local, exec := e.isolated(t)
		local.InjectAlways(storetest.MethodComplete, storetest.ErrorBeforeApply)
		var runs atomic.Int32
		_, err := exec.Execute(t.Context(), request(f), counted(&runs, "x", nil))
		if !errors.Is(err, onceflow.OutcomeAwaitingDecision) || local.Calls(storetest.MethodComplete) != 2 {
			t.Fatalf("err = %v after %d completes; want onceflow.OutcomeAwaitingDecision after 2", err, local.Calls(storetest.MethodComplete))
		}
	})
}
