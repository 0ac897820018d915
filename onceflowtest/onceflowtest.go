package onceflowtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/workflow"
)

// Secret is the secret of the test Wrapper: public, for tests only.
const Secret = "onceflowtest secret, for tests only, never production"

// Options configure New. The zero value is what most tests want.
type Options struct {
	// Lease is the executor's lease. Default idemstore's (30 s). A test
	// that crashes an attempt (Crash) waits out this lease, in real time,
	// before the next attempt takes over: give it a few seconds.
	Lease time.Duration
	// CommandTimeout bounds each call to the in-memory Redis. Default 2 s,
	// or a sixth of Lease when Lease is set (the executor's safety margin
	// is twice it, and at most a third of the lease).
	CommandTimeout time.Duration
	// Logger receives onceflow's lines. Default: discard.
	Logger *slog.Logger
}

// Once is onceflow on an in-memory Redis, for one test.
type Once struct {
	// Activities wraps and registers activities (activity.Register).
	Activities *activity.Wrapper
	// Executor and Store are the wrapper's, for a test that looks at the
	// records.
	Executor *idemstore.Executor
	Store    *redisstore.Store
	// Redis is the in-memory Redis; Redis.FastForward moves its clock
	// (leases, retention) on.
	Redis *miniredis.Miniredis

	interceptor *workflow.Interceptor
	crasher     *crasher
}

// New starts an in-memory Redis and builds onceflow on it; both go away
// when the test ends. It fails the test if it cannot.
func New(tb testing.TB, opts ...Options) *Once {
	tb.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CommandTimeout == 0 {
		o.CommandTimeout = 2 * time.Second
		if o.Lease > 0 {
			o.CommandTimeout = min(o.CommandTimeout, o.Lease/6)
		}
	}
	mr := miniredis.RunT(tb)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { _ = rdb.Close() })
	// miniredis runs the scripts in Go, slowly under -race: a test is
	// about what happens, not how fast.
	store, err := redisstore.New(redisstore.Config{Client: rdb, OmitShebang: true, CommandTimeout: o.CommandTimeout, Logger: o.Logger})
	if err != nil {
		tb.Fatalf("onceflowtest: %v", err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: o.Lease, Logger: o.Logger})
	if err != nil {
		tb.Fatalf("onceflowtest: %v", err)
	}
	dig, err := onceflow.NewDigester([]byte(Secret), 1)
	if err != nil {
		tb.Fatalf("onceflowtest: %v", err)
	}
	wrapper, err := activity.New(activity.Config{Executor: exec, Digester: dig, Logger: o.Logger})
	if err != nil {
		tb.Fatalf("onceflowtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = wrapper.Wait(ctx)
		_ = exec.Drain(ctx)
	})
	release := make(chan struct{})
	tb.Cleanup(func() { close(release) }) // runs first: the crashed attempts end before Wait
	return &Once{Activities: wrapper, Executor: exec, Store: store, Redis: mr,
		interceptor: workflow.NewInterceptor(workflow.InterceptorOptions{Activities: wrapper}),
		crasher:     &crasher{release: release}}
}

// Interceptors are the worker interceptors worker.Attached.Interceptors
// returns in production: the recovery of the workflows, and the registered
// activities' heartbeat timeout.
//
// They also let an activity Crash: a test's stand-in for a worker that dies.
func (o *Once) Interceptors() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{o.interceptor, o.crasher}
}

// Attach is New, with the interceptors installed on env (its worker
// options: any set before are replaced).
func Attach(tb testing.TB, env *testsuite.TestWorkflowEnvironment, opts ...Options) *Once {
	tb.Helper()
	o := New(tb, opts...)
	env.SetWorkerOptions(sdkworker.Options{Interceptors: o.Interceptors()})
	return o
}
