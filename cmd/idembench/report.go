package main

import (
	"context"
	"fmt"
	"io"
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
	p := func(format string, args ...any) { fmt.Fprintf(out, format, args...) }
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "idembench: "+format+"\n", args...) }

	p("# idembench\n\n")
	p("Command: `%s` (from the repository root), %s.\n\n", strings.Join(append([]string{"go run ./cmd/idembench"}, os.Args[1:]...), " "), time.Now().UTC().Format("2006-01-02"))
	p("%s\n\n", b.machine(ctx))

	ws, err := b.workloads(ctx)
	if err != nil {
		return err
	}
	if b.cfg.only != "" {
		ws = slices.DeleteFunc(ws, func(w workload) bool {
			return !slices.ContainsFunc(strings.Split(b.cfg.only, ","), func(s string) bool { return strings.Contains(w.name, s) })
		})
	}
	if b.cfg.cpuProfile != "" {
		f, err := os.Create(b.cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	// Rounds: each measures every workload once at each concurrency, so
	// the cells a ratio compares ran seconds apart, not a minute apart as
	// when a workload's repetitions ran back to back; each round starts
	// one workload further on, so no workload always follows the same one.
	all := cells{}
	for rep := range b.cfg.reps {
		for _, g := range b.cfg.goroutines {
			for k := range ws {
				w := ws[(k+rep)%len(ws)]
				s, err := b.measure(ctx, w, g)
				if err != nil {
					return err
				}
				all.add(w.name, g, s)
				progress("round %d of %d: %-32s %3d goroutines: %8.0f ops/s", rep+1, b.cfg.reps, w.name, g, s.opsPerSec)
			}
		}
	}
	results := map[string]map[int]sample{}
	for w, byG := range all {
		results[w] = map[int]sample{}
		for g, ss := range byG {
			results[w][g] = median(ss)
		}
	}
	opsRatio := func(w, base string, g int) float64 {
		return all.ratio(w, base, g, func(s sample) float64 { return s.opsPerSec })
	}

	if b.cfg.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if b.cfg.only != "" {
		if slices.Contains(strings.Split(b.cfg.only, ","), "renewal") {
			progress("renewal cost with %d actions in flight", b.cfg.inFlight)
			rc, err := b.measureRenewal(ctx, b.cfg.inFlight)
			if err != nil {
				return fmt.Errorf("renewal: %w", err)
			}
			p("renewal, %d in flight: %.0f renewals in %.0f script calls, %.1f client CPU µs, %.1f Redis CPU µs, %.1f Redis µs of the script, per renewal; "+
				"each call followed by its floor (the same commands, no check; %.0f leases in %.0f calls of each): the script %.1f, the floor %.1f Redis µs a lease, %s × the floor\n",
				rc.inFlight, rc.renewals, rc.calls, rc.clientUs, rc.redisCPUUs, rc.redisUsPerOp, rc.pairedLeases, rc.pairedCalls, rc.pairedUsPerOp, rc.floorUsPerOp, ratio(rc.pairedUsPerOp, rc.floorUsPerOp))
		}
		for _, w := range ws {
			for _, g := range b.cfg.goroutines {
				s := results[w.name][g]
				p("%s, %d goroutines: %.0f ops/s, p50 %s, %.1f allocs/op, %.1f Redis µs/op, %.1f client CPU µs/op\n", w.name, g, s.opsPerSec, us(s.p50), s.allocs, s.redisUsPerOp, s.clientUsPerOp)
			}
		}
		return nil
	}

	p("## Operations\n\n")
	p("Medians of %d repetitions of %v each, run in %d rounds: a round measures every workload once at each concurrency. Allocations per operation with one goroutine (they include building the record's key). ", b.cfg.reps, b.cfg.cell, b.cfg.reps)
	p("Redis µs/op is the script's (or the commands') time inside Redis, from `INFO commandstats`; client CPU µs/op is this process' CPU time (user + system) per operation, redis-server's not included. ")
	p("Ratios: the executor's fresh operations against two EVALSHAs and against the naive code, its replays against one EVALSHA; each is the median of the rounds' ratios, every one of two cells of the same round.\n\n")
	p("| workload | goroutines | ops/s | p50 | p99 | allocs/op | B/op | Redis µs/op | client CPU µs/op | ÷ floor | ÷ naive |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range ws {
		for _, g := range b.cfg.goroutines {
			s := results[w.name][g]
			allocs, bytes := "", ""
			if s.hasAllocations {
				allocs, bytes = fmt.Sprintf("%.1f", s.allocs), fmt.Sprintf("%.0f", s.bytes)
			}
			vsFloor, vsNaive := "", ""
			switch w.name {
			case fresh, twoStep, naiveFresh:
				vsFloor = ratioText(opsRatio(w.name, floor2, g))
				if w.name != naiveFresh {
					vsNaive = ratioText(opsRatio(w.name, naiveFresh, g))
				}
			case replayHot, replaySpread, replayHotNo, replaySprNo, replayCached, naiveReplay:
				vsFloor = ratioText(opsRatio(w.name, floor1, g))
				if w.name != naiveReplay {
					vsNaive = ratioText(opsRatio(w.name, naiveReplay, g))
				}
			}
			p("| %s | %d | %.0f | %s | %s | %s | %s | %.1f | %.1f | %s | %s |\n", w.name, g, s.opsPerSec, us(s.p50), us(s.p99), allocs, bytes, s.redisUsPerOp, s.clientUsPerOp, vsFloor, vsNaive)
		}
	}

	progress("renewal cost with %d actions in flight", b.cfg.inFlight)
	rc, err := b.measureRenewal(ctx, b.cfg.inFlight)
	if err != nil {
		return fmt.Errorf("renewal: %w", err)
	}
	p("\n## Renewal\n\n%d actions in flight, leases of 3 s renewed by the executor; %.0f renewals in the window, in %.0f script calls (%.1f leases a call).\n\n", rc.inFlight, rc.renewals, rc.calls, rc.renewals/max(rc.calls, 1))
	p("| per renewal | µs |\n|---|---:|\n| client CPU (user + system) | %.1f |\n| Redis CPU (`INFO cpu`) | %.1f |\n| Redis time of the script (`INFO commandstats`) | %.1f |\n",
		rc.clientUs, rc.redisCPUUs, rc.redisUsPerOp)
	p("\nIn a second window each renewal call was followed by its floor's: the same commands, every check stripped, with the same arguments, on copies of the same records (%.0f leases in %.0f calls of each).\n\n", rc.pairedLeases, rc.pairedCalls)
	p("| per lease, second window | Redis µs (`INFO commandstats`) |\n|---|---:|\n| the script | %.1f |\n| its floor | %.1f |\n| the script ÷ its floor | %s |\n",
		rc.pairedUsPerOp, rc.floorUsPerOp, ratio(rc.pairedUsPerOp, rc.floorUsPerOp))

	progress("record memory")
	mem, err := b.measureMemory(ctx)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	p("\n## Record memory\n\n| record | `MEMORY USAGE` (B) | encoding |\n|---|---:|---|\n")
	memOf := map[string]int64{}
	for _, m := range mem {
		memOf[m.what] = m.bytes
		p("| %s | %d | %s |\n", m.what, m.bytes, m.encoding)
	}

	var tc temporalCost
	if b.cfg.temporal {
		progress("Temporal: bare and idempotent activities")
		if tc, err = b.measureTemporal(ctx); err != nil {
			return fmt.Errorf("temporal: %w", err)
		}
		p("\n## Temporal activity\n\n%d workflows at once, each running %d activities in turn, on an in-process Temporal server; medians of %d rounds.\n\n",
			tc.workflows, tc.perWorkflow, b.cfg.reps)
		p("| activity | activities/s |\n|---|---:|\n| bare | %.0f |\n| idempotent (`onceactivity.Wrap`) | %.0f |\n| ratio | %s |\n", tc.bare, tc.wrapped, ratio(tc.wrapped, tc.bare))
	}

	p("\n## Peers\n\n")
	p("The closest Go peer, `github.com/faustbrian/go-idempotency` with its Redis store, is not measured: " +
		"the Go module proxy refuses it (`go list -m github.com/faustbrian/go-idempotency@latest`: 403 Forbidden, " +
		"\"This module version is not available\"), so it cannot be a dependency of this module. " +
		"The naive code above (`SET NX PX` marker, `SET` of the response, `GET` on duplicates) runs on the same server, through the same client, with the same payload.\n")

	// The targets of the performance issue (round four, issue 47), from
	// this run.
	p("\n## Targets\n\n| figure | target | measured | |\n|---|---|---|---|\n")
	row := func(name, target string, got float64, format string, ok bool) {
		mark := "met"
		if !ok {
			mark = "**missed**"
		}
		p("| %s | %s | "+format+" | %s |\n", name, target, got, mark)
	}
	last := b.cfg.goroutines[len(b.cfg.goroutines)-1]
	first := b.cfg.goroutines[0]
	freshFloor := opsRatio(fresh, floor2, last)
	row(fmt.Sprintf("fresh ÷ two trivial EVALSHAs, throughput at %d goroutines", last), "≥ 0.7", freshFloor, "%.2f", freshFloor >= 0.7)
	freshCPU := results[fresh][last].clientUsPerOp
	row(fmt.Sprintf("client CPU µs per fresh operation (%d goroutines; two trivial EVALSHAs: %.1f)", last, results[floor2][last].clientUsPerOp), "≤ 40", freshCPU, "%.1f", freshCPU <= 40)
	freshRedis := results[fresh][last].redisUsPerOp
	row(fmt.Sprintf("Redis µs per fresh operation (%d goroutines)", last), "≤ 25", freshRedis, "%.1f", freshRedis <= 25)
	replayTput := min(opsRatio(replayHot, floor1, last), opsRatio(replaySpread, floor1, last))
	row(fmt.Sprintf("replay ÷ one trivial EVALSHA, default configuration, throughput at %d goroutines (the lower of hot and spread)", last), "≥ 1.2", replayTput, "%.2f", replayTput >= 1.2)
	replayTputNo := min(opsRatio(replayHotNo, floor1, last), opsRatio(replaySprNo, floor1, last))
	p("| the same with `redisstore.Config.NoAutoPipelineReads` (for comparison) | | %.2f | |\n", replayTputNo)
	renewFloor := rc.pairedUsPerOp / rc.floorUsPerOp
	row(fmt.Sprintf("renewal ÷ its stripped-command floor, Redis µs, same window (%d in flight)", b.cfg.inFlight), "≤ 1.1", renewFloor, "%.2f", renewFloor <= 1.1)
	c100 := float64(memOf["COMPLETED, 100 B response"])
	row("`MEMORY USAGE`, COMPLETED with a 100 B response", "≤ 320 B", c100, "%.0f B", c100 <= 320)
	ex := float64(memOf["EXECUTING"])
	row("`MEMORY USAGE`, EXECUTING", "≤ 280 B", ex, "%.0f B", ex <= 280)
	if b.cfg.temporal {
		r := tc.wrapped / tc.bare
		row(fmt.Sprintf("idempotent Temporal activity ÷ bare activity, throughput (%d workflows at once)", tc.workflows), "≥ 0.95", r, "%.2f", r >= 0.95)
	}
	// The allocation targets are `go test -bench Execute`'s (the
	// executor's own); this harness adds the caller's key and, with fewer
	// operations a millisecond, fractions of the deadline timers.
	if f, r := results[fresh][first], results[replayHot][first]; f.hasAllocations && r.hasAllocations {
		p("| allocations per fresh / replay operation (this harness, %d goroutine, with the key; the target is `go test -bench Execute`'s) | ≤ 20 / ≤ 8 | %.1f / %.1f | see `go test -bench` |\n", first, f.allocs, r.allocs)
	}
	p("\nEarlier rounds' figures, for comparison: fresh ÷ naive `SET NX` + `SET` %.2f; replay p50 ÷ the floor's, %d goroutine, %.2f; replay, client-side cache on, hot key ÷ one EVALSHA %.2f.\n",
		opsRatio(fresh, naiveFresh, last), first, all.ratio(replayHot, floor1, first, func(s sample) float64 { return float64(s.p50) }), opsRatio(replayCached, floor1, last))
	p("\nThe run took %v.\n", time.Since(began).Round(time.Second))
	return nil
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
