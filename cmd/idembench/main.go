// Command idembench measures onceflow's idempotency core side by side with
// its floor and with the naive code it replaces, in one run on one
// redis-server, and prints one report with the ratios:
//
//	go run ./cmd/idembench            # about 3 minutes; docs/performance.md says what each figure means
//	go run ./cmd/idembench -short     # one repetition of each cell, shorter cells
//
// It starts its own redis-server (Debian's, on a free loopback port) unless
// -redis-url names one, and an in-process Temporal server for the activity
// comparison. Throughput and latencies are the medians of -reps
// repetitions, run in rounds (each round measures every workload once at
// each concurrency); a ratio is the median of the rounds' ratios, each of
// two cells of one round. Allocations are measured with one goroutine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "idembench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	b, err := newBench(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.close()
	return b.report(ctx, os.Stdout)
}
