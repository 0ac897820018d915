package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// config is what the flags set.
type config struct {
	orders        int
	concurrency   int
	workers       int
	duplicates    float64
	phases        []phase
	phaseDuration time.Duration
	settle        time.Duration
	orderDeadline time.Duration
	seed          int64
	seedGiven     bool
	ledger        string // -ledger: sqlite or postgres (a server of the run's own)
	ledgerDSN     string
	workerBin     string
	out           string
	keep          bool
	json          bool
	short         bool
	lease         time.Duration
	orderWait     time.Duration
	gatewayRate   float64
	crashRate     float64
	latency       time.Duration
	taskQueue     string
	redis         string // -redis: standalone, sentinel or cluster
	durability    string // -redis-durability: none or replicas
	failoverEvery time.Duration
}

// shortPreset is what -short sets, for the flags not given explicitly:
// about a minute or two on a small machine.
var shortPreset = map[string]string{
	"orders":         "40",
	"concurrency":    "8",
	"phase-duration": "5s",
	"settle":         "90s",
	"order-deadline": "60s",
	"gateway-rate":   "0.5",
	"crash-rate":     "0.5",
}

// parseFlags reads the configuration from args; -h prints the flags to
// out.
func parseFlags(args []string, out io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: go run ./examples/order/cmd/chaos [flags]\n")
		for _, topo := range []string{topoStandalone, topoSentinel, topoCluster} {
			fmt.Fprintf(out, "\nphases under -redis %s (-phases, in this order):\n", topo)
			for _, p := range allPhases(topo) {
				fmt.Fprintf(out, "  %-30s %s\n", p.name, p.what)
			}
		}
		fmt.Fprintf(out, "\nflags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&c.orders, "orders", 300, "orders to place, each under its own Idempotency-Key")
	fs.IntVar(&c.concurrency, "concurrency", 16, "requests in flight at once, over all clients (a client waiting to retry holds none)")
	fs.IntVar(&c.workers, "workers", 3, "worker processes, all on one ledger, task queue and Redis")
	fs.Float64Var(&c.duplicates, "duplicates", 0.2, "share of keys, 0–1, sent by two concurrent clients at once (same key, same body)")
	phases := fs.String("phases", "all", "comma-separated phases to run, in the order given; all, or none for a run without faults")
	fs.DurationVar(&c.phaseDuration, "phase-duration", 15*time.Second, "how long each phase injects its fault, after its workers are (re)started")
	fs.DurationVar(&c.settle, "settle", 3*time.Minute, "after the phases: how long to wait for every client and workflow to finish, deciding what waits on an operator")
	fs.DurationVar(&c.orderDeadline, "order-deadline", 2*time.Minute, "how long one client retries its order before it gives up (the settle asks again)")
	fs.Int64Var(&c.seed, "seed", 0, "seed of the random choices: orders, duplicates, which worker, when (default: from the clock; printed)")
	fs.StringVar(&c.ledger, "ledger", ledgerSQLite, "the ledger all workers share: sqlite (a file in the temporary directory) or postgres (a PostgreSQL cluster of the run's own, initdb'd into a temporary directory on a free loopback port: the postgres phases restart it and terminate its backends); -ledger-dsn names another")
	fs.StringVar(&c.ledgerDSN, "ledger-dsn", "", "a ledger all workers share that the run does not start: postgres://… or sqlite:<path> (the postgres phases need -ledger postgres instead)")
	fs.StringVar(&c.workerBin, "worker-bin", "", "a prebuilt cmd/worker binary with the gateway knobs (go build -tags nodev,simulate; a production build, -tags nodev, has none) (default: build one into the temporary directory; run from the repository)")
	fs.StringVar(&c.out, "out", "", "directory for the worker logs, answers.jsonl, chaos.log and summary.json (default: a new temporary directory, kept)")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary directory (the worker binary, the SQLite ledger, Redis' data) and print its path")
	fs.BoolVar(&c.json, "json", true, "write the summary as JSON to summary.json in -out (-json=false: do not)")
	fs.BoolVar(&c.short, "short", false, "a short run for CI, a minute or two: 40 orders, 5s phases, concurrency 8, settle 90s, order deadline 60s, gateway and crash rates 0.5 (flags given explicitly win)")
	fs.DurationVar(&c.lease, "lease", 3*time.Second, "the workers' processing lease (-lease): short, so takeovers happen within the run")
	fs.DurationVar(&c.orderWait, "order-wait", time.Second, "how long POST /orders waits for the order before it answers 202 (the workers' -order-wait)")
	fs.Float64Var(&c.gatewayRate, "gateway-rate", 0.4, "the rate, 0–1, of the gateway knob of each gateway phase but the crash")
	fs.Float64Var(&c.crashRate, "crash-rate", 0.25, "the rate, 0–1, of -gateway-crash-after-charge in its phase (each one kills a worker)")
	fs.DurationVar(&c.latency, "latency", 2*time.Second, "the -gateway-latency of the gateway-latency phase")
	fs.StringVar(&c.taskQueue, "task-queue", "onceflow-chaos", "the workers' task queue")
	fs.StringVar(&c.redis, "redis", topoStandalone, "the Redis topology: standalone (one server, AOF, appendfsync always), sentinel (a primary, 2 replicas, 3 Sentinels) or cluster (3 primaries with a replica each); each has its own Redis phases")
	fs.DurationVar(&c.failoverEvery, "failover-every", 0, "under -redis sentinel or cluster: how often the failover and primary-kill phases fail the primary over (±25%) (default: twice a phase)")
	fs.StringVar(&c.durability, "redis-durability", "none", "the workers' -redis-durability: none, or replicas (WAIT for every replica: 2 under sentinel, 1 under cluster)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q (every option is a flag; -h lists them)", fs.Args())
	}
	if c.short {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range shortPreset {
			if !given[name] {
				if err := fs.Set(name, v); err != nil {
					return config{}, fmt.Errorf("-short: set -%s: %w", name, err)
				}
			}
		}
	}
	fs.Visit(func(f *flag.Flag) { c.seedGiven = c.seedGiven || f.Name == "seed" })
	if !c.seedGiven {
		c.seed = time.Now().UnixNano()
	}
	var err error
	if c.phases, err = parsePhases(*phases, c); err != nil {
		return config{}, err
	}
	return c, c.validate()
}

// validate refuses settings the run cannot work with.
func (c config) validate() error {
	var errs []error
	if c.orders < 1 || c.workers < 1 || c.concurrency < 1 {
		errs = append(errs, errors.New("-orders, -workers and -concurrency must be at least 1"))
	}
	if c.duplicates < 0 || c.duplicates > 1 || c.gatewayRate < 0 || c.gatewayRate > 1 || c.crashRate < 0 || c.crashRate > 1 {
		errs = append(errs, errors.New("-duplicates, -gateway-rate and -crash-rate are shares from 0 to 1"))
	}
	if c.duplicates > 0 && c.concurrency < 2 {
		errs = append(errs, errors.New("-duplicates needs -concurrency of at least 2 (a duplicated key runs two clients at once); or set -duplicates 0"))
	}
	if c.failoverEvery < 0 || (c.failoverEvery > 0 && c.failoverEvery < 3*time.Second) {
		errs = append(errs, fmt.Errorf("-failover-every must be 3s or more (a failover takes a second or two), got %v", c.failoverEvery))
	}
	if c.phaseDuration <= 0 || c.settle <= 0 || c.orderDeadline <= 0 || c.orderWait <= 0 || c.latency < 0 {
		errs = append(errs, errors.New("-phase-duration, -settle, -order-deadline and -order-wait must be positive"))
	}
	if c.lease < 1200*time.Millisecond {
		errs = append(errs, fmt.Errorf("-lease must be at least 1.2s (six times the workers' 200ms Redis timeout), got %v", c.lease))
	}
	if c.orderWait >= c.lease {
		errs = append(errs, fmt.Errorf("-order-wait (%v) must stay below -lease (%v): the middleware holds the key's lease while it waits", c.orderWait, c.lease))
	}
	switch c.redis {
	case topoStandalone, topoSentinel, topoCluster:
	default:
		errs = append(errs, fmt.Errorf("-redis %q: want standalone, sentinel or cluster", c.redis))
	}
	switch {
	case c.durability != "none" && c.durability != "replicas":
		errs = append(errs, fmt.Errorf("-redis-durability %q: want none or replicas", c.durability))
	case c.durability == "replicas" && c.redis == topoStandalone:
		errs = append(errs, errors.New("-redis-durability replicas needs replicas: -redis sentinel or cluster"))
	}
	switch {
	case c.ledger != ledgerSQLite && c.ledger != ledgerPostgres:
		errs = append(errs, fmt.Errorf("-ledger %q: want sqlite or postgres", c.ledger))
	case c.ledger == ledgerPostgres && c.ledgerDSN != "":
		errs = append(errs, errors.New("-ledger postgres starts a server of the run's own: leave -ledger-dsn out"))
	}
	if c.ledgerDSN != "" && !strings.HasPrefix(c.ledgerDSN, "postgres://") && !strings.HasPrefix(c.ledgerDSN, "postgresql://") && !strings.HasPrefix(c.ledgerDSN, "sqlite:") {
		errs = append(errs, errors.New("-ledger-dsn must be postgres://… or sqlite:<path>"))
	}
	return errors.Join(errs...)
}

// The -ledger choices.
const (
	ledgerSQLite   = "sqlite"
	ledgerPostgres = "postgres"
)

// parsePhases reads -phases: all, none, or names from allPhases(c.redis).
// all leaves out the phases c cannot run (the postgres phases without
// -ledger postgres); naming one is an error that says what it needs.
func parsePhases(s string, c config) ([]phase, error) {
	topo := c.redis
	all := allPhases(topo)
	switch strings.TrimSpace(s) {
	case "all":
		var out []phase
		for _, p := range all {
			if p.unmet(c) == "" {
				out = append(out, p)
			}
		}
		return out, nil
	case "none", "":
		return nil, nil
	}
	byName := map[string]phase{}
	var names []string
	for _, p := range all {
		byName[p.name] = p
		names = append(names, p.name)
	}
	var out []phase
	for _, n := range strings.Split(s, ",") {
		p, ok := byName[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("-phases: unknown phase %q under -redis %s (want all, none, or a comma-separated list of %s)", strings.TrimSpace(n), topo, strings.Join(names, ", "))
		}
		if why := p.unmet(c); why != "" {
			return nil, fmt.Errorf("-phases: %s %s", p.name, why)
		}
		out = append(out, p)
	}
	return out, nil
}
