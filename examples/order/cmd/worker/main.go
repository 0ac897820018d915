// Command worker runs a onceflow worker with the example order system:
// the PlaceOrder saga over a SQL ledger and a gateway simulator, and the
// quick start's ChargeOrder, with /healthz and /readyz.
//
//	go run ./examples/order/cmd/worker -dev     # embedded Temporal (127.0.0.1:7233) and Redis, a SQLite ledger, all kept across restarts: nothing to install
//	go run ./examples/order/cmd/worker -dev -dev-reset                 # the same, starting from nothing
//	ONCEFLOW_SECRET=... go run ./examples/order/cmd/worker -temporal-address temporal:7233 -redis-url redis://redis:6379/0 -ledger-dsn postgres://…
//	go run ./examples/order/cmd/worker order -customer c-1 -item A-1:2 -amount-cents 1999   # place an order
//	go run ./examples/order/cmd/worker ledger -dev -order-id ID        # its rows: order, payments, gateway calls (-ledger-dsn outside -dev)
//	go run ./examples/order/cmd/worker trace -order-id ID              # every layer that deduplicates it: HTTP key, workflow, steps' records, ledger
//	go run ./examples/order/cmd/worker inspect -record KEY             # one Redis record
//	go run ./examples/order/cmd/worker pending                         # every workflow waiting on a recovery decision
//	go run ./examples/order/cmd/worker resolve -workflow-id ID -record KEY -attempt N -rev N -decision retry
//	go run ./examples/order/cmd/worker reopen -record KEY               # a record a fail decision left FAILED
//	go run ./examples/order/cmd/worker version                         # the version it was built at
//	go run ./examples/order/cmd/worker dev-server                      # only the embedded Temporal server (no Temporal CLI needed)
//
// Every flag falls back to an environment variable; -h lists them. Given
// -dev, the commands find the running -dev worker's Temporal and Redis in
// the endpoints file it writes to the dev state directory, so nothing has
// to be exported: go run ./examples/order/cmd/worker order -dev, pending -dev, trace -dev.
//
// Outside -dev the worker needs -ledger-dsn (LEDGER_DSN); ledger and
// trace only read it (-ledger-dsn, or -dev for the dev ledger) and create
// nothing.
//
// It is in the order example's module (github.com/onceflow/onceflow/examples/order)
// and builds on the binaries' module (github.com/onceflow/onceflow/cmd:
// its flags, operator commands and -dev's embedded servers), as a
// service's own binary would. Build with -tags nodev for a production
// binary without the embedded Temporal server, and without the gateway
// simulator's fault knobs (simulate.go); -tags nodev,simulate keeps the
// knobs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// The ledger's database drivers: pure Go SQLite, and pgx for PostgreSQL.
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/onceflow/onceflow/cmd/cli"
)

func main() {
	err := run()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, cli.ErrUsage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	return dispatch(ctx, os.Args[1:], os.Getenv, os.Stdout)
}
