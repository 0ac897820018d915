package main

import (
	"context"
	"io"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/cmd/devserver"
)

// commands are worker's subcommands, in the order -h lists them.
func commands() []cli.Subcommand {
	cmds := []cli.Subcommand{{Name: "trace", Summary: "print a workflow's timeline, incidents and decisions (reads only)", Run: trace}}
	cmds = append(cmds, cli.OperatorCommandList(nil)...)
	return append(cmds, cli.VersionCommand(), cli.Subcommand{Name: "dev-server", Summary: "run only the embedded Temporal dev server",
		Run: func(ctx context.Context, args []string, _ func(string) string, out io.Writer) error {
			return devserver.Command(ctx, args, out)
		}})
}

// dispatch runs the subcommand args[0] names, or the console (with -dev,
// and the development servers) when args[0] is a flag or there is none.
func dispatch(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	return cli.Dispatch(ctx, commands(), args, getenv, out, serve)
}

// workerSynopsis is worker -h's text above the console's flags.
func workerSynopsis() string {
	return cli.Synopsis("serve the operator console (-dev: with an embedded Temporal and Redis)", commands())
}
