package idemstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestRerunPastTheDownstreamsRetentionIsRefused: a re-run after an
// unknown effect (IdempotentDownstream, or a Reconcile that found
// nothing) whose first attempt may have reached the downstream longer ago
// than Request.DownstreamRetention would reach a downstream that has
// forgotten the key: it is refused, the record abandoned with
// RetentionPassed and Since, and onceflow.retention_refusals counts it.
// Within the retention the same re-run runs. Without the guard the action
// runs in every "refused" case.
func TestRerunPastTheDownstreamsRetentionIsRefused(t *testing.T) {
	t.Parallel()
	te := newTelemetryEnv(t, idemstore.ExecutorConfig{})
	e := te.env
	never := func(t *testing.T) idemstore.Action {
		return func(context.Context) ([]byte, error) { t.Error("the action ran past the retention"); return nil, nil }
	}
	refused := func(t *testing.T, f storetest.Fixture, err error) {
		t.Helper()
		var eu *onceflow.Error
		if !errors.As(err, &eu) || !eu.Recorded || !eu.RetentionPassed || eu.Since.IsZero() || !strings.Contains(eu.Reason, "retention") {
			t.Fatalf("err = %#v, want a recorded onceflow.Error with RetentionPassed, Since and the reason", err)
		}
		r := e.wantState(t, f.Ref, onceflow.StateAbandoned)
		if !strings.Contains(r.Reason, "retention") {
			t.Fatalf("the record's reason %q does not say why", r.Reason)
		}
	}

	t.Run("idempotent downstream past the retention: refused", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		e.expiredExecuting(t, f) // created at least the lease (10ms) ago
		req := request(f)
		req.IdempotentDownstream = true
		req.DownstreamRetention = time.Millisecond
		_, err := e.exec.Execute(t.Context(), req, never(t))
		refused(t, f, err)
	})
	t.Run("reconcile finds nothing past the retention: refused", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		e.expiredExecuting(t, f)
		req := request(f)
		req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) { return nil, false, nil }
		req.DownstreamRetention = time.Millisecond
		_, err := e.exec.Execute(t.Context(), req, never(t))
		refused(t, f, err)
	})
	t.Run("reconcile finds the effect past the retention: reconciled", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		e.expiredExecuting(t, f)
		req := request(f)
		req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) { return []byte("ch_1"), true, nil }
		req.DownstreamRetention = time.Millisecond
		if res, err := e.exec.Execute(t.Context(), req, never(t)); err != nil || res.Outcome != onceflow.OutcomeReconciled {
			t.Fatalf("%+v, %v: a found effect is proof, whatever the retention", res, err)
		}
	})
	t.Run("a lost record: measured from the earlier incarnation", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		req := request(f)
		req.IdempotentDownstream = true
		req.DownstreamRetention = time.Hour
		// The store lost the record; Temporal's checkpoint says attempt 1
		// reached the action on a record created two hours ago.
		req.ReachedAction = &idemstore.ReachedAction{Reason: "attempt 1 reached the action (its checkpoint)",
			Fence: onceflow.Fence{Epoch: time.Now().Add(-2 * time.Hour).UnixMilli(), Attempt: 1, Rev: 2}}
		_, err := e.exec.Execute(t.Context(), req, never(t))
		refused(t, f, err)
	})
	t.Run("within the retention: runs", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		e.expiredExecuting(t, f)
		req := request(f)
		req.IdempotentDownstream = true
		req.DownstreamRetention = time.Hour
		var runs atomic.Int32
		if res, err := e.exec.Execute(t.Context(), req, counted(&runs, "ok", nil)); err != nil || runs.Load() != 1 || res.TookOver != onceflow.StateExecuting {
			t.Fatalf("%+v, %v, %d runs", res, err, runs.Load())
		}
	})
	t.Run("first attempt: no earlier effect, the retention does not apply", func(t *testing.T) {
		t.Parallel()
		f := storetest.NewFixture()
		req := request(f)
		req.DownstreamRetention = time.Nanosecond
		var runs atomic.Int32
		if _, err := e.exec.Execute(t.Context(), req, counted(&runs, "ok", nil)); err != nil || runs.Load() != 1 {
			t.Fatalf("%v, %d runs", err, runs.Load())
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if n := te.counter(t, "onceflow.retention_refusals"); n != 3 {
			t.Errorf("onceflow.retention_refusals = %d, want 3", n)
		}
	})
}
