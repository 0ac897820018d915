package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ErrUsage matches every *UsageError.
var ErrUsage = errors.New("usage error")

// UsageError is a command line a command cannot run: an unknown or
// malformed flag, a missing or contradicting one, an unexpected argument.
// cmd/worker prints it on standard error and exits 2, as Go's tools do.
type UsageError struct {
	// Command is the command's name, as typed after worker ("pending";
	// "worker" for the worker itself).
	Command string
	Err     error
}

func (e *UsageError) Error() string {
	help := "worker " + e.Command + " -h"
	if e.Command == "worker" {
		help = "worker -h"
	}
	msg := e.Err.Error()
	if !strings.HasPrefix(msg, e.Command+":") {
		msg = e.Command + ": " + msg
	}
	return msg + " (" + help + " lists the flags)"
}

// Is reports whether target is ErrUsage.
func (e *UsageError) Is(target error) bool { return target == ErrUsage }

// Unwrap returns the error.
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a *UsageError of command with the formatted message.
func Usagef(command, format string, args ...any) error {
	return &UsageError{Command: command, Err: fmt.Errorf(format, args...)}
}

// Help is where a command's -h goes and what it says above the flags.
type Help struct {
	// Out receives the help when -h is given; nothing else is written to
	// it by the parsing. Default: io.Discard.
	Out io.Writer
	// Synopsis is printed first: the command's usage line and what it
	// does.
	Synopsis string
}

// NewFlagSet returns a flag set for command that writes nothing itself:
// Parse prints the help when it is asked for, and turns every other error
// into a *UsageError for the caller to report.
func NewFlagSet(command string) *flag.FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args into fs (made by NewFlagSet). With -h or -help it
// prints h.Synopsis and the flags to h.Out and returns flag.ErrHelp;
// a bad flag or a positional argument is a *UsageError.
func Parse(fs *flag.FlagSet, args []string, h Help) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return PrintHelp(fs, h)
	case err != nil:
		return &UsageError{Command: fs.Name(), Err: err}
	case fs.NArg() > 0:
		return Usagef(fs.Name(), "unexpected arguments %q", fs.Args())
	}
	return nil
}

// PrintHelp prints h.Synopsis and fs's flags to h.Out and returns
// flag.ErrHelp (or the write's error).
func PrintHelp(fs *flag.FlagSet, h Help) error {
	out := h.Out
	if out == nil {
		out = io.Discard
	}
	if h.Synopsis != "" {
		if _, err := io.WriteString(out, strings.TrimRight(h.Synopsis, "\n")+"\n\nFlags:\n"); err != nil {
			return err
		}
	}
	fs.SetOutput(out)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return flag.ErrHelp
}
