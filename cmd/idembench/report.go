package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// report runs every measurement and writes one Markdown report.
func (b *bench) report(ctx context.Context, out io.Writer) error {
	began := time.Now()
	r := &reportRun{b: b, out: out}
	r.p("# idembench\n\n")
	r.p("Command: `%s` (from the repository root), %s.\n\n", strings.Join(append([]string{"go run ./cmd/idembench"}, os.Args[1:]...), " "), time.Now().UTC().Format("2006-01-02"))
	r.p("%s\n\n", b.machine(ctx))

	ws, err := b.workloads(ctx)
	if err != nil {
		return err
	}
	if b.cfg.only != "" {
		ws = slices.DeleteFunc(ws, func(w workload) bool {
			return !slices.ContainsFunc(strings.Split(b.cfg.only, ","), func(s string) bool { return strings.Contains(w.name, s) })
		})
	}
	if err := r.measureRounds(ctx, ws); err != nil {
		return err
	}
	if b.cfg.only != "" {
		return r.writeOnly(ctx, ws)
	}

	r.writeOperations(ws)
	if err := r.writeRenewal(ctx); err != nil {
		return err
	}
	if err := r.writeMemory(ctx); err != nil {
		return err
	}
	if b.cfg.temporal {
		if err := r.writeTemporal(ctx); err != nil {
			return err
		}
	}
	r.writePeers()
	r.writeTargets()
	r.p("\nThe run took %v.\n", time.Since(began).Round(time.Second))
	return nil
}

// reportRun is one report being written: where to, and the figures its
// sections measured, which the targets at its end compare.
type reportRun struct {
	b   *bench
	out io.Writer

	all      cells                     // the operations' samples, every round's
	results  map[string]map[int]sample // their medians, by workload and goroutines
	renewal  renewalCost
	memory   map[string]int64 // MEMORY USAGE, by record
	temporal temporalCost     // when -temporal
}

// p writes to the report.
func (r *reportRun) p(format string, args ...any) { fmt.Fprintf(r.out, format, args...) }

// progress says on stderr what the run is measuring.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "idembench: "+format+"\n", args...)
}

// opsRatio is the median of the rounds' ratios of w's throughput to
// base's at g goroutines.
func (r *reportRun) opsRatio(w, base string, g int) float64 {
	return r.all.ratio(w, base, g, func(s sample) float64 { return s.opsPerSec })
}

// measureRounds measures the workloads -reps times at every concurrency,
// under the CPU profile when -cpuprofile names a file, into r.all and
// their medians into r.results.
func (r *reportRun) measureRounds(ctx context.Context, ws []workload) error {
	b := r.b
	if b.cfg.cpuProfile != "" {
		f, err := os.Create(b.cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// Rounds: each measures every workload once at each concurrency, so
	// the cells a ratio compares ran seconds apart, not a minute apart as
	// when a workload's repetitions ran back to back; each round starts
	// one workload further on, so no workload always follows the same one.
	r.all = cells{}
	for rep := range b.cfg.reps {
		for _, g := range b.cfg.goroutines {
			for k := range ws {
				w := ws[(k+rep)%len(ws)]
				s, err := b.measure(ctx, w, g)
				if err != nil {
					return err
				}
				r.all.add(w.name, g, s)
				progress("round %d of %d: %-32s %3d goroutines: %8.0f ops/s", rep+1, b.cfg.reps, w.name, g, s.opsPerSec)
			}
		}
	}
	r.results = map[string]map[int]sample{}
	for w, byG := range r.all {
		r.results[w] = map[int]sample{}
		for g, ss := range byG {
			r.results[w][g] = median(ss)
		}
	}
	return nil
}

// writeOnly writes what a run of -only measured, a line a cell, with the
// renewal's cost first when -only names it, and the Temporal comparison
// last when it names temporal.
func (r *reportRun) writeOnly(ctx context.Context, ws []workload) error {
	b := r.b
	if slices.Contains(strings.Split(b.cfg.only, ","), "renewal") {
		progress("renewal cost with %d actions in flight", b.cfg.inFlight)
		rc, err := b.measureRenewal(ctx, b.cfg.inFlight)
		if err != nil {
			return fmt.Errorf("renewal: %w", err)
		}
		r.p("renewal, %d in flight: %.0f renewals in %.0f script calls, %.1f client CPU µs, %.1f Redis CPU µs, %.1f Redis µs of the script, per renewal; "+
			"each call followed by its floor (the same commands, no check; %.0f leases in %.0f calls of each): the script %.1f, the floor %.1f Redis µs a lease, %s × the floor\n",
			rc.inFlight, rc.renewals, rc.calls, rc.clientUs, rc.redisCPUUs, rc.redisUsPerOp, rc.pairedLeases, rc.pairedCalls, rc.pairedUsPerOp, rc.floorUsPerOp, ratio(rc.pairedUsPerOp, rc.floorUsPerOp))
	}
	for _, w := range ws {
		for _, g := range b.cfg.goroutines {
			s := r.results[w.name][g]
			r.p("%s, %d goroutines: %.0f ops/s, p50 %s, %.1f allocs/op, %.1f Redis µs/op, %.1f client CPU µs/op\n", w.name, g, s.opsPerSec, us(s.p50), s.allocs, s.redisUsPerOp, s.clientUsPerOp)
		}
	}
	if slices.Contains(strings.Split(b.cfg.only, ","), "temporal") {
		return r.writeTemporal(ctx)
	}
	return nil
}

// writeOperations writes the operations' table: a row a workload and
// concurrency.
func (r *reportRun) writeOperations(ws []workload) {
	b := r.b
	r.p("## Operations\n\n")
	r.p("Medians of %d repetitions of %v each, run in %d rounds: a round measures every workload once at each concurrency. Allocations per operation with one goroutine (they include building the record's key). ", b.cfg.reps, b.cfg.cell, b.cfg.reps)
	r.p("Redis µs/op is the script's (or the commands') time inside Redis, from `INFO commandstats`; client CPU µs/op is this process' CPU time (user + system) per operation, redis-server's not included. ")
	r.p("Ratios: the executor's fresh operations against two EVALSHAs and against the naive code, its replays against one EVALSHA; each is the median of the rounds' ratios, every one of two cells of the same round.\n\n")
	r.p("| workload | goroutines | ops/s | p50 | p99 | allocs/op | B/op | Redis µs/op | client CPU µs/op | ÷ floor | ÷ naive |\n")
	r.p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range ws {
		for _, g := range b.cfg.goroutines {
			s := r.results[w.name][g]
			allocs, bytes := "", ""
			if s.hasAllocations {
				allocs, bytes = fmt.Sprintf("%.1f", s.allocs), fmt.Sprintf("%.0f", s.bytes)
			}
			vsFloor, vsNaive := r.baseRatios(w.name, g)
			r.p("| %s | %d | %.0f | %s | %s | %s | %s | %.1f | %.1f | %s | %s |\n", w.name, g, s.opsPerSec, us(s.p50), us(s.p99), allocs, bytes, s.redisUsPerOp, s.clientUsPerOp, vsFloor, vsNaive)
		}
	}
}

// baseRatios is the operations table's last two columns for workload w
// at g goroutines: its throughput against its floor (two EVALSHAs for a
// fresh operation, one for a replay) and against the naive code's;
// empty for the floors themselves, and the naive code against itself.
func (r *reportRun) baseRatios(w string, g int) (vsFloor, vsNaive string) {
	switch w {
	case fresh, twoStep, naiveFresh:
		vsFloor = ratioText(r.opsRatio(w, floor2, g))
		if w != naiveFresh {
			vsNaive = ratioText(r.opsRatio(w, naiveFresh, g))
		}
	case replayHot, replaySpread, replayHotNo, replaySprNo, replayCached, naiveReplay:
		vsFloor = ratioText(r.opsRatio(w, floor1, g))
		if w != naiveReplay {
			vsNaive = ratioText(r.opsRatio(w, naiveReplay, g))
		}
	}
	return vsFloor, vsNaive
}

// writeRenewal measures what renewing leases costs, into r.renewal, and
// writes its section.
func (r *reportRun) writeRenewal(ctx context.Context) error {
	b := r.b
	progress("renewal cost with %d actions in flight", b.cfg.inFlight)
	rc, err := b.measureRenewal(ctx, b.cfg.inFlight)
	if err != nil {
		return fmt.Errorf("renewal: %w", err)
	}
	r.renewal = rc
	r.p("\n## Renewal\n\n%d actions in flight, leases of 3 s renewed by the executor; %.0f renewals in the window, in %.0f script calls (%.1f leases a call).\n\n", rc.inFlight, rc.renewals, rc.calls, rc.renewals/max(rc.calls, 1))
	r.p("| per renewal | µs |\n|---|---:|\n| client CPU (user + system) | %.1f |\n| Redis CPU (`INFO cpu`) | %.1f |\n| Redis time of the script (`INFO commandstats`) | %.1f |\n",
		rc.clientUs, rc.redisCPUUs, rc.redisUsPerOp)
	r.p("\nIn a second window each renewal call was followed by its floor's: the same commands, every check stripped, with the same arguments, on copies of the same records (%.0f leases in %.0f calls of each).\n\n", rc.pairedLeases, rc.pairedCalls)
	r.p("| per lease, second window | Redis µs (`INFO commandstats`) |\n|---|---:|\n| the script | %.1f |\n| its floor | %.1f |\n| the script ÷ its floor | %s |\n",
		rc.pairedUsPerOp, rc.floorUsPerOp, ratio(rc.pairedUsPerOp, rc.floorUsPerOp))
	return nil
}

// writeMemory measures the records' MEMORY USAGE, into r.memory, and
// writes its section.
func (r *reportRun) writeMemory(ctx context.Context) error {
	progress("record memory")
	mem, err := r.b.measureMemory(ctx)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	r.p("\n## Record memory\n\n| record | `MEMORY USAGE` (B) | encoding |\n|---|---:|---|\n")
	r.memory = map[string]int64{}
	for _, m := range mem {
		r.memory[m.what] = m.bytes
		r.p("| %s | %d | %s |\n", m.what, m.bytes, m.encoding)
	}
	return nil
}

// writeTemporal measures the idempotent Temporal activity against the
// bare one, into r.temporal, and writes its section.
func (r *reportRun) writeTemporal(ctx context.Context) error {
	progress("Temporal: bare and idempotent activities")
	tc, err := r.b.measureTemporal(ctx)
	if err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	r.temporal = tc
	interceptor := ""
	if r.b.cfg.temporalInterceptor {
		interceptor = " The idempotent activity's workflows run on a worker of their own with onceflow's workflow Interceptor."
	}
	r.p("\n## Temporal activity\n\n%d workflows at once, each running %d activities in turn, on an in-process Temporal server; medians of %d rounds, "+
		"the ratio the median of the rounds' ratios (each of a bare and a wrapped round run one after the other), with its range.%s\n\n",
		tc.workflows, tc.perWorkflow, r.b.cfg.reps, interceptor)
	r.p("| activity | activities/s |\n|---|---:|\n| bare | %.0f |\n| idempotent (`onceactivity.Register`) | %.0f |\n| ratio | %s (%.2f to %.2f) |\n",
		tc.bare, tc.wrapped, ratioText(tc.ratio()), tc.ratios[0], tc.ratios[len(tc.ratios)-1])
	bare, wrapped := tc.per["bare"], tc.per["wrapped"]
	r.p("\nPer activity, over the measured rounds: the worker's Temporal RPCs (the SDK's request metrics), Redis commands (`INFO commandstats`), " +
		"this process' CPU (worker and client) and its children's (the Temporal server, `worker`, and redis-server), from /proc at 10 ms resolution.\n\n")
	r.p("| per activity | bare | idempotent |\n|---|---:|---:|\n| client CPU µs | %.0f | %.0f |\n", bare.clientUs/bare.n, wrapped.clientUs/wrapped.n)
	row := func(kind, format string, of func(*activityCost) map[string]float64) {
		names := slices.Sorted(maps.Keys(of(wrapped)))
		for n := range maps.Keys(of(bare)) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		for _, n := range names {
			bv, wv := of(bare)[n]/bare.n, of(wrapped)[n]/wrapped.n
			if bv >= 0.005 || wv >= 0.005 {
				r.p("| %s %s | "+format+" | "+format+" |\n", kind, n, bv, wv)
			}
		}
	}
	row("CPU µs of child", "%.0f", func(c *activityCost) map[string]float64 { return c.childUs })
	row("RPC", "%.2f", func(c *activityCost) map[string]float64 { return c.rpcs })
	row("Redis", "%.2f", func(c *activityCost) map[string]float64 { return c.redis })
	return nil
}

// writePeers says why no peer library is measured.
func (r *reportRun) writePeers() {
	r.p("\n## Peers\n\n")
	r.p("The closest Go peer, `github.com/faustbrian/go-idempotency` with its Redis store, is not measured: " +
		"the Go module proxy refuses it (`go list -m github.com/faustbrian/go-idempotency@latest`: 403 Forbidden, " +
		"\"This module version is not available\"), so it cannot be a dependency of this module. " +
		"The naive code above (`SET NX PX` marker, `SET` of the response, `GET` on duplicates) runs on the same server, through the same client, with the same payload.\n")
}

// writeTargets writes the targets of the performance issue (round four,
// issue 47), each against this run's figure, and earlier rounds' figures.
func (r *reportRun) writeTargets() {
	b, results := r.b, r.results
	r.p("\n## Targets\n\n| figure | target | measured | |\n|---|---|---|---|\n")
	row := func(name, target string, got float64, format string, ok bool) {
		mark := "met"
		if !ok {
			mark = "**missed**"
		}
		r.p("| %s | %s | "+format+" | %s |\n", name, target, got, mark)
	}
	last := b.cfg.goroutines[len(b.cfg.goroutines)-1]
	first := b.cfg.goroutines[0]
	freshFloor := r.opsRatio(fresh, floor2, last)
	row(fmt.Sprintf("fresh ÷ two trivial EVALSHAs, throughput at %d goroutines", last), "≥ 0.7", freshFloor, "%.2f", freshFloor >= 0.7)
	freshCPU := results[fresh][last].clientUsPerOp
	row(fmt.Sprintf("client CPU µs per fresh operation (%d goroutines; two trivial EVALSHAs: %.1f)", last, results[floor2][last].clientUsPerOp), "≤ 40", freshCPU, "%.1f", freshCPU <= 40)
	freshRedis := results[fresh][last].redisUsPerOp
	row(fmt.Sprintf("Redis µs per fresh operation (%d goroutines)", last), "≤ 25", freshRedis, "%.1f", freshRedis <= 25)
	replayTput := min(r.opsRatio(replayHot, floor1, last), r.opsRatio(replaySpread, floor1, last))
	row(fmt.Sprintf("replay ÷ one trivial EVALSHA, default configuration, throughput at %d goroutines (the lower of hot and spread)", last), "≥ 1.2", replayTput, "%.2f", replayTput >= 1.2)
	replayTputNo := min(r.opsRatio(replayHotNo, floor1, last), r.opsRatio(replaySprNo, floor1, last))
	r.p("| the same with `redisstore.Config.NoAutoPipeline` (for comparison) | | %.2f | |\n", replayTputNo)
	renewFloor := r.renewal.pairedUsPerOp / r.renewal.floorUsPerOp
	row(fmt.Sprintf("renewal ÷ its stripped-command floor, Redis µs, same window (%d in flight)", b.cfg.inFlight), "≤ 1.1", renewFloor, "%.2f", renewFloor <= 1.1)
	c100 := float64(r.memory["COMPLETED, 100 B response"])
	row("`MEMORY USAGE`, COMPLETED with a 100 B response", "≤ 320 B", c100, "%.0f B", c100 <= 320)
	ex := float64(r.memory["EXECUTING"])
	row("`MEMORY USAGE`, EXECUTING", "≤ 280 B", ex, "%.0f B", ex <= 280)
	if b.cfg.temporal {
		tc := r.temporal
		vsBare := tc.ratio()
		row(fmt.Sprintf("idempotent Temporal activity ÷ bare activity, throughput (%d workflows at once)", tc.workflows), "≥ 0.95", vsBare, "%.2f", vsBare >= 0.95)
	}
	// The allocation targets are `go test -bench Execute`'s (the
	// executor's own); this harness adds the caller's key and, with fewer
	// operations a millisecond, fractions of the deadline timers.
	if f, rp := results[fresh][first], results[replayHot][first]; f.hasAllocations && rp.hasAllocations {
		r.p("| allocations per fresh / replay operation (this harness, %d goroutine, with the key; the target is `go test -bench Execute`'s) | ≤ 20 / ≤ 8 | %.1f / %.1f | see `go test -bench` |\n", first, f.allocs, rp.allocs)
	}
	r.p("\nEarlier rounds' figures, for comparison: fresh ÷ naive `SET NX` + `SET` %.2f; replay p50 ÷ the floor's, %d goroutine, %.2f; replay, client-side cache on, hot key ÷ one EVALSHA %.2f.\n",
		r.opsRatio(fresh, naiveFresh, last), first, r.all.ratio(replayHot, floor1, first, func(s sample) float64 { return float64(s.p50) }), r.opsRatio(replayCached, floor1, last))
}

func ratio(a, b float64) string {
	if b == 0 {
		return ""
	}
	return ratioText(a / b)
}

// ratioText prints a ratio; NaN (not measured) as nothing.
func ratioText(r float64) string {
	if math.IsNaN(r) {
		return ""
	}
	return fmt.Sprintf("%.2f", r)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

// machine describes where the run happened: CPU, Go, Redis and the
// modules that matter.
func (b *bench) machine(ctx context.Context) string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	redisVersion, _ := infoField(ctx, b.rdb, "server", "redis_version")
	mods := []string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/redis/go-redis/v9", "go.temporal.io/sdk", "go.temporal.io/server":
				mods = append(mods, d.Path+" "+d.Version)
			}
		}
	}
	return fmt.Sprintf("Machine: %s, %d CPUs (GOMAXPROCS %d), %s/%s. %s, Redis %s (one redis-server on loopback, the same client for every workload). %s.",
		cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), redisVersion, strings.Join(mods, ", "))
}
