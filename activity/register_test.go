package activity_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/onceflowtest"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// Transfer is the input of the test's bank activities.
type Transfer struct {
	Account   string
	Amount    int
	Reference string
}

// BankDownError is a plain Go error type: Temporal reports it as
// "BankDownError", retryable.
type BankDownError struct{}

func (*BankDownError) Error() string { return "bank is down" }

// tellers are the test's bank activities, as methods.
type tellers struct {
	mu    sync.Mutex
	calls int
	// down: the first calls fail with NoEffect(&BankDownError{}).
	down int
	// keys are the keys the downstream was called with.
	keys []string
}

func (b *tellers) Withdraw(ctx context.Context, in Transfer) (string, error) {
	return onceactivity.AskFirst(ctx,
		func(ctx context.Context, key string) (string, bool, error) { return "", false, nil },
		func(ctx context.Context, key string) (string, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.calls++
			b.keys = append(b.keys, key)
			if b.calls <= b.down {
				return "", onceactivity.NoEffect(&BankDownError{})
			}
			return "W-" + key, nil
		})
}

func withdrawWorkflow(ctx workflow.Context, in Transfer) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3}})
	var b *tellers
	var out string
	err := workflow.ExecuteActivity(ctx, b.Withdraw, in).Get(ctx, &out)
	return out, err
}

func quietSuite() *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return suite.NewTestWorkflowEnvironment()
}

// TestRegisterNamesTheActivityAsTheSDKDoes: a method value is registered
// under the method's name, which is what the workflow's
// ExecuteActivity(ctx, b.Withdraw, in) calls; its result type, code and
// default heartbeat are known to the workflow side.
func TestRegisterNamesTheActivityAsTheSDKDoes(t *testing.T) {
	t.Parallel()
	env := quietSuite()
	once := onceflowtest.Attach(t, env)
	b := &tellers{}
	onceactivity.Register(env, once.Activities, b.Withdraw, onceactivity.Heartbeat(5*time.Second))
	a, ok := once.Activities.WrappedActivity("Withdraw")
	if !ok || a.Code != "withdraw" || a.HeartbeatTimeout != 5*time.Second || a.ResultType != "string" {
		t.Fatalf("WrappedActivity(Withdraw) = %+v, %v", a, ok)
	}
	env.RegisterWorkflow(withdrawWorkflow)
	env.ExecuteWorkflow(withdrawWorkflow, Transfer{Account: "a", Amount: 1, Reference: "t-1"})
	var out string
	if err := env.GetWorkflowResult(&out); err != nil || !strings.HasPrefix(out, "W-") {
		t.Fatalf("out %q, err %v", out, err)
	}
}

// registerErr is Register's panic as an error (nil when it registered).
func registerErr(r onceactivity.Registry, w *onceactivity.Wrapper, a any, opts ...onceactivity.Option) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if err, _ = p.(error); err == nil {
				err = fmt.Errorf("%v", p)
			}
		}
	}()
	onceactivity.Register(r, w, a, opts...)
	return nil
}

// TestRegisterChecksItsOptions: what would fail at the first execution
// fails at registration, saying what to fix, and Register panics, as the
// SDK's RegisterActivity does.
func TestRegisterChecksItsOptions(t *testing.T) {
	t.Parallel()
	once := onceflowtest.New(t)
	b := &tellers{}
	for _, c := range []struct {
		name string
		reg  func(onceactivity.Registry) error
		want string
	}{
		{"bad code", func(r onceactivity.Registry) error {
			return registerErr(r, once.Activities, b.Withdraw, onceactivity.Code("Withdraw Money"))
		}, "OperationCode"},
		{"key of another type", func(r onceactivity.Registry) error {
			return registerErr(r, once.Activities, b.Withdraw, onceactivity.BusinessKey(func(s string) string { return s }))
		}, "BusinessKey's function is func(string) string, but the activity needs func(activity_test.Transfer) string"},
		{"short heartbeat", func(r onceactivity.Registry) error {
			return registerErr(r, once.Activities, b.Withdraw, onceactivity.Heartbeat(time.Millisecond))
		}, "under a second"},
		{"function literal", func(r onceactivity.Registry) error {
			return registerErr(r, once.Activities, func(context.Context, Transfer) (string, error) { return "", nil })
		}, "give it one with Name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.reg(quietSuite())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one that says %q", err, c.want)
			}
		})
	}
	env := quietSuite()
	onceactivity.Register(env, once.Activities, b.Withdraw)
	if err := registerErr(env, once.Activities, b.Withdraw); err == nil || !strings.Contains(err.Error(), "registered already") {
		t.Fatalf("a second Withdraw: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Register did not panic on a bad code")
		}
	}()
	onceactivity.Register(quietSuite(), once.Activities, b.Withdraw, onceactivity.Code("Withdraw Money"), onceactivity.Name("Other"))
}

// TestNoEffectKeepsTheErrorForTemporal: an error marked NoEffect reaches
// Temporal as the activity's own (a plain Go type keeps its name, and its
// retryability), so the retry policy retries it, and the retry runs the
// action again, since nothing happened.
func TestNoEffectKeepsTheErrorForTemporal(t *testing.T) {
	t.Parallel()
	for _, down := range []int{1, 3} {
		t.Run(fmt.Sprint("down ", down), func(t *testing.T) {
			t.Parallel()
			env := quietSuite()
			once := onceflowtest.Attach(t, env)
			b := &tellers{down: down}
			onceactivity.Register(env, once.Activities, b.Withdraw)
			env.RegisterWorkflow(withdrawWorkflow)
			env.ExecuteWorkflow(withdrawWorkflow, Transfer{Account: "a", Amount: 1, Reference: "t-1"})
			if down == 1 {
				var out string
				if err := env.GetWorkflowResult(&out); err != nil || b.calls != 2 {
					t.Fatalf("out %q, err %v after %d calls; want the second call's result", out, err, b.calls)
				}
				return
			}
			var ae *temporal.ApplicationError
			if err := env.GetWorkflowError(); !errors.As(err, &ae) || ae.Type() != "BankDownError" || ae.NonRetryable() || b.calls != 3 {
				t.Fatalf("err %v after %d calls; want the bank's retryable BankDownError after 3", err, b.calls)
			}
		})
	}
}

// TestDownstreamKeyIsTheBusinessReference: with DownstreamKey, AskFirst
// calls the downstream with the transfer's reference, not onceflow's
// operation key, and an unknown effect's details carry it.
func TestDownstreamKeyIsTheBusinessReference(t *testing.T) {
	t.Parallel()
	env := quietSuite()
	once := onceflowtest.Attach(t, env)
	b := &tellers{}
	onceactivity.Register(env, once.Activities, b.Withdraw,
		onceactivity.DownstreamKey(func(in Transfer) string { return in.Reference }))
	env.RegisterWorkflow(withdrawWorkflow)
	env.ExecuteWorkflow(withdrawWorkflow, Transfer{Account: "a", Amount: 1, Reference: "t-1"})
	var out string
	if err := env.GetWorkflowResult(&out); err != nil || out != "W-t-1" || len(b.keys) != 1 || b.keys[0] != "t-1" {
		t.Fatalf("out %q, err %v, keys %v; want the downstream called once with t-1", out, err, b.keys)
	}

	// An unknown effect names the reference for the operator.
	env = quietSuite()
	once = onceflowtest.Attach(t, env)
	onceactivity.Register(env, once.Activities, func(ctx context.Context, in Transfer) (string, error) {
		return "", errors.New("read tcp: i/o timeout")
	}, onceactivity.Name("Withdraw"), onceactivity.DownstreamKey(func(in Transfer) string { return in.Reference }))
	env.RegisterWorkflow(withdrawWorkflow)
	var pending []idemwf.PendingRecovery
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(idemwf.PendingQuery)
		if err == nil {
			_ = v.Get(&pending)
		}
		env.CancelWorkflow()
	}, time.Hour)
	env.ExecuteWorkflow(withdrawWorkflow, Transfer{Account: "a", Amount: 1, Reference: "t-2"})
	if len(pending) != 1 || pending[0].Details.DownstreamKey != "t-2" || pending[0].Details.OperationCode != "withdraw" {
		t.Fatalf("pending %+v; want the withdrawal, with downstream key t-2", pending)
	}
}

// The options are checked as the activity is registered; a workflow calls
// it by the function, as before.
func ExampleRegister() {
	env := quietSuite() // or the service's SDK worker: sdkworker.New(c, queue, sdkworker.Options{Interceptors: ...})
	wrapper := exampleWrapper()
	env.SetWorkerOptions(exampleWorkerOptions(wrapper))
	b := &tellers{}
	onceactivity.Register(env, wrapper, b.Withdraw,
		onceactivity.DownstreamKey(func(in Transfer) string { return in.Reference }))
	env.RegisterWorkflow(withdrawWorkflow) // workflow.ExecuteActivity(ctx, b.Withdraw, in)

	env.ExecuteWorkflow(withdrawWorkflow, Transfer{Account: "85-150", Amount: 40, Reference: exampleReference()})
	var out string
	err := env.GetWorkflowResult(&out)
	fmt.Println(strings.HasPrefix(out, "W-transfer-"), err, b.calls)
	// Output: true <nil> 1
}

// A business error keeps its type for Temporal: the workflow's retry
// policy retries the bank's BankDownError, which had no effect, and the
// retry withdraws.
func ExampleNoEffect() {
	env := quietSuite()
	wrapper := exampleWrapper()
	env.SetWorkerOptions(exampleWorkerOptions(wrapper))
	b := &tellers{down: 1} // its Withdraw returns onceactivity.NoEffect(&BankDownError{}) once
	onceactivity.Register(env, wrapper, b.Withdraw)
	env.RegisterWorkflow(withdrawWorkflow)
	env.ExecuteWorkflow(withdrawWorkflow, Transfer{Account: "85-150", Amount: 40, Reference: exampleReference()})
	var out string
	err := env.GetWorkflowResult(&out)
	fmt.Println(b.calls, err)
	// Output: 2 <nil>
}

// exampleWrapper is a Wrapper on the shared test Redis, in a key
// namespace of its own.
func exampleWrapper() *onceactivity.Wrapper {
	client := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true})
	store, err := redisstore.New(redisstore.Config{Client: client, Namespace: "example-" + storetest.RandomHex(6)})
	if err != nil {
		panic(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		panic(err)
	}
	dig, err := onceflow.NewDigester([]byte("a secret from your secret store"), 1)
	if err != nil {
		panic(err)
	}
	w, err := onceactivity.New(onceactivity.Config{Executor: exec, Digester: dig})
	if err != nil {
		panic(err)
	}
	return w
}

// exampleWorkerOptions installs the workflow side's interceptor, as
// worker.Attached.Interceptors does.
func exampleWorkerOptions(w *onceactivity.Wrapper) sdkworker.Options {
	return sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{idemwf.NewInterceptor(idemwf.InterceptorOptions{Activities: w})}}
}

func exampleReference() string { return "transfer-" + storetest.RandomHex(4) }
