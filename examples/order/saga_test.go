package order_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/onceflowtest"
)

// TestACompensationOutlastsTheStepsRetries: the charge fails, and the
// refund and the release that compensate it fail for longer than a step's
// retries last (a Redis whose durable writes fail through a failover, as
// the chaos command's Sentinel run found). The compensations keep trying
// until they succeed, and the order ends failed with its stock released;
// with a step's MaximumAttempts they gave up and the workflow failed,
// leaving the order reserved.
func TestACompensationOutlastsTheStepsRetries(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	// The SDK's 1 s deadlock detector measures wall time: on two cores
	// under -race beside other test binaries the workflow's coroutine can
	// be starved that long without any deadlock (it failed so at load 15).
	env.SetWorkerOptions(sdkworker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterWorkflow(order.PlaceOrder)
	// One failure more than a step's attempts: the SDK's test environment
	// caps an unlimited retry policy at 10 attempts.
	failures := int32(order.StepActivityOptions.RetryPolicy.MaximumAttempts) + 1
	var refunds, releases atomic.Int32
	flaky := func(n *atomic.Int32) error {
		if n.Add(1) <= failures {
			return errors.New("redisstore: 1 of 2 replicas confirmed the write")
		}
		return nil
	}
	for name, fn := range map[string]any{
		order.CreateOrderActivity: func(context.Context, order.PlaceOrderInput) error { return nil },
		order.SetStatusActivity:   func(context.Context, order.StatusInput) error { return nil },
		order.ReserveActivity: func(context.Context, order.ReserveInput) (ledger.Reservation, error) {
			return ledger.Reservation{Status: ledger.Reserved}, nil
		},
		order.ChargeCardActivity: func(context.Context, order.ChargeInput) (ledger.Payment, error) {
			return ledger.Payment{}, temporal.NewNonRetryableApplicationError("the gateway refused", "test.GatewayDown", nil)
		},
		order.RefundActivity: func(context.Context, order.ChargeInput) (order.Refund, error) {
			return order.Refund{}, flaky(&refunds)
		},
		order.ReleaseActivity: func(context.Context, order.OrderRef) (ledger.Reservation, error) {
			return ledger.Reservation{Status: ledger.Released}, flaky(&releases)
		},
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	env.ExecuteWorkflow(order.PlaceOrder, order.PlaceOrderInput{OrderID: "o-1", CustomerID: "c-1",
		Items: []ledger.Item{{SKU: "A", Qty: 1}}, AmountCents: 100, Currency: "USD"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var res order.OrderResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatalf("the workflow failed after %d refunds and %d releases: %v", refunds.Load(), releases.Load(), err)
	}
	if res.Status != order.StatusFailed || refunds.Load() != failures+1 || releases.Load() != failures+1 {
		t.Fatalf("status %q after %d refunds and %d releases; want %q after %d of each", res.Status, refunds.Load(), releases.Load(), order.StatusFailed, failures+1)
	}
}

// TestAReserveThatMayHaveReservedIsReleased: the reserve step reserves and
// then fails with its effect unknown, every time (a ledger connection lost
// after its COMMIT); the workflow retries it by itself (the step is
// idempotent) until it gives the incident to a person, who fails it. The
// order ends failed with a stable reason, and its stock is released: the
// saga compensates a step that may have acted, not only one that
// completed. (Before, the order failed with the store's error text and
// kept the stock reserved.)
func TestAReserveThatMayHaveReservedIsReleased(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	once := onceflowtest.Attach(t, env)
	env.SetWorkerOptions(sdkworker.Options{DeadlockDetectionTimeout: time.Minute, Interceptors: once.Interceptors()})
	env.RegisterWorkflow(order.PlaceOrder)
	var reserves, releases atomic.Int32
	onceactivity.Register(env, once.Activities, func(context.Context, order.ReserveInput) (ledger.Reservation, error) {
		reserves.Add(1)
		return ledger.Reservation{}, errors.New("ledger: connection reset after COMMIT")
	}, onceactivity.Name(order.ReserveActivity), onceactivity.Code(order.ReserveCode), onceactivity.IdempotentDownstream(),
		onceactivity.BusinessKey(func(in order.ReserveInput) string { return in.OrderID + "/reserve" }))
	onceactivity.Register(env, once.Activities, func(context.Context, order.OrderRef) (ledger.Reservation, error) {
		releases.Add(1)
		return ledger.Reservation{Status: ledger.Released}, nil
	}, onceactivity.Name(order.ReleaseActivity), onceactivity.Code(order.ReleaseCode), onceactivity.IdempotentDownstream(),
		onceactivity.BusinessKey(func(in order.OrderRef) string { return in.OrderID + "/release" }))
	env.RegisterActivityWithOptions(func(context.Context, order.PlaceOrderInput) error { return nil }, activity.RegisterOptions{Name: order.CreateOrderActivity})
	env.RegisterActivityWithOptions(func(context.Context, order.StatusInput) error { return nil }, activity.RegisterOptions{Name: order.SetStatusActivity})
	onceflowtest.Decide(env, onceflowtest.Fail("the ledger shows a reservation; releasing it"))
	env.ExecuteWorkflow(order.PlaceOrder, order.PlaceOrderInput{OrderID: "o-1", CustomerID: "c-1",
		Items: []ledger.Item{{SKU: "SKU-10", Qty: 3}}, AmountCents: 100, Currency: "USD"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var res order.OrderResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != order.StatusFailed || res.Reason != order.ReasonReserveFailed || releases.Load() != 1 {
		t.Fatalf("status %q, reason %q after %d reserves, %d releases; want %q, %q, the stock released once",
			res.Status, res.Reason, reserves.Load(), releases.Load(), order.StatusFailed, order.ReasonReserveFailed)
	}
}
