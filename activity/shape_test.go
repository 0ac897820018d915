package activity_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/internal/handshake"
	"github.com/onceflow/onceflow/onceflowtest"
)

// shop is a struct of activities, registered together, as the SDK's
// RegisterActivity(&shop{}) registers them.
type shop struct{ effects atomic.Int32 }

func (s *shop) Ping(context.Context) error                { s.effects.Add(1); return nil }
func (s *shop) Notify(_ context.Context, to string) error { s.effects.Add(1); return nil }
func (s *shop) Count(context.Context) (int, error)        { return int(s.effects.Add(1)), nil }
func (s *shop) Add(_ context.Context, a, b int) (int, error) {
	s.effects.Add(1)
	return a + b, nil
}
func (s *shop) Label(name string) (string, error) { s.effects.Add(1); return "label-" + name, nil }

// shapesWorkflow calls every activity of prefix "Shop" by name, as a
// workflow calls a struct's methods, twice each: the second call is
// another operation (another activity ID), so it acts too.
func shapesWorkflow(ctx workflow.Context) ([]any, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var (
		count, sum int
		label      string
	)
	for _, call := range []struct {
		name string
		args []any
		out  any
	}{
		{"ShopPing", nil, nil}, {"ShopNotify", []any{"ann"}, nil}, {"ShopCount", nil, &count},
		{"ShopAdd", []any{2, 3}, &sum}, {"ShopLabel", []any{"x"}, &label},
	} {
		if err := workflow.ExecuteActivity(ctx, call.name, call.args...).Get(ctx, call.out); err != nil {
			return nil, err
		}
	}
	return []any{count, sum, label}, nil
}

// TestRegisterTakesEveryShapeTheSDKAccepts: a struct's methods,
// registered together with a name prefix as the SDK's
// RegisterActivityWithOptions does, each through onceflow: no argument,
// several, none but a context, none at all, error only, and a Method
// option for one of them. Each runs once, and the catalog knows its code
// and result type (none for an error-only one).
func TestRegisterTakesEveryShapeTheSDKAccepts(t *testing.T) {
	t.Parallel()
	env := quietSuite()
	once := onceflowtest.Attach(t, env)
	s := &shop{}
	onceactivity.Register(env, once.Activities, s, onceactivity.Name("Shop"),
		onceactivity.Method("Add", onceactivity.Code("adder")))
	env.RegisterWorkflow(shapesWorkflow)
	env.ExecuteWorkflow(shapesWorkflow)
	var out []any
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0] != float64(3) || out[1] != float64(5) || out[2] != "label-x" || s.effects.Load() != 5 {
		t.Fatalf("results %v after %d effects; want [3 5 label-x] after 5", out, s.effects.Load())
	}
	for name, want := range map[string]handshake.Activity{
		"ShopPing":   {Code: "shop-ping", NoResult: true},
		"ShopNotify": {Code: "shop-notify", NoResult: true},
		"ShopCount":  {Code: "shop-count", ResultType: "int"},
		"ShopAdd":    {Code: "adder", ResultType: "int"},
		"ShopLabel":  {Code: "shop-label", ResultType: "string"},
	} {
		got, ok := once.Activities.WrappedActivity(name)
		if !ok || got.Code != want.Code || got.ResultType != want.ResultType || got.NoResult != want.NoResult {
			t.Errorf("%s: %+v; want code %s, result type %q, no result %v", name, got, want.Code, want.ResultType, want.NoResult)
		}
	}
}

// TestRegisterRefusesWhatTheSDKWouldNot: what is no activity, and options
// that do not fit the activity's types, are refused at registration.
func TestRegisterRefusesWhatTheSDKWouldNot(t *testing.T) {
	t.Parallel()
	once := onceflowtest.New(t)
	for name, a := range map[string]struct {
		activity any
		opts     []onceactivity.Option
	}{
		"no error result":             {activity: func(context.Context) int { return 0 }},
		"not a function":              {activity: 42},
		"a key on two arguments":      {activity: (&shop{}).Add, opts: []onceactivity.Option{onceactivity.BusinessKey(func(int) string { return "" })}},
		"Method on a function":        {activity: (&shop{}).Ping, opts: []onceactivity.Option{onceactivity.Method("Ping")}},
		"Method naming no method":     {activity: &shop{}, opts: []onceactivity.Option{onceactivity.Method("Pong")}},
		"a name with no code in it":   {activity: (&shop{}).Ping, opts: []onceactivity.Option{onceactivity.Name("日本")}},
		"a reconcile of another type": {activity: (&shop{}).Label, opts: []onceactivity.Option{onceactivity.Reconcile(func(context.Context, int, onceflow.Record) (string, bool, error) { return "", false, nil })}},
	} {
		if err := registerErr(quietSuite(), once.Activities, a.activity, a.opts...); err == nil {
			t.Errorf("%s: registered", name)
		}
	}
}

// localWorkflow runs a wrapped activity as a local activity.
func localWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	var s *shop
	return workflow.ExecuteLocalActivity(ctx, s.Ping).Get(ctx, nil)
}

// TestALocalActivityIsRefused: a local activity has no heartbeat to renew
// its lease or carry its checkpoint: the interceptor refuses a wrapped
// one before it runs, and, on a worker without it, the wrapper refuses
// to run as one. Neither acts.
func TestALocalActivityIsRefused(t *testing.T) {
	t.Parallel()
	for _, interceptors := range []bool{true, false} {
		env := quietSuite()
		once := onceflowtest.New(t)
		if interceptors {
			env.SetWorkerOptions(sdkworker.Options{Interceptors: once.Interceptors()})
		}
		s := &shop{}
		onceactivity.Register(env, once.Activities, s.Ping)
		env.RegisterWorkflow(localWorkflow)
		env.ExecuteWorkflow(localWorkflow)
		var ae *temporal.ApplicationError
		if err := env.GetWorkflowError(); !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeMisconfigured.TemporalType() || s.effects.Load() != 0 {
			t.Fatalf("interceptors %v: err %v after %d effects; want %s, nothing done", interceptors, err, s.effects.Load(), onceflow.OutcomeMisconfigured.TemporalType())
		}
	}
}
