package main

import (
	"context"
	"io"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/cmd/devserver"
)

// commands are worker's subcommands, in the order -h lists them: the
// order system's own, then the operator commands with the ledger as their
// evidence.
func commands() []cli.Subcommand {
	cmds := []cli.Subcommand{
		{Name: "order", Summary: "place an order with the running worker", Run: placeOrder},
		{Name: "ledger", Summary: "print an order's ledger rows (reads only)", Run: showLedger},
		{Name: "trace", Summary: "print every layer that deduplicates an order (reads only)", Run: trace},
		{Name: "api-key", Summary: "issue or revoke an order API key of an account", Run: apiKey},
	}
	cmds = append(cmds, cli.OperatorCommandList(ledgerEvidence())...)
	return append(cmds, cli.VersionCommand(), cli.Subcommand{Name: "dev-server", Summary: "run only the embedded Temporal dev server",
		Run: func(ctx context.Context, args []string, _ func(string) string, out io.Writer) error {
			return devserver.Command(ctx, args, out)
		}})
}

// dispatch runs the subcommand args[0] names, or the worker itself when
// args[0] is a flag or there is none.
func dispatch(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	return cli.Dispatch(ctx, commands(), args, getenv, out, serve)
}

// workerSynopsis is worker -h's text above the worker's flags.
func workerSynopsis() string {
	return cli.Synopsis("run the worker (the example order system; -dev: with its own Temporal and Redis)", commands())
}
