package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redisproc"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// config is what the flags set.
type config struct {
	redisURL   string
	cell       time.Duration
	reps       int
	goroutines []int
	temporal   bool
	inFlight   int
	only       string
	cpuProfile string
	// temporalWorkflows run at once in the Temporal comparison, each
	// temporalActivities activities in turn.
	temporalWorkflows, temporalActivities int
	// temporalInterceptor runs the wrapped activity's workflows on a
	// worker with onceflow's Interceptor.
	temporalInterceptor bool
}

func parseFlags(args []string) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("idembench", flag.ContinueOnError)
	fs.StringVar(&c.redisURL, "redis-url", "", "Redis to measure (default: a redis-server started on a free loopback port)")
	fs.DurationVar(&c.cell, "cell", 1500*time.Millisecond, "how long one measured cell runs")
	fs.IntVar(&c.reps, "reps", 3, "rounds, each measuring every cell once; the report gives medians, and ratios as the median of the rounds' ratios")
	g := fs.String("goroutines", "1,16,64", "concurrency levels, comma separated")
	fs.BoolVar(&c.temporal, "temporal", true, "compare the idempotent Temporal activity with the bare one on an in-process server")
	fs.IntVar(&c.temporalWorkflows, "temporal-workflows", 8, "workflows at once in the Temporal comparison: its concurrent activities")
	fs.IntVar(&c.temporalActivities, "temporal-activities", 25, "activities each workflow of the Temporal comparison runs in turn")
	fs.BoolVar(&c.temporalInterceptor, "temporal-interceptor", false, "in the Temporal comparison, run the idempotent activity's workflows on a worker of their own with onceflow's workflow Interceptor (the bare one's have none)")
	fs.IntVar(&c.inFlight, "in-flight", 1000, "in-flight actions for the renewal cost")
	short := fs.Bool("short", false, "one repetition of 500ms cells, to try the harness out")
	fs.StringVar(&c.only, "only", "", "measure only the workloads whose name contains this, or one of these comma-separated strings (and skip memory, and the renewal and Temporal unless one of them is 'renewal' or 'temporal')")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the workloads to this file (go tool pprof); with -only temporal, one of each measured Temporal round to FILE.bare.N and FILE.wrapped.N")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	for _, s := range strings.Split(*g, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return config{}, fmt.Errorf("-goroutines: %q is not a positive integer", s)
		}
		c.goroutines = append(c.goroutines, n)
	}
	if *short {
		c.reps, c.cell = 1, 500*time.Millisecond
	}
	if c.reps < 1 || c.cell <= 0 || c.temporalWorkflows < 1 || c.temporalActivities < 1 {
		return config{}, errors.New("-reps, -cell, -temporal-workflows and -temporal-activities must be positive")
	}
	return c, nil
}

// bench is one run: one Redis, one client for every workload.
type bench struct {
	cfg config
	srv *redisproc.Server
	rdb *redis.Client
	// cached is a second client of the same server with go-redis'
	// server-assisted client-side cache (RESP3), for the cached replay.
	cached *redis.Client
	// floor sends the renewal's floor beside each renewal while the
	// renewal is measured (renewal.go); a hook of rdb.
	floor   *floorHook
	digest  *onceflow.Digester
	trivial *redis.Script
	resp    []byte
	fp      onceflow.Fingerprint
}

func newBench(ctx context.Context, cfg config) (*bench, error) {
	b := &bench{cfg: cfg, trivial: redis.NewScript("return 1"), resp: make([]byte, 100)}
	for i := range b.resp {
		b.resp[i] = 'a' + byte(i%26)
	}
	b.fp = onceflow.FingerprintOf([]byte(`{"order":"o-1","amount":1000}`))
	url := cfg.redisURL
	if url == "" {
		srv, err := redisproc.Start()
		if err != nil {
			return nil, err
		}
		b.srv = srv
		url = "redis://" + srv.Addr() + "/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("-redis-url: %w", err)
	}
	// The client as the README configures it.
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = 128
	copt := *opt // before NewClient fills opt in
	b.rdb = redis.NewClient(opt)
	b.floor = &floorHook{rdb: b.rdb}
	b.rdb.AddHook(b.floor)
	copt.Protocol = 3
	copt.ClientSideCacheConfig = &redis.ClientSideCacheConfig{MaxEntries: 1 << 16}
	b.cached = redis.NewClient(&copt)
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		b.close()
		return nil, fmt.Errorf("redis at %s: %w", url, err)
	}
	if err := b.trivial.Load(ctx, b.rdb).Err(); err != nil {
		b.close()
		return nil, err
	}
	b.digest, err = onceflow.NewDigester([]byte("idembench secret, not for production"), 1)
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *bench) close() {
	if b.rdb != nil {
		_ = b.rdb.Close()
	}
	if b.cached != nil {
		_ = b.cached.Close()
	}
	if b.srv != nil {
		b.srv.Close()
	}
}

// executor returns a store and executor under a key namespace of their own.
func (b *bench) executor(cfg idemstore.ExecutorConfig) (*redisstore.Store, *idemstore.Executor, error) {
	s, err := redisstore.New(redisstore.Config{Client: b.rdb, Namespace: "bench" + randomHex(6)})
	if err != nil {
		return nil, nil, err
	}
	if err := s.LoadScripts(context.Background()); err != nil {
		return nil, nil, err
	}
	cfg.Store = s
	e, err := idemstore.NewExecutor(cfg)
	return s, e, err
}

// cachedExecutor returns an executor of the records of s whose store reads
// replays through the client-side cache (redisstore.Config.ReplayCache).
func (b *bench) cachedExecutor(s *redisstore.Store) (*idemstore.Executor, error) {
	ns, _, _ := strings.Cut(s.Key(onceflow.Ref{}), ":idem:")
	// A cache hit waits on no I/O: 64 goroutines of them share the two
	// cores with nothing to block on, and one can wait longer than the
	// default 200 ms command timeout for its turn. The timeout bounds
	// nothing measured here.
	cs, err := redisstore.New(redisstore.Config{Client: b.cached, Namespace: ns, ReplayCache: true, NoAutoPipeline: true, CommandTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	if err := cs.LoadScripts(context.Background()); err != nil {
		return nil, err
	}
	return idemstore.NewExecutor(idemstore.ExecutorConfig{Store: cs})
}

func randomHex(n int) string {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}

// unpipelinedExecutor returns an executor of the records of s whose store
// sends every replay read by itself, never through the client's
// auto-pipeliner (redisstore.Config.NoAutoPipeline).
func (b *bench) unpipelinedExecutor(s *redisstore.Store) (*idemstore.Executor, error) {
	ns, _, _ := strings.Cut(s.Key(onceflow.Ref{}), ":idem:")
	ps, err := redisstore.New(redisstore.Config{Client: b.rdb, Namespace: ns, NoAutoPipeline: true})
	if err != nil {
		return nil, err
	}
	if err := ps.LoadScripts(context.Background()); err != nil {
		return nil, err
	}
	return idemstore.NewExecutor(idemstore.ExecutorConfig{Store: ps})
}

// scope returns the digest of record i of goroutine g: 64 hex characters,
// built in place (one allocation, as a caller's digest would be).
func scope(g, i int) onceflow.Digest {
	var buf [64]byte
	for k := range buf {
		buf[k] = '0'
	}
	writeHex(buf[:16], uint64(g))
	writeHex(buf[16:32], uint64(i))
	return onceflow.Digest{Version: 1, Hex: string(buf[:])}
}

func writeHex(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for k := len(dst) - 1; k >= 0 && v > 0; k-- {
		dst[k] = digits[v&15]
		v >>= 4
	}
}

// op is one operation of a workload, by goroutine g, its i-th.
type op func(ctx context.Context, g, i int) error

// workload is what a cell runs.
type workload struct {
	name string
	// prepare runs before a cell, untimed, and returns the operation.
	prepare func(ctx context.Context) (op, error)
	// cmds are the commands whose Redis time counts for it.
	cmds []string
}

// sample is one cell's measurement.
type sample struct {
	ops            int
	opsPerSec      float64
	p50, p99       time.Duration
	allocs, bytes  float64 // per op; measured with one goroutine only
	redisUsPerOp   float64
	clientUsPerOp  float64 // this process' CPU (user + system) per op
	hasAllocations bool
}

// measure runs w at the given concurrency for one cell.
func (b *bench) measure(ctx context.Context, w workload, goroutines int) (sample, error) {
	run, err := w.prepare(ctx)
	if err != nil {
		return sample{}, fmt.Errorf("%s: prepare: %w", w.name, err)
	}
	before, err := commandStats(ctx, b.rdb)
	if err != nil {
		return sample{}, err
	}
	var ms0, ms1 runtime.MemStats
	if goroutines == 1 {
		runtime.GC()
		runtime.ReadMemStats(&ms0)
	}
	cpu0, err := processCPU()
	if err != nil {
		return sample{}, err
	}
	lat := make([][]time.Duration, goroutines)
	errs := make([]error, goroutines)
	start := time.Now()
	deadline := start.Add(b.cfg.cell)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			local := make([]time.Duration, 0, 1<<16)
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := run(ctx, g, i); err != nil {
					errs[g] = err
					break
				}
				local = append(local, time.Since(t0))
			}
			lat[g] = local
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := processCPU()
	if err != nil {
		return sample{}, err
	}
	if goroutines == 1 {
		runtime.ReadMemStats(&ms1)
	}
	if err := errors.Join(errs...); err != nil {
		return sample{}, fmt.Errorf("%s: %w", w.name, err)
	}
	after, err := commandStats(ctx, b.rdb)
	if err != nil {
		return sample{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	s := sample{ops: len(all)}
	if s.ops == 0 {
		return s, fmt.Errorf("%s: no operation finished", w.name)
	}
	s.opsPerSec = float64(s.ops) / elapsed.Seconds()
	s.clientUsPerOp = float64((cpu1 - cpu0).Microseconds()) / float64(s.ops)
	s.p50, s.p99 = all[len(all)/2], all[len(all)*99/100]
	if goroutines == 1 {
		s.hasAllocations = true
		s.allocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(s.ops)
		s.bytes = float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(s.ops)
	}
	var usec float64
	for _, c := range w.cmds {
		usec += after[c].usec - before[c].usec
	}
	s.redisUsPerOp = usec / float64(s.ops)
	return s, nil
}

// cells holds every repetition of every cell: by workload, then
// concurrency, in the order of the rounds that measured them.
type cells map[string]map[int][]sample

func (c cells) add(w string, g int, s sample) {
	if c[w] == nil {
		c[w] = map[int][]sample{}
	}
	c[w][g] = append(c[w][g], s)
}

// ratio is the median over the rounds of f(w's cell) ÷ f(base's cell) at g
// goroutines, both cells of the same round: on a machine whose speed
// drifts, a ratio of two cells measured seconds apart, not of two
// medians. NaN when either was not measured.
func (c cells) ratio(w, base string, g int, f func(sample) float64) float64 {
	a, b := c[w][g], c[base][g]
	if len(a) == 0 || len(a) != len(b) {
		return math.NaN()
	}
	v := make([]float64, len(a))
	for i := range a {
		v[i] = f(a[i]) / f(b[i])
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// median of reps samples, metric by metric.
func median(ss []sample) sample {
	pick := func(f func(sample) float64) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return sample{
		ops:            int(pick(func(s sample) float64 { return float64(s.ops) })),
		opsPerSec:      pick(func(s sample) float64 { return s.opsPerSec }),
		p50:            time.Duration(pick(func(s sample) float64 { return float64(s.p50) })),
		p99:            time.Duration(pick(func(s sample) float64 { return float64(s.p99) })),
		allocs:         pick(func(s sample) float64 { return s.allocs }),
		bytes:          pick(func(s sample) float64 { return s.bytes }),
		redisUsPerOp:   pick(func(s sample) float64 { return s.redisUsPerOp }),
		clientUsPerOp:  pick(func(s sample) float64 { return s.clientUsPerOp }),
		hasAllocations: ss[0].hasAllocations,
	}
}

type cmdStat struct{ calls, usec float64 }

// commandStats reads INFO commandstats: calls and usec by command.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]cmdStat, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				st.calls = f
			case "usec":
				st.usec = f
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out, nil
}

// infoField reads one numeric field of an INFO section.
func infoField(ctx context.Context, rdb *redis.Client, section, field string) (string, error) {
	info, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO %s has no %s", section, field)
}

// processCPU is this process' CPU time so far, user and system: the
// client's, as redis-server is a process of its own.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
