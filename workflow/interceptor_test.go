package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/onceflowtest"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// Receipt is the result of the test's payment activity.
type Receipt struct {
	Amount int    `json:"amount"`
	ID     string `json:"id"`
}

// bank is the test's downstream: it counts the payments that happened.
type bank struct {
	mu       sync.Mutex
	payments int
	// failOnce: the first payment happens, and then the call fails
	// (a timeout after the bank acted).
	failOnce  bool
	heartbeat time.Duration
}

// Pay is a wrapped activity that the workflow calls by its function.
func (b *bank) Pay(ctx context.Context, amount int) (Receipt, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.heartbeat = sdkactivity.GetInfo(ctx).HeartbeatTimeout
	b.payments++
	if b.failOnce && b.payments == 1 {
		return Receipt{}, errors.New("read tcp: i/o timeout")
	}
	return Receipt{Amount: amount, ID: "p1"}, nil
}

// Plain is an activity onceflow does not wrap.
func Plain(ctx context.Context, _ int) (time.Duration, error) {
	return sdkactivity.GetInfo(ctx).HeartbeatTimeout, nil
}

// payAndPlain is a workflow as a service writes it, without onceflow: no
// heartbeat timeout, plain ExecuteActivity calls.
func payAndPlain(ctx workflow.Context, amount int) (Receipt, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var b *bank
	var r Receipt
	if err := workflow.ExecuteActivity(ctx, b.Pay, amount).Get(ctx, &r); err != nil {
		return Receipt{}, err
	}
	var hb time.Duration
	if err := workflow.ExecuteActivity(ctx, Plain, amount).Get(ctx, &hb); err != nil {
		return Receipt{}, err
	}
	if hb != 0 {
		return Receipt{}, errors.New("the unwrapped activity got a heartbeat timeout: " + hb.String())
	}
	return r, nil
}

func newInterceptorEnv(t *testing.T, b *bank) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	once := onceflowtest.Attach(t, env)
	env.RegisterWorkflow(payAndPlain)
	onceactivity.Register(env, once.Activities, b.Pay)
	env.RegisterActivity(Plain)
	return env
}

// TestInterceptorGivesTheDefaultHeartbeat: a wrapped activity that the
// workflow schedules without a heartbeat timeout runs with
// the activity package's default, 10s (activity.Heartbeat); an unwrapped
// one is left as it is.
func TestInterceptorGivesTheDefaultHeartbeat(t *testing.T) {
	t.Parallel()
	b := &bank{}
	env := newInterceptorEnv(t, b)
	env.ExecuteWorkflow(payAndPlain, 42)
	var r Receipt
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	if r != (Receipt{Amount: 42, ID: "p1"}) || b.heartbeat != 10*time.Second {
		t.Fatalf("receipt %+v, heartbeat %s; want the payment, with 10s", r, b.heartbeat)
	}
}

// TestInterceptorRecoversBehindExecuteActivity: the payment happened but
// its call failed, so its effect is unknown. The workflow's own
// ExecuteActivity(ctx, b.Pay, amount) waits for a decision, listed by
// PendingQuery with the activity's result type; a result that does not
// decode into it is refused; the decided result is what the workflow's
// Get decodes. The payment is not made again.
func TestInterceptorRecoversBehindExecuteActivity(t *testing.T) {
	t.Parallel()
	b := &bank{failOnce: true}
	env := newInterceptorEnv(t, b)
	w := &world{env: env}
	var pending []idemwf.PendingRecovery
	var bad, good *answer
	env.RegisterDelayedCallback(func() {
		pending = w.pending(t)
		if len(pending) != 1 {
			return
		}
		d := pending[0].Details
		res := idemwf.Resolution{RecordKey: d.RecordKey, Attempt: d.Attempt, Rev: d.Rev, Decision: idemwf.Completed, Reason: "the bank shows p1"}
		res.Result = json.RawMessage(`{"amount":"forty-two"}`)
		bad = w.update(res)
		res.Result = json.RawMessage(`{"amount":42,"id":"p1"}`)
		good = w.update(res)
	}, time.Hour)
	env.ExecuteWorkflow(payAndPlain, 42)
	if len(pending) != 1 || pending[0].Activity != "Pay" || pending[0].ResultType != "workflow_test.Receipt" {
		t.Fatalf("pending %+v; want the payment, as workflow_test.Receipt", pending)
	}
	refusedWith(t, bad, "does not decode into workflow_test.Receipt")
	if good == nil || !good.done || good.err != nil {
		t.Fatalf("the decision was not applied: %+v", good)
	}
	var r Receipt
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	if r != (Receipt{Amount: 42, ID: "p1"}) || b.payments != 1 {
		t.Fatalf("receipt %+v after %d payments; want the decided one after 1", r, b.payments)
	}
}

// TestInterceptorLeavesBusinessErrorsAlone: a non-retryable business
// error reaches the workflow as the activity returned it, and opens no
// incident.
func TestInterceptorLeavesBusinessErrorsAlone(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	once := onceflowtest.Attach(t, env)
	declined := func(ctx context.Context, amount int) (Receipt, error) {
		return Receipt{}, temporal.NewNonRetryableApplicationError("card declined", "CardDeclined", nil)
	}
	onceactivity.Register(env, once.Activities, declined, onceactivity.Code("pay"), onceactivity.Name("Decline"))
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, amount int) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		return workflow.ExecuteActivity(ctx, "Decline", amount).Get(ctx, nil)
	}, workflow.RegisterOptions{Name: "declining"})
	env.ExecuteWorkflow("declining", 42)
	pending := (&world{env: env}).pending(t)
	var ae *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &ae) || ae.Type() != "CardDeclined" || !ae.NonRetryable() || ae.Message() != "card declined" {
		t.Fatalf("err %v; want the activity's own non-retryable CardDeclined", err)
	}
	if len(pending) != 0 {
		t.Fatalf("pending %+v; want none", pending)
	}
}
