// Command worker runs a onceflow worker: the example order workflow and
// its idempotent charge activity, with /healthz and /readyz.
//
//	go run ./cmd/worker -dev     # embedded Temporal and Redis, nothing to install
//	ONCEFLOW_SECRET=... go run ./cmd/worker -temporal-address temporal:7233 -redis-url redis://redis:6379/0
//	go run ./cmd/worker pending -workflow-id ID          # incidents waiting for a recovery decision
//	go run ./cmd/worker resolve -workflow-id ID -record KEY -attempt N -rev N -decision retry
//	go run ./cmd/worker reopen -record KEY               # a record a fail decision left FAILED
//
// Every flag falls back to an environment variable; -h lists them.
//
// It is in a module of its own (github.com/onceflow/onceflow/cmd):
// it embeds the Temporal dev server for -dev, which a service that imports
// the library must not get in its build. Build with -tags nodev for a
// production binary without it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/onceflow/onceflow/cmd/internal/devserver"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/worker"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if len(os.Args) > 1 && slices.Contains(worker.OperatorCommands, os.Args[1]) {
		return worker.RunOperator(ctx, os.Args[1], os.Args[2:], os.Getenv, os.Stdout)
	}
	cfg, err := worker.ParseFlags("worker", os.Args[1:], os.Getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if cfg.Dev {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
		stop, err := devserver.Start(&cfg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	cfg.Logger = log
	provider := order.NewProvider()
	cfg.Register = func(r worker.Registry) error { return order.Register(r, provider) }
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
