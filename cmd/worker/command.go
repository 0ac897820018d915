package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/cmd/devserver"
)

// command is one subcommand of worker.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error
}

// commands are worker's subcommands, in the order -h lists them.
func commands() []command {
	operator := func(name string) func(context.Context, []string, func(string) string, io.Writer) error {
		return func(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
			return cli.RunOperator(ctx, name, args, getenv, out, nil)
		}
	}
	return []command{
		{"pending", "list the workflows waiting on a recovery decision", operator("pending")},
		{"resolve", "send a decision about a pending incident", operator("resolve")},
		{"trace", "print a workflow's timeline, incidents and decisions (reads only)", trace},
		{"reopen", "reopen a FAILED or ABANDONED record", operator("reopen")},
		{"inspect", "print one Redis record (reads only)", operator("inspect")},
		{"reuses", "list business references reused under a second key (reads only)", operator("reuses")},
		{"version", "print the version it was built at", func(_ context.Context, args []string, _ func(string) string, out io.Writer) error {
			fs := cli.NewFlagSet("version")
			if err := cli.Parse(fs, args, cli.Help{Out: out, Synopsis: "usage: worker version\n\nPrints the version it was built at."}); err != nil {
				return err
			}
			return cli.Version(out)
		}},
		{"dev-server", "run only the embedded Temporal dev server", func(ctx context.Context, args []string, _ func(string) string, out io.Writer) error {
			return devserver.Command(ctx, args, out)
		}},
	}
}

// dispatch runs the subcommand args[0] names, or the console (with -dev,
// and the development servers) when args[0] is a flag or there is none.
func dispatch(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		for _, c := range commands() {
			if c.name == args[0] {
				return c.run(ctx, args[1:], getenv, out)
			}
		}
		return cli.Usagef("worker", "unknown command %q", args[0])
	}
	return serve(ctx, args, getenv, out)
}

// workerSynopsis is worker -h's text above the console's flags.
func workerSynopsis() string {
	var b strings.Builder
	b.WriteString(`usage: worker [flags]            serve the operator console (-dev: with an embedded Temporal and Redis)
       worker COMMAND [flags]    run a command; worker COMMAND -h lists its flags

Commands:
`)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	b.WriteString("\nEvery flag falls back to an environment variable (docs/configuration.md).")
	return b.String()
}
