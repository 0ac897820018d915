// Command chaos runs the example order system under faults and checks
// that no card was charged twice, no money went unrecorded and no order
// was lost:
//
//	go run ./examples/order/cmd/chaos -short                 # 40 orders, 5 s phases: about 3 minutes
//	go run ./examples/order/cmd/chaos -orders 1000 -phase-duration 30s -ledger postgres   # every phase, its own PostgreSQL
//	go run ./examples/order/cmd/chaos -orders 300 -ledger-dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./examples/order/cmd/chaos -phases worker-kill,redis-wipe -phase-duration 30s -seed 7
//	go run ./examples/order/cmd/chaos -short -redis sentinel -redis-durability replicas
//	go run ./examples/order/cmd/chaos -short -redis cluster -phases redis-failover,redis-primary-kill,redis-reshard
//
// It starts, all on 127.0.0.1 and all its own: the Temporal dev server
// (`worker dev-server`, a process of its own, its history in a SQLite file
// of the temporary directory), Redis (-redis: standalone,
// a redis-server child process with AOF on and appendfsync always on a
// free port; sentinel, a primary with two replicas watched by three
// Sentinels; cluster, three primaries with a replica each; the workers'
// -redis-durability is -redis-durability), and -workers processes of the real cmd/worker binary (built
// once into a temporary directory, or -worker-bin) on one ledger: a
// SQLite file in the temporary directory (-ledger sqlite), a PostgreSQL
// cluster of the run's own (-ledger postgres: initdb'd into a temporary
// directory, run as the user postgres when chaos runs as root, on a free
// loopback port), or the ledger of -ledger-dsn.
// A worker that exits (the crash knob, a SIGKILL) is started again.
//
// Then it places -orders orders through POST /orders of the workers' HTTP
// APIs with Idempotency-Key headers, retrying like a careful client
// (network errors, 5xx, 409 in progress, 202 processing), some keys sent by
// two concurrent clients at once (-duplicates), while it injects one fault
// per phase (-phases, each -phase-duration long): a worker SIGKILLed, a
// worker SIGSTOPped past its lease and continued, each gateway knob
// (-gateway-timeout-after-charge, -gateway-crash-after-charge,
// -gateway-fail-before-charge, -gateway-timeout-before-charge,
// -gateway-decline-rate, -gateway-latency), the Temporal server killed -9
// and started again on the same address and SQLite file (temporal-kill),
// under -ledger postgres PostgreSQL restarted (postgres-restart) and the
// workers' backends terminated inside their transactions
// (postgres-kill-backends), then the topology's faults: standalone,
// toxiproxy faults on each worker's links to Redis, Temporal and
// PostgreSQL (latency and jitter, reset connections, half-open
// connections, bandwidth limits, a worker cut off from Redis or from
// Temporal), Redis killed -9 and restarted from its AOF, Redis restarted
// with its data deleted, Redis paused (CLIENT PAUSE … ALL or WRITE), and
// workers that crash after charging while Redis is wiped
// (crash-then-wipe); sentinel and cluster, a failover (SENTINEL FAILOVER,
// CLUSTER FAILOVER), a primary killed -9 (a replica promoted, the old
// primary started again empty as a replica), a reshard of 500 slots
// (cluster), and workers that crash after charging while the primary is
// killed (crash-then-failover).
//
// Then it settles: the faults stop, every worker restarts without knobs,
// the workflows that wait on an operator's decision (`worker pending
// -json`) are decided from the gateway's truth (`worker resolve`: completed
// with the charge when the ledger's gateway_calls show one for the
// operation key, completed declined when they show only a decline, else
// retry), every key is sent once more, and it waits (at most -settle) for
// every workflow to end.
//
// Last it checks every order of the run in the ledger and prints a table:
// double charges, duplicate payment rows, money taken at the gateway (less
// refunds) against money recorded, orders lost or unfinished, keys that
// named two orders, keys stuck in ABANDONED (a client was told 409
// effect unknown: the key needs `worker reopen`, even if a later Redis
// wipe let it through), keys left without an answer, and per phase the
// faults injected, the failovers, and the charge steps done whose record
// is gone from Redis at the end (a completion Redis acknowledged and lost:
// a check under -redis-durability replicas, a figure otherwise). It exits
// with status 1 when a check fails. Worker logs, every answer
// (answers.jsonl), its own log and summary.json go to -out (default a new
// temporary directory, kept; its path is printed); the binary, the SQLite
// ledger and the Redis data are removed unless -keep. Every child process
// is killed when it ends, on an error or on SIGINT. Linux (it signals
// processes); it needs redis-server on PATH (Debian's redis-server).
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
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second ^C kills at once; the children die with us (Pdeathsig)
	}()
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	return runChaos(ctx, cfg, os.Stdout, os.Stderr)
}
