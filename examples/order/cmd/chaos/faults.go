package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// knobs are the gateway simulator's fault flags of cmd/worker.
type knobs struct {
	TimeoutAfterCharge  float64
	CrashAfterCharge    float64
	FailBeforeCharge    float64
	TimeoutBeforeCharge float64
	DeclineRate         float64
	Latency             time.Duration
}

// flags are the worker's flags for k, every knob given (a zero too), so
// nothing is left to the environment.
func (k knobs) flags() []string {
	return []string{
		"-gateway-timeout-after-charge", rate(k.TimeoutAfterCharge),
		"-gateway-crash-after-charge", rate(k.CrashAfterCharge),
		"-gateway-fail-before-charge", rate(k.FailBeforeCharge),
		"-gateway-timeout-before-charge", rate(k.TimeoutBeforeCharge),
		"-gateway-decline-rate", rate(k.DeclineRate),
		"-gateway-latency", k.Latency.String(),
	}
}

// String lists the knobs that are on, as flags, or says "no knobs".
func (k knobs) String() string {
	var on []string
	f := k.flags()
	for i := 0; i < len(f); i += 2 {
		if f[i+1] != "0" && f[i+1] != "0s" {
			on = append(on, f[i]+" "+f[i+1])
		}
	}
	if len(on) == 0 {
		return "no knobs"
	}
	return strings.Join(on, " ")
}

func rate(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// phase is one fault, injected for -phase-duration while orders run.
type phase struct {
	name string
	// what says what the phase does, for -h and the log.
	what string
	// knobs are the workers' gateway knobs during the phase; nil: none.
	knobs func(config) knobs
	// inject injects the phase's fault until end; nil: the knobs are the
	// fault.
	inject func(ctx context.Context, in *injector, end time.Time) error
	// postgres: the phase needs the run's own PostgreSQL (-ledger
	// postgres).
	postgres bool
	// net: the phase puts faults on the toxiproxies between the workers
	// and the servers (under -redis standalone), which run only when a
	// net phase is in -phases.
	net bool
}

// unmet says what the phase needs that c lacks; "" when nothing.
func (p phase) unmet(c config) string {
	if p.postgres && c.ledger != ledgerPostgres {
		return "needs -ledger postgres (a PostgreSQL server of the run's own, which it may restart and whose backends it may terminate)"
	}
	return ""
}

// allPhases are the phases of -phases all under the -redis topology topo,
// in their order: the worker and gateway faults, then the topology's Redis
// faults.
func allPhases(topo string) []phase {
	common := []phase{
		{name: "worker-kill", what: "SIGKILL a random worker about three times a phase; the supervisor starts it again", inject: injectWorkerKill},
		{name: "worker-stop", what: "SIGSTOP a random worker for 1.5 leases (its leases run out, another takes over), then SIGCONT it", inject: injectWorkerStop},
		{name: "gateway-timeout-after-charge", what: "workers restarted with -gateway-timeout-after-charge -gateway-rate",
			knobs: func(c config) knobs { return knobs{TimeoutAfterCharge: c.gatewayRate} }},
		{name: "gateway-crash-after-charge", what: "workers restarted with -gateway-crash-after-charge -crash-rate (each one exits 3 and is started again)",
			knobs: func(c config) knobs { return knobs{CrashAfterCharge: c.crashRate} }},
		{name: "gateway-fail-before-charge", what: "workers restarted with -gateway-fail-before-charge -gateway-rate",
			knobs: func(c config) knobs { return knobs{FailBeforeCharge: c.gatewayRate} }},
		{name: "gateway-timeout-before-charge", what: "workers restarted with -gateway-timeout-before-charge -gateway-rate",
			knobs: func(c config) knobs { return knobs{TimeoutBeforeCharge: c.gatewayRate} }},
		{name: "gateway-decline", what: "workers restarted with -gateway-decline-rate -gateway-rate",
			knobs: func(c config) knobs { return knobs{DeclineRate: c.gatewayRate} }},
		{name: "gateway-latency", what: "workers restarted with -gateway-latency -latency",
			knobs: func(c config) knobs { return knobs{Latency: c.latency} }},
		{name: "temporal-kill", what: "kill -9 the Temporal server twice a phase and start it again a second later on the same address and SQLite file", inject: injectTemporalKill},
		{name: "postgres-restart", what: "under -ledger postgres: restart PostgreSQL twice a phase, a fast and an immediate shutdown (crash recovery) in turn, started again a second later",
			inject: injectPostgresRestart, postgres: true},
		{name: "postgres-kill-backends", what: "under -ledger postgres: pg_terminate_backend of the workers' backends caught inside a ledger or fence transaction, about ten sweeps a phase",
			inject: injectPostgresKillBackends, postgres: true},
	}
	crash := func(c config) knobs { return knobs{CrashAfterCharge: c.crashRate} }
	switch topo {
	case topoSentinel:
		return append(common,
			phase{name: "redis-failover", what: "SENTINEL FAILOVER twice a phase or every -failover-every (the old primary takes writes until the Sentinels reconfigure it)", inject: injectSentinelFailover},
			phase{name: "redis-primary-kill", what: "kill -9 the primary twice a phase or every -failover-every; the Sentinels promote a replica after 1s down; the old primary starts again empty, as a replica", inject: injectSentinelKill},
			// The double charge of a lost record, through a failover: a
			// worker charges and dies before COMPLETE, and the replica
			// promoted may lack the EXECUTING record.
			phase{name: "crash-then-failover", what: "workers restarted with -gateway-crash-after-charge -crash-rate, and the primary killed twice a phase (or every -failover-every) meanwhile",
				knobs: crash, inject: injectSentinelKill},
		)
	case topoCluster:
		return append(common,
			phase{name: "redis-failover", what: "CLUSTER FAILOVER on the replica of a random primary, twice a phase or every -failover-every", inject: injectClusterFailover},
			phase{name: "redis-primary-kill", what: "kill -9 a random primary twice a phase or every -failover-every; its replica takes over after the 2s node timeout; the killed node starts again empty, as a replica", inject: injectClusterKill},
			phase{name: "redis-reshard", what: "move 500 slots from one primary to another (redis-cli --cluster reshard: MOVED and ASK) once a phase", inject: injectClusterReshard},
			phase{name: "crash-then-failover", what: "workers restarted with -gateway-crash-after-charge -crash-rate, and a primary killed twice a phase (or every -failover-every) meanwhile",
				knobs: crash, inject: injectClusterKill},
		)
	}
	return append(append(common, networkPhases()...),
		phase{name: "redis-kill", what: "kill -9 Redis twice a phase and start it again a second later from its AOF (appendfsync always)", inject: injectRedisKill},
		phase{name: "redis-wipe", what: "kill Redis twice a phase, delete its data, start it again empty", inject: injectRedisWipe},
		phase{name: "redis-pause", what: "CLIENT PAUSE for 2/3 of a lease, ALL or WRITE, about three times a phase", inject: injectRedisPause},
		// The timeline of the double charges this command was written to
		// find: a worker charges and dies before COMPLETE, then Redis loses
		// the EXECUTING record before the next attempt claims.
		phase{name: "crash-then-wipe", what: "workers restarted with -gateway-crash-after-charge -crash-rate, and Redis wiped twice a phase meanwhile",
			knobs: crash, inject: injectRedisWipe},
	)
}

// budget asks the load to start n orders spread over the given time.
type budget struct {
	n    int
	over time.Duration
}

// injector runs the phases one after the other.
type injector struct {
	c       *cluster
	rng     *rand.Rand
	budgets chan<- budget
	knobs   knobs
}

// run runs every phase of -phases, giving the load its share of the
// orders at the start of each, and closes budgets when done.
func (in *injector) run(ctx context.Context) error {
	defer close(in.budgets)
	cfg := in.c.cfg
	if len(cfg.phases) == 0 {
		in.budgets <- budget{n: cfg.orders}
		return nil
	}
	for i, p := range cfg.phases {
		k := knobs{}
		if p.knobs != nil {
			k = p.knobs(cfg)
		}
		in.c.tl.begin(p.name, k.String())
		in.c.log.Info("chaos: phase", "phase", p.name, "of", fmt.Sprintf("%d/%d", i+1, len(cfg.phases)), "what", p.what)
		if k != in.knobs {
			if err := in.c.restartAll(ctx, k); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				in.c.log.Warn("chaos: a worker did not come back after its restart; the phase goes on", "err", err)
			}
			in.knobs = k
			in.c.tl.inject("workers restarted (" + k.String() + ")")
		}
		end := time.Now().Add(cfg.phaseDuration)
		n := cfg.orders / len(cfg.phases)
		if i < cfg.orders%len(cfg.phases) {
			n++
		}
		in.budgets <- budget{n: n, over: cfg.phaseDuration}
		if p.inject != nil {
			if err := p.inject(ctx, in, end); err != nil {
				return fmt.Errorf("phase %s: %w", p.name, err)
			}
		}
		if !sleepUntil(ctx, end) {
			return ctx.Err()
		}
	}
	return nil
}

// every calls fn about every interval (±25%) until end, the first time
// after about half an interval.
func (in *injector) every(ctx context.Context, end time.Time, interval time.Duration, fn func() error) error {
	at := time.Now().Add(in.jitter(interval / 2))
	for at.Before(end) {
		if !sleepUntil(ctx, at) {
			return ctx.Err()
		}
		if err := fn(); err != nil {
			return err
		}
		at = time.Now().Add(in.jitter(interval))
	}
	return nil
}

func (in *injector) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.75 + 0.5*in.rng.Float64()))
}

func (in *injector) pick() *workerProc { return in.c.workers[in.rng.IntN(len(in.c.workers))] }

func injectWorkerKill(ctx context.Context, in *injector, end time.Time) error {
	return in.every(ctx, end, in.c.cfg.phaseDuration/3, func() error {
		w := in.pick()
		if w.signal(syscall.SIGKILL) {
			in.c.tl.inject("worker SIGKILL")
			in.c.log.Info("chaos: SIGKILL", "worker", w.idx)
		}
		return nil
	})
}

func injectWorkerStop(ctx context.Context, in *injector, end time.Time) error {
	for {
		hold := min(in.c.cfg.lease*3/2, time.Until(end)-250*time.Millisecond)
		if hold < 500*time.Millisecond {
			return nil
		}
		w := in.pick()
		in.c.log.Info("chaos: SIGSTOP", "worker", w.idx, "for", hold.Round(time.Millisecond))
		if w.pause(ctx, hold) {
			in.c.tl.inject("worker SIGSTOP, SIGCONT after 1.5 leases")
		}
		if !sleepCtx(ctx, 300*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// standalone is the one server of the standalone phases, which -phases
// offers only under -redis standalone.
func standalone(in *injector) *redisServer { return in.c.redis.(*redisServer) }

func injectRedisKill(ctx context.Context, in *injector, end time.Time) error {
	return in.every(ctx, end, in.c.cfg.phaseDuration/2, func() error {
		in.c.log.Info("chaos: Redis kill -9; restarting it from its AOF in 1s")
		standalone(in).kill()
		in.c.tl.inject("Redis kill -9, restarted from its AOF")
		sleepCtx(ctx, time.Second)
		if err := standalone(in).start(ctx); err != nil {
			return fmt.Errorf("restart Redis from its AOF: %w", err)
		}
		return nil
	})
}

func injectRedisWipe(ctx context.Context, in *injector, end time.Time) error {
	return in.every(ctx, end, in.c.cfg.phaseDuration/2, func() error {
		in.c.log.Info("chaos: Redis killed, its data deleted; restarting it empty")
		if err := standalone(in).wipe(ctx, 500*time.Millisecond); err != nil {
			return fmt.Errorf("restart Redis without its data: %w", err)
		}
		in.c.tl.inject("Redis killed, data deleted, restarted empty")
		return nil
	})
}

func injectRedisPause(ctx context.Context, in *injector, end time.Time) error {
	d := in.c.cfg.lease * 2 / 3
	return in.every(ctx, end, in.c.cfg.phaseDuration/3, func() error {
		mode := []string{"ALL", "WRITE"}[in.rng.IntN(2)]
		in.c.log.Info("chaos: CLIENT PAUSE", "ms", d.Milliseconds(), "mode", mode)
		if err := standalone(in).pause(ctx, d, mode); err != nil {
			in.c.log.Warn("chaos: CLIENT PAUSE failed", "err", err)
			return nil
		}
		in.c.tl.inject("Redis CLIENT PAUSE " + mode)
		return nil
	})
}

// failoverCount is the name every failover is counted under, in every
// topology (the summary's failovers).
const failoverCount = "Redis failover"

// failoverEvery is -failover-every, by default half a phase.
func (in *injector) failoverEvery() time.Duration {
	if d := in.c.cfg.failoverEvery; d > 0 {
		return d
	}
	return in.c.cfg.phaseDuration / 2
}

// failoverFault injects a failover every -failover-every: do fails the
// primary over and returns the old primary and the new one; what names it
// in the table.
func failoverFault(what string, do func(ctx context.Context, in *injector) (old, primary string, err error)) func(context.Context, *injector, time.Time) error {
	return func(ctx context.Context, in *injector, end time.Time) error {
		return in.every(ctx, end, in.failoverEvery(), func() error {
			in.c.log.Info("chaos: " + what)
			old, primary, err := do(ctx, in)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			in.c.tl.inject(failoverCount)
			in.c.tl.inject(what)
			in.c.log.Info("chaos: "+what+" done", "old", old, "primary", primary)
			return nil
		})
	}
}

var (
	injectSentinelFailover = failoverFault("SENTINEL FAILOVER", func(ctx context.Context, in *injector) (string, string, error) {
		primary, err := sentinelOf(in).failover(ctx)
		return "", primary, err
	})
	injectSentinelKill = failoverFault("primary kill -9", func(ctx context.Context, in *injector) (string, string, error) {
		return sentinelOf(in).killPrimary(ctx)
	})
	injectClusterFailover = failoverFault("CLUSTER FAILOVER", func(ctx context.Context, in *injector) (string, string, error) {
		return clusterOf(in).failover(ctx, in.rng)
	})
	injectClusterKill = failoverFault("primary kill -9", func(ctx context.Context, in *injector) (string, string, error) {
		return clusterOf(in).killPrimary(ctx, in.rng)
	})
)

func injectClusterReshard(ctx context.Context, in *injector, end time.Time) error {
	return in.every(ctx, end, in.c.cfg.phaseDuration, func() error {
		moved, err := clusterOf(in).reshard(ctx, in.rng, 500)
		if err != nil {
			return fmt.Errorf("reshard: %w", err)
		}
		in.c.tl.inject("slots resharded")
		in.c.log.Info("chaos: resharded", "slots", moved)
		return nil
	})
}

// phaseStats is what happened in one part of the run: a phase, or
// startup, settle and verify.
type phaseStats struct {
	Name     string         `json:"name"`
	Knobs    string         `json:"knobs,omitempty"`
	Start    float64        `json:"start_s"`
	End      float64        `json:"end_s"`
	Orders   int            `json:"orders_started"`
	Injected map[string]int `json:"injected,omitempty"`
	Observed map[string]int `json:"observed,omitempty"`
}

// timeline records the parts of the run, and counts what each saw.
type timeline struct {
	start  time.Time
	mu     sync.Mutex
	phases []*phaseStats
}

func newTimeline(start time.Time) *timeline {
	t := &timeline{start: start}
	t.begin("startup", "")
	return t
}

// begin ends the current part and starts the next.
func (t *timeline) begin(name, knobs string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Since(t.start).Seconds()
	if n := len(t.phases); n > 0 {
		t.phases[n-1].End = now
	}
	t.phases = append(t.phases, &phaseStats{Name: name, Knobs: knobs, Start: now, Injected: map[string]int{}, Observed: map[string]int{}})
}

// current names the part the run is in.
func (t *timeline) current() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.phases[len(t.phases)-1].Name
}

// inject counts a fault injected in the current part.
func (t *timeline) inject(what string) { t.count(func(p *phaseStats) { p.Injected[what]++ }) }

// observe counts something seen in the current part (a worker's exit).
func (t *timeline) observe(what string) { t.count(func(p *phaseStats) { p.Observed[what]++ }) }

// orderStarted counts an order started in the current part.
func (t *timeline) orderStarted() { t.count(func(p *phaseStats) { p.Orders++ }) }

func (t *timeline) count(f func(*phaseStats)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t.phases[len(t.phases)-1])
}

// snapshot copies the parts so far; the current one ends now.
func (t *timeline) snapshot() []phaseStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]phaseStats, len(t.phases))
	for i, p := range t.phases {
		out[i] = *p
		out[i].Injected, out[i].Observed = maps.Clone(p.Injected), maps.Clone(p.Observed)
	}
	if n := len(out); n > 0 && out[n-1].End == 0 {
		out[n-1].End = time.Since(t.start).Seconds()
	}
	return out
}

// counts renders a count map as "a×2, b×1", sorted by name.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " ×" + strconv.Itoa(m[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// sleepCtx sleeps for d, or until ctx is done: it reports whether it slept
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// sleepUntil sleeps until at, or until ctx is done.
func sleepUntil(ctx context.Context, at time.Time) bool { return sleepCtx(ctx, time.Until(at)) }
