package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	onceactivity "github.com/onceflow/onceflow/activity"
	idemwf "github.com/onceflow/onceflow/workflow"
)

var unknown = onceactivity.EffectUnknownDetails{RecordKey: "charge-payment:d1:abc", OperationCode: "charge-payment", Attempt: 1, Rev: 2, State: "ABANDONED", Recorded: true}

func payWorkflow(ctx workflow.Context, in string, reconcile string) (string, error) {
	r, err := idemwf.NewRecovery(ctx)
	if err != nil {
		return "", err
	}
	opts := idemwf.Options{
		Activity: workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		},
		Reconcile: reconcile,
	}
	return idemwf.Execute[string](ctx, r, opts, "charge", in)
}

type world struct {
	env      *testsuite.TestWorkflowEnvironment
	charges  int
	resolved []onceactivity.ResolveRecordInput
}

func newWorld(t *testing.T, reconcile func(context.Context, string) (idemwf.ReconcileResult, error)) *world {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	w := &world{env: suite.NewTestWorkflowEnvironment()}
	w.env.RegisterWorkflow(payWorkflow)
	w.env.RegisterActivityWithOptions(func(ctx context.Context, in string) (string, error) {
		w.charges++
		if w.charges == 1 {
			return "", temporal.NewNonRetryableApplicationError("effect unknown", onceactivity.TypeEffectUnknown, nil, unknown)
		}
		return "charged again", nil
	}, sdkactivity.RegisterOptions{Name: "charge"})
	w.env.RegisterActivityWithOptions(func(ctx context.Context, in onceactivity.ResolveRecordInput) error {
		w.resolved = append(w.resolved, in)
		return nil
	}, sdkactivity.RegisterOptions{Name: onceactivity.ResolveRecordActivity})
	if reconcile != nil {
		w.env.RegisterActivityWithOptions(reconcile, sdkactivity.RegisterOptions{Name: "reconcile"})
	}
	return w
}

// decide queries the pending recoveries, then sends the decision.
func (w *world) decide(t *testing.T, res idemwf.Resolution) {
	w.env.RegisterDelayedCallback(func() {
		v, err := w.env.QueryWorkflow(idemwf.PendingQuery)
		if err != nil {
			t.Error(err)
			return
		}
		var pending []idemwf.PendingRecovery
		if err := v.Get(&pending); err != nil || len(pending) != 1 || pending[0].RecordKey != unknown.RecordKey || pending[0].Activity != "charge" {
			t.Errorf("pending = %+v, %v", pending, err)
		}
		// A decision for another operation first: it must not be taken for this one.
		w.env.SignalWorkflow(idemwf.ResolveSignal, idemwf.Resolution{RecordKey: "other", Decision: idemwf.Fail})
		w.env.SignalWorkflow(idemwf.ResolveSignal, res)
	}, time.Hour)
}

func TestRetryDecisionRunsTheActivityAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.decide(t, idemwf.Resolution{RecordKey: unknown.RecordKey, Decision: idemwf.Retry, Reason: "provider has no charge"})
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "charged again" || w.charges != 2 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges)
	}
	if len(w.resolved) != 1 || w.resolved[0].Target != "FAILED_RETRYABLE" || w.resolved[0].Details != unknown {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}

func TestCompletedDecisionReturnsTheGivenResult(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.decide(t, idemwf.Resolution{RecordKey: unknown.RecordKey, Decision: idemwf.Completed, Result: json.RawMessage(`"ch_found"`)})
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "ch_found" || w.charges != 1 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges)
	}
	if len(w.resolved) != 1 || w.resolved[0].Target != "COMPLETED" || string(w.resolved[0].Response) != `"ch_found"` {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}

func TestFailDecisionFailsTheWorkflow(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.decide(t, idemwf.Resolution{RecordKey: unknown.RecordKey, Decision: idemwf.Fail, Reason: "refunded by hand"})
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	var ae *temporal.ApplicationError
	if err := w.env.GetWorkflowError(); !errors.As(err, &ae) || ae.Type() != idemwf.TypeRecoveryFailed || w.charges != 1 || len(w.resolved) != 0 {
		t.Fatalf("err %v, charges %d, resolved %+v", err, w.charges, w.resolved)
	}
}

func TestReconcileActivityResolvesWithoutWaiting(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(context.Context, string) (idemwf.ReconcileResult, error) {
		return idemwf.ReconcileResult{Found: true, Result: json.RawMessage(`"ch_at_provider"`)}, nil
	})
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "reconcile")
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "ch_at_provider" || w.charges != 1 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges)
	}
	if len(w.resolved) != 1 || w.resolved[0].Target != "COMPLETED" {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}
