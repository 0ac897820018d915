package e2e_test

// End-to-end tests against a real Temporal server (the dev server,
// cmd/internal/devtemporal, run as a process of its own by package
// temporalproc and shared by every test: TestMain) and a real
// redis-server; TestDevMode runs the development build of cmd/worker.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/cmd/temporalproc"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/worker"
)

// The child process (a worker killed with SIGKILL) is this test binary,
// started again with these variables set.
const (
	envChild     = "ONCEFLOW_E2E_CHILD"
	envTemporal  = "ONCEFLOW_E2E_TEMPORAL"
	envNamespace = "ONCEFLOW_E2E_NAMESPACE"
	envQueue     = "ONCEFLOW_E2E_QUEUE"
	envRedis     = "ONCEFLOW_E2E_REDIS"
	envKeys      = "ONCEFLOW_E2E_KEYS"
	envLease     = "ONCEFLOW_E2E_LEASE"
	envStop      = "ONCEFLOW_E2E_STOP_TIMEOUT"
)

// temporalServer is the dev Temporal server these tests share, a process
// of its own (package temporalproc), so this race-instrumented binary does
// not link the server.
var temporalServer *temporalproc.Server

// e2eSecret is the workers' secret in these tests.
const e2eSecret = "e2e secret e2e secret e2e secret"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	// These tests mostly wait (on Temporal, leases, child processes), so
	// more of them run at once than the default -parallel (GOMAXPROCS,
	// 2 here) unless -parallel is given: the package takes half the time.
	flag.Parse()
	if !parallelGiven() {
		_ = flag.Set("test.parallel", strconv.Itoa(max(6, runtime.GOMAXPROCS(0))))
	}
	os.Exit(redistest.With(func() int {
		var err error
		if temporalServer, err = temporalproc.Start(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer temporalServer.Stop()
		return m.Run()
	}))
}

// parallelGiven: -test.parallel is on the command line.
func parallelGiven() bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	return given
}

// harness is one test's world: its own task queue and key namespace.
type harness struct {
	t     *testing.T
	queue string
	keys  string
	lease time.Duration
	// redis is the address of the Redis the workers use.
	redis string
	// configure, when set, adjusts each worker's configuration.
	configure func(*worker.Config)
	rdb       *redis.Client
	tc        client.Client
}

func newHarness(t *testing.T, lease time.Duration) *harness {
	t.Helper()
	h := &harness{
		t: t, queue: "q-" + storetest.RandomHex(6), keys: redistest.Namespace(t), lease: lease,
		rdb: redistest.Client(t), redis: redistest.Addr(t),
	}
	// Not temporalServer.NewClientWithOptions: it is not safe for
	// concurrent use, and these tests run in parallel.
	tc, err := client.Dial(client.Options{
		HostPort: temporalServer.Address(), Namespace: temporalServer.Namespace(), Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	h.tc = tc
	return h
}

// quietLogger keeps the SDK's client logs out of the test output.
func quietLogger() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

func workerConfig(temporalAddr, namespace, queue, redisAddr, keys string, lease time.Duration) worker.Config {
	return worker.Config{
		TemporalAddress: temporalAddr, Namespace: namespace, TaskQueue: queue,
		RedisURL: "redis://" + redisAddr + "/0", KeyNamespace: keys,
		Secret: []byte(e2eSecret), Lease: lease, HTTPAddr: "127.0.0.1:0", StopTimeout: 2 * time.Second,
		RedisCommandTimeout: min(redisstore.DefaultCommandTimeout, lease/8),
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// startWorker runs an in-process worker until the test ends.
func (h *harness) startWorker(register func(worker.Registry) error) *worker.Worker {
	h.t.Helper()
	w, _ := h.startStoppableWorker(register)
	return w
}

// startStoppableWorker runs an in-process worker until stop is called or
// the test ends.
func (h *harness) startStoppableWorker(register func(worker.Registry) error) (w *worker.Worker, stop func()) {
	h.t.Helper()
	cfg := workerConfig(temporalServer.Address(), temporalServer.Namespace(), h.queue, h.redis, h.keys, h.lease)
	cfg.Register = register
	if h.configure != nil {
		h.configure(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() { runErr = w.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if runErr != nil {
				h.t.Errorf("worker.Run: %v", runErr)
			}
		})
	}
	h.t.Cleanup(stop)
	select {
	case <-w.Started():
	case <-done:
		h.t.Fatalf("worker.Run returned before it started")
	case <-time.After(30 * time.Second):
		h.t.Fatal("worker did not start")
	}
	return w, stop
}

func (h *harness) start(wf any, id string, args ...any) client.WorkflowRun {
	h.t.Helper()
	run, err := h.tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: h.queue}, wf, args...)
	if err != nil {
		h.t.Fatal(err)
	}
	return run
}

// waitFor polls cond (an outside event this test cannot be signalled of)
// until it holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) get(key string) string {
	v, err := h.rdb.Get(context.Background(), h.keys+":"+key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		h.t.Fatal(err)
	}
	return v
}

func (h *harness) counter(key string) int {
	n, _ := strconv.Atoi(h.get(key))
	return n
}

// The effect activity: counts its effects in Redis (so a killed child
// process's effect is seen), marks it under the operation key for the
// reconcile hook, then behaves as In.Mode says.
type effectIn struct {
	Key  string
	Mode string // "return", "block" (until cancelled), "retry-once", "sleep:<duration>"
	// Linger is how long a cancelled "sleep:" action takes to stop.
	Linger time.Duration
}

type effectOut struct {
	Value string
	Fence string
}

func registerEffect(r worker.Registry, rdb redis.UniversalClient, keys string) error {
	k := func(s string) string { return keys + ":" + s }
	fn := func(ctx context.Context, in effectIn) (effectOut, error) {
		info := sdkactivity.GetInfo(ctx)
		if in.Mode == "retry-once" && info.Attempt == 1 {
			rdb.Set(ctx, k("attempt1-done"), time.Now().UnixMilli(), 0)
			return effectOut{}, idemstore.RetryableNoEffect(errors.New("declined before charging"))
		}
		rdb.Set(ctx, k("attempt-started"), time.Now().UnixMilli(), 0)
		rdb.Incr(ctx, k("effects"))
		value := fmt.Sprintf("effect of attempt %d", info.Attempt)
		rdb.Set(ctx, k("effect:"+onceactivity.OperationKey(ctx)), value, 0)
		rdb.Set(ctx, k("entered"), "1", 0)
		fence, _ := onceactivity.Fence(ctx)
		switch {
		case in.Mode == "block":
			<-ctx.Done()
			rdb.Set(context.Background(), k("cancelled"), context.Cause(ctx).Error(), 0)
			return effectOut{}, idemstore.RetryableNoEffect(ctx.Err())
		case strings.HasPrefix(in.Mode, "sleep:"):
			d, _ := time.ParseDuration(strings.TrimPrefix(in.Mode, "sleep:"))
			select {
			case <-time.After(d):
			case <-ctx.Done():
				time.Sleep(in.Linger) // finishing what it was doing
				return effectOut{}, context.Cause(ctx)
			}
		}
		return effectOut{Value: value, Fence: fence.String()}, nil
	}
	reconcile := func(ctx context.Context, _ effectIn, _ onceflow.Record) (effectOut, bool, error) {
		v, err := rdb.Get(ctx, k("effect:"+onceactivity.OperationKey(ctx))).Result()
		if errors.Is(err, redis.Nil) {
			return effectOut{}, false, nil
		}
		return effectOut{Value: "reconciled: " + v}, err == nil, err
	}
	key := onceactivity.BusinessKey(func(in effectIn) string { return in.Key })
	r.Worker.RegisterWorkflow(effectWorkflow)
	onceactivity.Register(r.Worker, r.Activities, fn, onceactivity.Name("effect"), onceactivity.Code("effect"), key, onceactivity.Reconcile(reconcile))
	onceactivity.Register(r.Worker, r.Activities, fn, onceactivity.Name("effect-blind"), onceactivity.Code("effect-blind"), key)
	return nil
}

func effectWorkflow(ctx workflow.Context, activityName string, in effectIn, heartbeat time.Duration) (effectOut, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    heartbeat,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 20,
		},
	})
	var out effectOut
	err := workflow.ExecuteActivity(ctx, activityName, in).Get(ctx, &out)
	return out, err
}

// runChild is the worker process that the SIGKILL and SIGTERM tests
// stop: it runs until killed, or until SIGTERM stops it in order.
func runChild() int {
	if os.Getenv(envChild) == "order" {
		return runOrderChild()
	}
	if os.Getenv(envChild) == "transfer" {
		return runTransferChild()
	}
	if c := os.Getenv(envChild); c == "saga" || c == "two-attempts" {
		return runSagaChild()
	}
	lease, _ := time.ParseDuration(os.Getenv(envLease))
	cfg := workerConfig(os.Getenv(envTemporal), os.Getenv(envNamespace), os.Getenv(envQueue), os.Getenv(envRedis), os.Getenv(envKeys), lease)
	cfg.HTTPAddr = "off"
	if d, err := time.ParseDuration(os.Getenv(envStop)); err == nil {
		cfg.StopTimeout = d
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	cfg.Register = func(r worker.Registry) error { return registerEffect(r, rdb, os.Getenv(envKeys)) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return runChildWorker(ctx, cfg, "child worker")
}

// runChildWorker runs a child process's worker until ctx is done (SIGTERM)
// and returns the process's exit status.
func runChildWorker(ctx context.Context, cfg worker.Config, name string) int {
	w, err := worker.New(cfg)
	if err == nil {
		err = w.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	return 0
}

// activityAttempt reads the attempt of the workflow's activity from its
// history: how many attempts it took.
func (h *harness) activityAttempt(run client.WorkflowRun) int32 {
	h.t.Helper()
	it := h.tc.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var attempt int32
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			h.t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			attempt = a.GetAttempt()
		}
	}
	return attempt
}

func TestHappyPathRunsOnceAndReplaysAcrossWorkflows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 0)
	provider := order.NewProvider()
	w := h.startWorker(func(r worker.Registry) error { return order.RegisterCharge(r, provider) })
	c := order.Charge{OrderID: "order-" + storetest.RandomHex(4), Customer: "c-7", AmountCents: 1000}
	var receipts [2]order.Receipt
	for i := range receipts {
		run := h.start(order.ChargeOrder, fmt.Sprintf("place-%s-%d", c.OrderID, i), c)
		if err := run.Get(context.Background(), &receipts[i]); err != nil {
			t.Fatal(err)
		}
	}
	if receipts[0] != receipts[1] || receipts[0].ProviderKey == "" || provider.Charges() != 1 {
		t.Fatalf("receipts %+v, %d charges; want one charge replayed to the second workflow", receipts, provider.Charges())
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		resp, err := http.Get("http://" + w.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != want {
			t.Fatalf("GET %s = %d %q", path, resp.StatusCode, body)
		}
	}
}

func TestRetryableNoEffectIsTakenOverAtOnce(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second // a takeover that waited for it would time the test out
	h := newHarness(t, lease)
	h.startWorker(func(r worker.Registry) error { return registerEffect(r, h.rdb, h.keys) })
	run := h.start(effectWorkflow, "retry-"+h.keys, "effect", effectIn{Key: h.keys + "/retry", Mode: "retry-once"}, 10*time.Second)
	var out effectOut
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	failed, _ := strconv.ParseInt(h.get("attempt1-done"), 10, 64)
	started, _ := strconv.ParseInt(h.get("attempt-started"), 10, 64)
	if gap := time.Duration(started-failed) * time.Millisecond; gap >= lease/2 {
		t.Fatalf("attempt 2 started %v after attempt 1 failed: it waited for the lease", gap)
	}
	if out.Value != "effect of attempt 2" || !strings.HasPrefix(out.Fence, "2.3@") || h.counter("effects") != 1 || h.activityAttempt(run) != 2 {
		t.Fatalf("out %+v, %d effects, attempt %d", out, h.counter("effects"), h.activityAttempt(run))
	}
}

// TestKilledWorkerIsTakenOver kills a worker process with SIGKILL in the
// middle of the action. The next attempt waits for the lease (in-progress
// errors with NextRetryDelay), then takes over the expired EXECUTING record:
// with a reconcile hook the effect is found and not repeated; without one
// the workflow gets onceflow.EffectUnknown. The effect happens once.
//
// With lost=true Redis also loses the killed attempt's record before the
// next attempt claims: the claim finds nothing, and the killed attempt's
// checkpoint (confirmed by Temporal before the action) makes it uncertain
// all the same: reconciled with the hook, EffectUnknown without it, never
// a second run.
func TestKilledWorkerIsTakenOver(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ withReconcile, lost bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		withReconcile, lost := c.withReconcile, c.lost
		t.Run(fmt.Sprintf("reconcile=%v/lost=%v", withReconcile, lost), func(t *testing.T) {
			t.Parallel()
			// The lease must outlast Temporal's detection of the dead
			// worker (heartbeat timeout 1s) so that attempt 2 finds it live.
			const lease = 8 * time.Second
			h := newHarness(t, lease)
			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), envChild+"=1",
				envTemporal+"="+temporalServer.Address(), envNamespace+"="+temporalServer.Namespace(),
				envQueue+"="+h.queue, envRedis+"="+redistest.Addr(t), envKeys+"="+h.keys, envLease+"="+lease.String())
			child.Stderr = os.Stderr
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

			name := "effect"
			if !withReconcile {
				name = "effect-blind"
			}
			run := h.start(effectWorkflow, "kill-"+h.keys, name, effectIn{Key: h.keys + "/kill", Mode: "block"}, time.Second)
			h.waitFor("the child to enter the action", func() bool { return h.get("entered") == "1" })
			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			if lost {
				// Redis forgets the record (and only it: the test's
				// counters and the reconcile's marks stay).
				keys, err := h.rdb.Keys(context.Background(), h.keys+":idem:*").Result()
				if err != nil || len(keys) != 1 {
					t.Fatalf("records %v, %v; want the killed attempt's", keys, err)
				}
				if err := h.rdb.Del(context.Background(), keys...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			h.startWorker(func(r worker.Registry) error { return registerEffect(r, h.rdb, h.keys) })

			// A second run of the (blocking) action would never end: fail
			// as soon as it starts instead of waiting for the timeout.
			var out effectOut
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan error, 1)
			go func() { got <- run.Get(ctx, &out) }()
			var err error
			for waiting := true; waiting; {
				select {
				case err = <-got:
					waiting = false
				case <-time.After(20 * time.Millisecond):
					if n := h.counter("effects"); n > 1 {
						t.Fatalf("the effect happened %d times", n)
					}
				}
			}
			if n := h.counter("effects"); n != 1 {
				t.Fatalf("the effect happened %d times", n)
			}
			// Attempt 2 found the dead attempt's lease live and waited
			// inside the activity (the default for business-scoped
			// activities) until it ran out.
			if attempt := h.activityAttempt(run); attempt < 2 {
				t.Fatalf("took over at attempt %d; want a later attempt, after the kill", attempt)
			}
			if withReconcile {
				if err != nil || out.Value != "reconciled: effect of attempt 1" {
					t.Fatalf("out %+v, err %v; want the reconciled effect", out, err)
				}
				return
			}
			var ae *temporal.ApplicationError
			if !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeEffectUnknown.TemporalType() {
				t.Fatalf("err = %v, want %s", err, onceflow.OutcomeEffectUnknown.TemporalType())
			}
			var d onceflow.EffectUnknownDetails
			if err := ae.Details(&d); err != nil || d.State != "ABANDONED" || d.Checkpoint == nil || d.Checkpoint.Phase != onceflow.PhaseExecuting {
				t.Fatalf("details %+v (%v); want ABANDONED with the killed attempt's checkpoint", d, err)
			}
			if lost && !strings.Contains(d.Reason, "no record") {
				t.Fatalf("reason %q; want it to say the store had no record", d.Reason)
			}
		})
	}
}

// TestLongActivityKeepsOwnershipThroughHeartbeats: an activity running 3×
// its lease keeps ownership; a duplicate workflow with the same key finds
// it in progress throughout, waits, and then gets the replay.
func TestLongActivityKeepsOwnershipThroughHeartbeats(t *testing.T) {
	t.Parallel()
	// 2 s, not less: the renewal must be confirmed within the lease less
	// its 250 ms margin while the suite loads both cores.
	const lease = 2 * time.Second
	h := newHarness(t, lease)
	h.startWorker(func(r worker.Registry) error { return registerEffect(r, h.rdb, h.keys) })
	in := effectIn{Key: h.keys + "/long", Mode: "sleep:" + (3 * lease).String()}
	// Temporal's heartbeat timeout is not what this test is about (the
	// lease's renewal is): 3 s, so that a heartbeat late by a second on a
	// machine that compiles beside the test does not time the activity
	// out (a cold CI run did, at 1 s). The renewal still ticks every
	// lease/3.
	const heartbeat = lease + time.Second
	first := h.start(effectWorkflow, "long-1-"+h.keys, "effect", in, heartbeat)
	h.waitFor("the first activity to start", func() bool { return h.get("entered") == "1" })
	second := h.start(effectWorkflow, "long-2-"+h.keys, "effect", in, heartbeat)
	var a, b effectOut
	if err := first.Get(context.Background(), &a); err != nil {
		t.Fatal(err)
	}
	if err := second.Get(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if a != b || h.counter("effects") != 1 {
		t.Fatalf("first %+v, second %+v, %d effects; want one effect replayed", a, b, h.counter("effects"))
	}
	if h.activityAttempt(first) != 1 {
		t.Fatalf("the long activity needed %d attempts: it lost its lease", h.activityAttempt(first))
	}
	// The duplicate found it in progress the whole time and waited inside
	// its first attempt (business-scoped activities wait by default).
	if n := h.activityAttempt(second); n != 1 {
		t.Fatalf("the duplicate took %d attempts; want it to wait in its first", n)
	}
}

func TestCancellingTheWorkflowCancelsTheAction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 0)
	h.startWorker(func(r worker.Registry) error { return registerEffect(r, h.rdb, h.keys) })
	run := h.start(effectWorkflow, "cancel-"+h.keys, "effect", effectIn{Key: h.keys + "/cancel", Mode: "block"}, time.Second)
	h.waitFor("the activity to start", func() bool { return h.get("entered") == "1" })
	if err := h.tc.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()); err != nil {
		t.Fatal(err)
	}
	err := run.Get(context.Background(), nil)
	var ce *temporal.CanceledError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want canceled", err)
	}
	h.waitFor("the action's context to be cancelled", func() bool { return h.get("cancelled") != "" })
}
