package idemstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// A record lost by Redis (FLUSHALL, a restart without AOF) after an
// attempt reached the action: the next claim finds nothing. With evidence
// of the earlier attempt (Request.ReachedAction) that claim is uncertain, exactly
// as a takeover of an expired EXECUTING record is. Without the fix the
// action runs a second time in every case below.
func TestReachedActionMakesAFreshClaimEffectUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	doubt := &idemstore.ReachedAction{Reason: "attempt 1 reached the action (its checkpoint)"}

	t.Run("no reconcile: effect unknown, nothing runs", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		req := request(f)
		req.ReachedAction = doubt
		var runs atomic.Int32
		_, err := e.exec.Execute(t.Context(), req, counted(&runs, "ch_2", nil))
		var eu *onceflow.Error
		if !errors.As(err, &eu) || !eu.Recorded || runs.Load() != 0 {
			t.Fatalf("err = %v, %d runs; want a recorded onceflow.Error and no run", err, runs.Load())
		}
		r := e.wantState(t, f.Ref, onceflow.StateAbandoned)
		if eu.Reason == "" || r.Reason == "" {
			t.Fatalf("no reason: %q / %q", eu.Reason, r.Reason)
		}
	})
	t.Run("reconcile finds the effect: reconciled, nothing runs", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		req := request(f)
		req.ReachedAction = doubt
		req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) { return []byte("ch_1"), true, nil }
		var runs atomic.Int32
		res, err := e.exec.Execute(t.Context(), req, counted(&runs, "ch_2", nil))
		if err != nil || res.Outcome != onceflow.OutcomeReconciled || string(res.Response) != "ch_1" || runs.Load() != 0 {
			t.Fatalf("%+v, %v, %d runs; want the reconciled effect", res, err, runs.Load())
		}
		e.wantState(t, f.Ref, onceflow.StateCompleted)
	})
	t.Run("reconcile finds nothing: runs once, and the action knows the doubt", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		req := request(f)
		req.ReachedAction = doubt
		req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) { return nil, false, nil }
		var seen string
		res, err := e.exec.Execute(t.Context(), req, func(ctx context.Context) ([]byte, error) {
			x, _ := idemstore.ExecutionFrom(ctx)
			seen = x.EffectUnknown
			return []byte("ch_2"), nil
		})
		if err != nil || res.Outcome != onceflow.OutcomeRan || seen == "" {
			t.Fatalf("%+v, %v, doubt %q", res, err, seen)
		}
	})
	t.Run("reconcile fails: abandoned", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		req := request(f)
		req.ReachedAction = doubt
		req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) {
			return nil, false, errors.New("provider down")
		}
		var runs atomic.Int32
		_, err := e.exec.Execute(t.Context(), req, counted(&runs, "ch_2", nil))
		if !errors.Is(err, onceflow.OutcomeEffectUnknown) || runs.Load() != 0 {
			t.Fatalf("err = %v, %d runs", err, runs.Load())
		}
	})
	t.Run("idempotent downstream: runs", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		req := request(f)
		req.ReachedAction = doubt
		req.IdempotentDownstream = true
		var runs atomic.Int32
		res, err := e.exec.Execute(t.Context(), req, counted(&runs, "ok", nil))
		if err != nil || res.Outcome != onceflow.OutcomeRan || runs.Load() != 1 {
			t.Fatalf("%+v, %v, %d runs", res, err, runs.Load())
		}
	})
	t.Run("without doubt a fresh claim runs", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		var seen *idemstore.Execution
		res, err := e.exec.Execute(t.Context(), request(f), func(ctx context.Context) ([]byte, error) {
			x, _ := idemstore.ExecutionFrom(ctx)
			seen = &x
			return []byte("ok"), nil
		})
		if err != nil || res.Outcome != onceflow.OutcomeRan || seen == nil || seen.EffectUnknown != "" {
			t.Fatalf("%+v, %v, %+v", res, err, seen)
		}
	})
}

// A doubt is settled by the store's own proof: the record of the same
// incarnation that the doubted attempt left FAILED_RETRYABLE. A record of
// another incarnation (created after a loss) does not settle it.
func TestReachedActionIsSettledOnlyByTheSameRecordsNoEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	f := storetest.NewFixture()
	var first idemstore.Execution
	_, err := e.exec.Execute(t.Context(), request(f), func(ctx context.Context) ([]byte, error) {
		first, _ = idemstore.ExecutionFrom(ctx)
		return nil, idemstore.RetryableNoEffect(errors.New("declined before charging"))
	})
	if !errors.Is(err, onceflow.OutcomeRetryable) || first.Fence.Epoch == 0 {
		t.Fatalf("err = %v, fence %v; want a recorded no-effect with an epoch", err, first.Fence)
	}
	req := request(f)
	req.ReachedAction = &idemstore.ReachedAction{Reason: "attempt 1 reached the action", Fence: first.Fence}
	var runs atomic.Int32
	res, err := e.exec.Execute(t.Context(), req, counted(&runs, "ok", nil))
	if err != nil || res.TookOver != onceflow.StateFailedRetryable || runs.Load() != 1 {
		t.Fatalf("%+v, %v, %d runs; want a plain takeover of the settled record", res, err, runs.Load())
	}
	if res.Fence.Epoch != first.Fence.Epoch || !first.Fence.Less(res.Fence) {
		t.Fatalf("fence %v after %v", res.Fence, first.Fence)
	}

	// The same evidence against a FAILED_RETRYABLE record of another
	// incarnation: Redis lost the first record and a later attempt left a
	// new one FAILED_RETRYABLE before reaching anything; the doubted
	// attempt's effect is not settled by it.
	g := storetest.NewFixture()
	_, _ = e.exec.Execute(t.Context(), request(g), counted(&runs, "", idemstore.RetryableNoEffect(errors.New("no"))))
	req = request(g)
	req.ReachedAction = &idemstore.ReachedAction{Reason: "attempt 1 reached the action", Fence: onceflow.Fence{Epoch: 1, Attempt: 1, Rev: 2}}
	runs.Store(0)
	_, err = e.exec.Execute(t.Context(), req, counted(&runs, "ok", nil))
	if !errors.Is(err, onceflow.OutcomeEffectUnknown) || runs.Load() != 0 {
		t.Fatalf("err = %v, %d runs; want effect unknown", err, runs.Load())
	}
}

// A record created after a loss fences above every attempt of the lost
// one: its Epoch (creation time in the store's clock) comes first.
func TestFenceGrowsAcrossALostRecord(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	fenceOf := func() onceflow.Fence {
		var x idemstore.Execution
		_, err := e.exec.Execute(t.Context(), request(f), func(ctx context.Context) ([]byte, error) {
			x, _ = idemstore.ExecutionFrom(ctx)
			return nil, idemstore.RetryableNoEffect(errors.New("again"))
		})
		if !errors.Is(err, onceflow.OutcomeRetryable) {
			t.Fatal(err)
		}
		return x.Fence
	}
	var zombie onceflow.Fence
	for range 3 {
		zombie = fenceOf()
	}
	if zombie.Attempt != 3 {
		t.Fatalf("zombie fence %v", zombie)
	}
	// Redis loses the record; its clock has moved on since the record was
	// created (it always has, by the three attempts' round trips).
	rdb := redistest.Client(t)
	if err := rdb.Del(t.Context(), e.store.Key(f.Ref)).Err(); err != nil {
		t.Fatal(err)
	}
	for {
		now, err := rdb.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.UnixMilli() > zombie.Epoch {
			break
		}
	}
	after := fenceOf()
	if after.Attempt != 1 || !zombie.Less(after) {
		t.Fatalf("after the loss %v, zombie %v: the new attempt must fence above the zombie", after, zombie)
	}
}
