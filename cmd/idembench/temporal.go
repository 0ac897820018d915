package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/cmd/temporalproc"
	"github.com/onceflow/onceflow/idemstore"
	onceworkflow "github.com/onceflow/onceflow/workflow"
)

// temporalCost compares the idempotent activity with the bare one.
type temporalCost struct {
	workflows, perWorkflow int
	bare, wrapped          float64 // activities per second, medians
	// ratios are the rounds' wrapped ÷ bare, each of two rounds run one
	// after the other, sorted.
	ratios []float64
	// per is, by activity ("bare", "wrapped"), what one activity cost
	// over the measured rounds.
	per map[string]*activityCost
}

// ratio is the median of the rounds' ratios.
func (tc temporalCost) ratio() float64 { return tc.ratios[len(tc.ratios)/2] }

// activityCost is what the measured rounds of one activity spent, per
// activity: the worker's Temporal RPCs by method, Redis commands by name,
// and this process' CPU (the worker and the client; the Temporal server
// and redis-server are processes of their own).
type activityCost struct {
	rpcs     map[string]float64
	redis    map[string]float64
	clientUs float64
	// childUs is the CPU of this process' children, by command name: the
	// Temporal server ("worker") and redis-server.
	childUs map[string]float64
	n       float64 // activities counted
}

// childrenCPU is the CPU time so far of each running child of this
// process, user and system, summed by command name (/proc/PID/stat).
func childrenCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	dirs, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, d := range dirs {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: fields 14 and 15.
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		out[string(stat[open+1:end])] += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return out
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux.
const clockTicks = 100

// rpcCounter counts the RPCs a Temporal client sends, by method, from
// the SDK's request metrics (temporal_request and, for long polls,
// temporal_long_request, tagged with the operation): it is the client's
// MetricsHandler.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
	// op is the operation tag of a handler WithTags made; "" for the root.
	op string
	// root is the handler whose n counts, for the handlers WithTags made.
	root *rpcCounter
}

var _ client.MetricsHandler = (*rpcCounter)(nil)

// WithTags implements client.MetricsHandler.
func (c *rpcCounter) WithTags(tags map[string]string) client.MetricsHandler {
	op, ok := tags["operation"]
	if !ok {
		return c
	}
	root := c.root
	if root == nil {
		root = c
	}
	return &rpcCounter{op: op, root: root}
}

// Counter implements client.MetricsHandler: the request counters count.
func (c *rpcCounter) Counter(name string) client.MetricsCounter {
	switch {
	case c.root == nil || c.op == "":
	case name == "temporal_request":
		return countFunc(func(n int64) { c.root.add(c.op, n) })
	case name == "temporal_long_request":
		return countFunc(func(n int64) { c.root.add(c.op+" (long poll)", n) })
	}
	return client.MetricsNopHandler.Counter(name)
}

// Gauge implements client.MetricsHandler.
func (c *rpcCounter) Gauge(name string) client.MetricsGauge {
	return client.MetricsNopHandler.Gauge(name)
}

// Timer implements client.MetricsHandler.
func (c *rpcCounter) Timer(name string) client.MetricsTimer {
	return client.MetricsNopHandler.Timer(name)
}

func (c *rpcCounter) add(op string, n int64) {
	c.mu.Lock()
	c.n[op] += int(n)
	c.mu.Unlock()
}

func (c *rpcCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// countFunc is a client.MetricsCounter.
type countFunc func(int64)

func (f countFunc) Inc(n int64) { f(n) }

type payload struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
	Note   string `json:"note"`
}

func benchWorkflow(ctx workflow.Context, activity string, n int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    10 * time.Second,
	})
	for i := range n {
		var out payload
		in := payload{Order: fmt.Sprintf("o-%d", i), Amount: 1000 + i, Note: "idembench"}
		if err := workflow.ExecuteActivity(ctx, activity, in).Get(ctx, &out); err != nil {
			return err
		}
	}
	return nil
}

// measureTemporal runs the same workflows on the dev Temporal server,
// once with the bare activity and once with it wrapped, reps times each,
// alternating, and reports activities per second.
func (b *bench) measureTemporal(ctx context.Context) (temporalCost, error) {
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	ts, err := temporalproc.Start(ctx)
	if err != nil {
		return temporalCost{}, err
	}
	defer ts.Stop()
	rpcs := &rpcCounter{n: map[string]int{}}
	c, err := client.Dial(client.Options{HostPort: ts.Address(), Namespace: ts.Namespace(), Logger: quiet, MetricsHandler: rpcs})
	if err != nil {
		return temporalCost{}, err
	}
	defer c.Close()
	queues, stop, err := b.temporalWorkers(c)
	if err != nil {
		return temporalCost{}, err
	}
	defer stop()

	t := &temporalRun{b: b, c: c, rpcs: rpcs, queues: queues,
		cost: temporalCost{workflows: b.cfg.temporalWorkflows, perWorkflow: b.cfg.temporalActivities, per: map[string]*activityCost{}}}
	if _, err := t.round(ctx, "bare"); err != nil { // warm up the server and the worker
		return temporalCost{}, err
	}
	var bares, wrappeds []float64
	for rep := range b.cfg.reps {
		for _, a := range []string{"bare", "wrapped"} {
			r, err := t.measured(ctx, a, rep)
			if err != nil {
				return temporalCost{}, err
			}
			if a == "bare" {
				bares = append(bares, r)
			} else {
				wrappeds = append(wrappeds, r)
			}
			progress("Temporal round %d of %d: %-7s %6.1f activities/s", rep+1, b.cfg.reps, a, r)
		}
		t.cost.ratios = append(t.cost.ratios, wrappeds[rep]/bares[rep])
	}
	slices.Sort(t.cost.ratios)
	slices.Sort(bares)
	slices.Sort(wrappeds)
	t.cost.bare, t.cost.wrapped = bares[len(bares)/2], wrappeds[len(wrappeds)/2]
	return t.cost, nil
}

// temporalWorkers starts the workers of the comparison and returns the
// task queues of the bare and the wrapped activity's workflows: one
// worker runs both, unless -temporal-interceptor puts the wrapped one on
// a worker of its own with onceflow's Interceptor, as worker.Attach
// configures one.
func (b *bench) temporalWorkers(c client.Client) (queues map[string]string, stop func(), err error) {
	_, e, err := b.executor(idemstore.ExecutorConfig{})
	if err != nil {
		return nil, nil, err
	}
	wrapper, err := onceactivity.New(onceactivity.Config{Executor: e, Digester: b.digest, Client: c})
	if err != nil {
		return nil, nil, err
	}
	bare := func(_ context.Context, in payload) (payload, error) { return in, nil }
	queues = map[string]string{"bare": "idembench", "wrapped": "idembench"}
	w := sdkworker.New(c, queues["bare"], sdkworker.Options{})
	w.RegisterWorkflow(benchWorkflow)
	w.RegisterActivityWithOptions(bare, sdkactivity.RegisterOptions{Name: "bare"})
	workers := []sdkworker.Worker{w}
	stop = func() {
		for _, w := range workers {
			w.Stop()
		}
	}
	ow := w
	if b.cfg.temporalInterceptor {
		queues["wrapped"] = "idembench-interceptor"
		ow = sdkworker.New(c, queues["wrapped"], sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{
			onceworkflow.NewInterceptor(onceworkflow.InterceptorOptions{Activities: wrapper}),
		}})
		ow.RegisterWorkflow(benchWorkflow)
		workers = append(workers, ow)
	}
	onceactivity.Register(ow, wrapper, bare, onceactivity.Name("wrapped"), onceactivity.Code("bench-activity"))
	for i, w := range workers {
		if err := w.Start(); err != nil {
			for _, started := range workers[:i] {
				started.Stop()
			}
			return nil, nil, err
		}
	}
	return queues, stop, nil
}

// temporalRun is one comparison's client, task queues and costs.
type temporalRun struct {
	b      *bench
	c      client.Client
	rpcs   *rpcCounter
	queues map[string]string
	cost   temporalCost
}

// round runs the workflows of activity once and returns activities per
// second.
func (t *temporalRun) round(ctx context.Context, activity string) (float64, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, t.cost.workflows)
	for i := range t.cost.workflows {
		wg.Go(func() {
			run, err := t.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: t.queues[activity], ID: "bench-" + randomHex(8)},
				benchWorkflow, activity, t.cost.perWorkflow)
			if err == nil {
				err = run.Get(ctx, nil)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("%s workflows: %w", activity, err)
		}
	}
	return float64(t.cost.workflows*t.cost.perWorkflow) / time.Since(start).Seconds(), nil
}

// measured is one measured round, its costs added to cost.per and, with
// -cpuprofile, profiled into a file of its own (go tool pprof merges
// them: go tool pprof cpu.out.wrapped.*).
func (t *temporalRun) measured(ctx context.Context, activity string, rep int) (float64, error) {
	if t.b.cfg.cpuProfile != "" {
		f, err := os.Create(fmt.Sprintf("%s.%s.%d", t.b.cfg.cpuProfile, activity, rep))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, err
		}
		defer pprof.StopCPUProfile()
	}
	rpc0 := t.rpcs.snapshot()
	cmd0, err := commandStats(ctx, t.b.rdb)
	if err != nil {
		return 0, err
	}
	cpu0, err := processCPU()
	if err != nil {
		return 0, err
	}
	child0 := childrenCPU()
	r, err := t.round(ctx, activity)
	if err != nil {
		return 0, err
	}
	cpu1, err := processCPU()
	if err != nil {
		return 0, err
	}
	child1 := childrenCPU()
	cmd1, err := commandStats(ctx, t.b.rdb)
	if err != nil {
		return 0, err
	}
	ac := t.cost.per[activity]
	if ac == nil {
		ac = &activityCost{rpcs: map[string]float64{}, redis: map[string]float64{}, childUs: map[string]float64{}}
		t.cost.per[activity] = ac
	}
	ac.n += float64(t.cost.workflows * t.cost.perWorkflow)
	ac.clientUs += float64((cpu1 - cpu0).Microseconds())
	for name, c := range child1 {
		ac.childUs[name] += float64((c - child0[name]).Microseconds())
	}
	for m, n := range t.rpcs.snapshot() {
		ac.rpcs[m] += float64(n - rpc0[m])
	}
	for name, st := range cmd1 {
		if name != "info" {
			ac.redis[name] += st.calls - cmd0[name].calls
		}
	}
	return r, nil
}
