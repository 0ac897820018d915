package workflow_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/internal/handshake"
	"github.com/onceflow/onceflow/onceflowtest"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// policy is a retry policy a service may set on its activity.
type policy struct {
	Name            string
	MaxAttempts     int32
	ScheduleToClose time.Duration
	NonRetryable    []string
}

// fault is what goes wrong in the matrix's charge.
type fault string

const (
	crashAfter  fault = "crash after the effect"
	crashBefore fault = "crash before the effect"
	errorAfter  fault = "an error returned after the effect"
	lostWrite   fault = "a lost completion write"
	declined    fault = "the service's business error, no effect"
	unavailable fault = "a retryable error that proves no effect, every attempt"
)

// DeclinedError is the matrix service's business error: the charge was
// refused, nothing was taken.
type DeclinedError struct{}

func (DeclinedError) Error() string { return "card declined" }

// matrixBank is the matrix service's downstream: it counts effects, and
// goes wrong as its fault says, at its first call.
type matrixBank struct {
	fault   fault
	redis   *miniredis.Miniredis
	calls   atomic.Int32
	effects atomic.Int32
}

// Charge is the service's activity, wrapped by onceflow.
func (b *matrixBank) Charge(ctx context.Context, order string) (string, error) {
	first := b.calls.Add(1) == 1
	switch {
	case first && b.fault == crashBefore:
		onceflowtest.Crash(ctx)
	case b.fault == declined:
		return "", DeclinedError{}
	case b.fault == unavailable:
		return "", onceactivity.NoEffect(errors.New("gateway unavailable"))
	}
	b.effects.Add(1)
	if first {
		switch b.fault {
		case crashAfter:
			onceflowtest.Crash(ctx)
		case errorAfter:
			return "", errors.New("read tcp: i/o timeout")
		case lostWrite:
			b.redis.SetError("LOADING Redis is loading the dataset in memory")
		}
	}
	return "ch-" + order, nil
}

// chargeStep is the service's workflow, written for Temporal alone: one
// charge under the service's retry policy.
func chargeStep(ctx workflow.Context, p policy) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: p.ScheduleToClose,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: p.MaxAttempts,
			NonRetryableErrorTypes: p.NonRetryable},
	})
	var b *matrixBank
	var id string
	err := workflow.ExecuteActivity(ctx, b.Charge, "order-1").Get(ctx, &id)
	return id, err
}

// TestNoSilentLossUnderAnyRetryPolicy is issue 45's matrix: for every
// retry policy a service may set and every fault, the call ends in one
// effect and its result, a failure the service's own code handles with no
// effect done, or an incident that the pending list shows (decided here
// as a person would, fail: the call then fails with the activity's own
// error, and workflow.MayHaveActed says it may have acted). Never a
// failure with the effect done and no incident. A retry that meets the
// dead attempt's live lease waits for it inside the attempt: it spends
// none of the service's attempts, so with two allowed the second attempt
// itself finds the unknown effect.
func TestNoSilentLossUnderAnyRetryPolicy(t *testing.T) {
	t.Parallel()
	policies := []policy{
		{Name: "MaximumAttempts 1", MaxAttempts: 1},
		{Name: "MaximumAttempts 2", MaxAttempts: 2},
		{Name: "MaximumAttempts 3", MaxAttempts: 3},
		{Name: "unlimited"},
		{Name: "unlimited, ScheduleToClose 10m", ScheduleToClose: 10 * time.Minute},
		{Name: "MaximumAttempts 2, ScheduleToClose 10m", MaxAttempts: 2, ScheduleToClose: 10 * time.Minute},
		{Name: "MaximumAttempts 3, DeclinedError non-retryable", MaxAttempts: 3, NonRetryable: []string{"DeclinedError"}},
	}
	faults := []fault{crashAfter, crashBefore, errorAfter, lostWrite, declined, unavailable}
	for _, p := range policies {
		for _, f := range faults {
			if f == unavailable && p.MaxAttempts == 0 && p.ScheduleToClose == 0 {
				continue // the service retries it for ever, as it would without onceflow
			}
			t.Run(p.Name+"/"+string(f), func(t *testing.T) {
				t.Parallel()
				runCell(t, p, f)
			})
		}
	}
}

func runCell(t *testing.T, p policy, f fault) {
	var suite testsuite.WorkflowTestSuite
	h := slog.Handler(slog.DiscardHandler)
	if testing.Verbose() {
		h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	}
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(h)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	once := onceflowtest.Attach(t, env, onceflowtest.Options{Lease: 3 * time.Second})
	b := &matrixBank{fault: f, redis: once.Redis}
	env.RegisterWorkflow(chargeStep)
	onceactivity.Register(env, once.Activities, b.Charge)
	var (
		mu        sync.Mutex
		incidents []idemwf.PendingRecovery
		settles   int
	)
	onceflowtest.Decide(env, func(pr idemwf.PendingRecovery) (idemwf.Resolution, bool) {
		mu.Lock()
		defer mu.Unlock()
		incidents = append(incidents, pr)
		return idemwf.Resolution{Decision: idemwf.Fail, Reason: "refunded by hand"}, true
	})
	env.SetOnActivityStartedListener(func(info *sdkactivity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == handshake.SettleActivity {
			mu.Lock()
			settles++
			mu.Unlock()
		}
	})
	env.SetOnActivityCompletedListener(func(info *sdkactivity.Info, _ converter.EncodedValue, _ error) {
		if info.ActivityType.Name == "Charge" {
			once.Redis.SetError("") // Redis is back
		}
	})
	env.ExecuteWorkflow(chargeStep, p)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var id string
	err := env.GetWorkflowError()
	if err == nil {
		err = env.GetWorkflowResult(&id)
	}
	mu.Lock()
	defer mu.Unlock()
	effects := b.effects.Load()
	_, mayHaveActed := idemwf.MayHaveActed(err)
	t.Logf("effects %d, incidents %d, settles %d, result %q, err %v", effects, len(incidents), settles, id, err)

	// The invariant, whatever the cell.
	switch {
	case effects > 1:
		t.Fatalf("the charge took effect %d times", effects)
	case err == nil && (effects != 1 || id != "ch-order-1"):
		t.Fatalf("succeeded with %q after %d effects", id, effects)
	case err != nil && effects == 1 && (!mayHaveActed || len(incidents) == 0):
		t.Fatalf("a failure with the effect done, and no incident (EffectUnknown %v, incidents %d): %v", mayHaveActed, len(incidents), err)
	}

	// What each fault must end in.
	switch f {
	case crashAfter, errorAfter, lostWrite, crashBefore:
		if err == nil || !mayHaveActed || len(incidents) != 1 {
			t.Fatalf("want one incident, failed by the decision: incidents %d, err %v", len(incidents), err)
		}
		if f == crashAfter && p.MaxAttempts != 1 && settles != 0 {
			t.Errorf("the retry that met the dead attempt's lease used up the service's attempts (settled %d times)", settles)
		}
		if f == crashAfter && p.MaxAttempts == 1 && settles == 0 {
			t.Errorf("the last attempt died, and the call was not settled")
		}
	case declined:
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != "DeclinedError" || effects != 0 {
			t.Fatalf("want the service's DeclinedError, no effect: %v", err)
		}
		listed := len(p.NonRetryable) > 0
		if listed && (len(incidents) != 0 || mayHaveActed) {
			t.Fatalf("a business error the retry policy lists opened an incident: %d", len(incidents))
		}
		if !listed && len(incidents) != 1 {
			t.Fatalf("an unclassified error must wait for a decision (the effect may have happened): incidents %d", len(incidents))
		}
	case unavailable:
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Message() != "gateway unavailable" || effects != 0 || len(incidents) != 0 {
			t.Fatalf("want the service's own error, no effect, no incident: incidents %d, err %v", len(incidents), err)
		}
	}
	if f == lostWrite || f == crashAfter {
		// Nothing of the activity's to deliver: onceflow's own failure,
		// not the store's internal error, ends the call.
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != idemwf.TypeRecoveryFailed {
			t.Errorf("the fail decision delivered %v, want onceflow's RecoveryFailed", err)
		}
	}
	if f == errorAfter {
		// The decision delivers the activity's own error.
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Message() != "read tcp: i/o timeout" {
			t.Errorf("the fail decision delivered %v, want the activity's own error", err)
		}
		if a := incidents[0].ActionError; a == nil || !strings.Contains(a.Message, "i/o timeout") {
			t.Errorf("the pending incident does not show the action's error: %+v", a)
		}
	}
}
