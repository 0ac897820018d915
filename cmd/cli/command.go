package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Subcommand is one subcommand of a worker binary: `worker NAME [flags]`.
type Subcommand struct {
	Name, Summary string
	Run           func(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error
}

// OperatorCommandList returns the operator commands RunOperator runs
// (pending, resolve, reopen, inspect, reuses), in the order -h lists them,
// with ev plugged into pending and resolve (nil: no evidence source). A
// service's own binary lists them beside its commands, as cmd/worker and
// the order example's binary do.
func OperatorCommandList(ev *EvidenceFlags) []Subcommand {
	op := func(name, summary string) Subcommand {
		return Subcommand{Name: name, Summary: summary, Run: func(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
			return RunOperator(ctx, name, args, getenv, out, ev)
		}}
	}
	return []Subcommand{
		op("pending", "list the workflows waiting on a recovery decision"),
		op("resolve", "send a decision about a pending incident"),
		op("reopen", "reopen a FAILED or ABANDONED record"),
		op("inspect", "print one Redis record (reads only)"),
		op("reuses", "list business references reused under a second key (reads only)"),
	}
}

// VersionCommand is the version command: it prints Version.
func VersionCommand() Subcommand {
	return Subcommand{Name: "version", Summary: "print the version it was built at", Run: func(_ context.Context, args []string, _ func(string) string, out io.Writer) error {
		fs := NewFlagSet("version")
		if err := Parse(fs, args, Help{Out: out, Synopsis: "usage: worker version\n\nPrints the version it was built at."}); err != nil {
			return err
		}
		return Version(out)
	}}
}

// Dispatch runs the command of cmds that args[0] names; when args[0] is a
// flag, or there are no args, it runs serve with all of args. An unknown
// command is a *UsageError.
func Dispatch(ctx context.Context, cmds []Subcommand, args []string, getenv func(string) string, out io.Writer,
	serve func(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error,
) error {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		for _, c := range cmds {
			if c.Name == args[0] {
				return c.Run(ctx, args[1:], getenv, out)
			}
		}
		return Usagef("worker", "unknown command %q", args[0])
	}
	return serve(ctx, args, getenv, out)
}

// Synopsis is a worker binary's -h text above its flags: usage, the line
// that says what running it with flags does, and the commands of cmds.
func Synopsis(serves string, cmds []Subcommand) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: worker [flags]            %s\n       worker COMMAND [flags]    run a command; worker COMMAND -h lists its flags\n\nCommands:\n", serves)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	_ = tw.Flush()
	b.WriteString("\nEvery flag falls back to an environment variable (docs/configuration.md).")
	return b.String()
}
