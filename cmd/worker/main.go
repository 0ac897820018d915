// Command worker is onceflow's operator binary for any Temporal service
// whose activities onceflow wraps: the development servers, the operator
// console, and the operator commands, standing on the library alone.
//
//	go run ./cmd/worker -dev      # embedded Temporal (127.0.0.1:7233) and Redis, kept across restarts, and the console on 127.0.0.1:8080
//	go run ./cmd/worker -temporal-address temporal:7233 -namespace payments -task-queue transfers -console-token …   # the console for a service's workflows
//	go run ./cmd/worker pending -dev                    # every workflow waiting on a recovery decision
//	go run ./cmd/worker resolve -workflow-id ID -record KEY -attempt N -rev N -decision retry
//	go run ./cmd/worker trace -workflow-id ID           # a workflow's timeline, incidents and decisions
//	go run ./cmd/worker inspect -record KEY             # one Redis record
//	go run ./cmd/worker reopen -record KEY              # a record a fail decision left FAILED
//	go run ./cmd/worker dev-server                      # only the embedded Temporal server (no Temporal CLI needed)
//	go run ./cmd/worker version                         # the version it was built at
//
// Every flag falls back to an environment variable; -h lists them. Given
// -dev, the commands find the running -dev process's Temporal and Redis in
// the endpoints file it writes to the dev state directory. A service's own
// worker connects to the same servers (its own client.Dial and SDK worker,
// or worker.New). The order example has a binary of its own that runs the
// whole order system on these servers: go run ./examples/order/cmd/worker
// -dev.
//
// It is in a module of its own (github.com/onceflow/onceflow/cmd): it
// embeds the Temporal dev server for -dev, which a service that imports
// the library must not get in its build. Build with -tags nodev for a
// binary without it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

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
