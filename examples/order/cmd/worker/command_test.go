//go:build nodev

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/cmd/cli"
)

// worker -h lists every subcommand and the worker's flags, on the writer
// it was given (standard output), and is no error.
func TestHelpListsTheCommands(t *testing.T) {
	var out bytes.Buffer
	err := dispatch(context.Background(), []string{"-h"}, func(string) string { return "" }, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("worker -h: %v, want flag.ErrHelp (exit 0)", err)
	}
	for _, c := range commands() {
		if !strings.Contains(out.String(), "  "+c.Name+" ") {
			t.Errorf("worker -h does not list %s:\n%s", c.Name, out.String())
		}
	}
	if !strings.Contains(out.String(), "-redis-url") {
		t.Errorf("worker -h does not list the worker's flags:\n%s", out.String())
	}
}

// Each subcommand has a flag set of its own: -h prints its flags to
// standard output, and a flag of another command is a usage error (exit
// 2) that prints nothing on standard output.
func TestEachCommandHasItsOwnFlags(t *testing.T) {
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", t.TempDir())
	noEnv := func(string) string { return "" }
	own := map[string]string{"pending": "-limit", "resolve": "-decision", "reopen": "-record", "inspect": "-code", "reuses": "-limit",
		"order": "-amount-cents", "ledger": "-order-id", "trace": "-idempotency-key", "api-key": "-revoke", "dev-server": "-db-file", "version": ""}
	foreign := map[string]string{"pending": "-decision", "resolve": "-limit", "reopen": "-decision", "inspect": "-task-queue", "reuses": "-decision",
		"order": "-limit", "ledger": "-decision", "trace": "-limit", "api-key": "-limit", "dev-server": "-limit", "version": "-limit"}
	for _, c := range commands() {
		var out bytes.Buffer
		err := dispatch(context.Background(), []string{c.Name, "-h"}, noEnv, &out)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "usage: worker "+c.Name) || !strings.Contains(out.String(), own[c.Name]) {
			t.Errorf("worker %s -h: %v\n%s\nwant its usage and %s on standard output", c.Name, err, out.String(), own[c.Name])
		}
		if c.Name == "pending" && strings.Contains(out.String(), "-decision") {
			t.Errorf("worker pending -h lists resolve's -decision:\n%s", out.String())
		}
		out.Reset()
		err = dispatch(context.Background(), []string{c.Name, foreign[c.Name], "x"}, noEnv, &out)
		var usage *cli.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "worker "+c.Name+" -h") || out.Len() != 0 {
			t.Errorf("worker %s %s x: %v, printed %q; want a usage error naming -h and nothing on standard output", c.Name, foreign[c.Name], err, out.String())
		}
	}
}

// Usage errors are *cli.UsageError (exit 2): an unknown command, an
// argument where none goes, a required flag missing, a flag value that
// does not parse.
func TestUsageErrors(t *testing.T) {
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", t.TempDir())
	t.Chdir(t.TempDir())
	noEnv := func(string) string { return "" }
	for _, args := range [][]string{
		{"frobnicate"},
		{"version", "extra"},
		{"ledger"},
		{"trace"},
		{"resolve", "-workflow-id", "w"},
		{"reopen"},
		{"inspect"},
		{"pending", "-limit", "0"},
		{"-lease", "soon"},
		{"-dev", "-api-account-limit", "fast"},
		{"-dev", "-api-failed-auth-limit", "0/10"},
		{},
	} {
		err := dispatch(context.Background(), args, noEnv, &bytes.Buffer{})
		if !errors.Is(err, cli.ErrUsage) {
			t.Errorf("worker %q: %v, want a usage error (exit 2)", args, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("the usage errors created %v", entries)
	}
}

// The embedded Temporal server has no authentication: -dev-temporal-address
// and dev-server's -address take a loopback address, else a usage error
// (exit 2) that names the flag that allows another, before anything
// starts; with it, the address is accepted.
func TestDevListenAddressesAreLoopbackOnly(t *testing.T) {
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", t.TempDir())
	noEnv := func(string) string { return "" }
	for _, c := range []struct {
		args  []string
		allow string
	}{
		{[]string{"-dev", "-dev-temporal-address", "0.0.0.0:7233"}, "-dev-allow-remote"},
		{[]string{"-dev", "-dev-temporal-address", ":7233"}, "-dev-allow-remote"},
		{[]string{"-dev", "-dev-temporal-address", "192.0.2.10:7233"}, "-dev-allow-remote"},
		{[]string{"-dev", "-dev-temporal-address", "dev.example:7233"}, "-dev-allow-remote"},
		{[]string{"dev-server", "-address", "0.0.0.0:7233"}, "-allow-remote"},
		{[]string{"dev-server", "-address", "[::]:0"}, "-allow-remote"},
	} {
		err := dispatch(context.Background(), c.args, noEnv, &bytes.Buffer{})
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), c.allow) || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("worker %q: %v, want a usage error naming %s and loopback", c.args, err, c.allow)
		}
	}
	if err := dispatch(context.Background(), []string{"-dev-allow-remote", "-ledger-dsn", "sqlite:never.db"}, noEnv, &bytes.Buffer{}); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "go with -dev") {
		t.Errorf("-dev-allow-remote without -dev: %v", err)
	}
	// With the flag (or on loopback) the address passes the check: this
	// nodev build then says it has no server to start.
	for _, args := range [][]string{
		{"-dev", "-dev-allow-remote", "-dev-temporal-address", "0.0.0.0:7233"},
		{"-dev", "-dev-temporal-address", "127.0.0.1:0"},
		{"-dev", "-dev-temporal-address", "localhost:7233"},
		{"dev-server", "-allow-remote", "-address", "0.0.0.0:0"},
	} {
		if err := dispatch(context.Background(), args, noEnv, &bytes.Buffer{}); err == nil || errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "nodev") {
			t.Errorf("worker %q: %v, want the address accepted (and the nodev build's refusal to start a server)", args, err)
		}
	}
}

// A console token too short to hold 32 random bytes is a usage error
// (exit 2) that says how to make one, before anything starts.
func TestShortConsoleTokenIsAUsageError(t *testing.T) {
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", t.TempDir())
	t.Chdir(t.TempDir())
	env := map[string]string{"ONCEFLOW_CONSOLE_TOKEN": "console-e2e-token"}
	for _, args := range [][]string{{"-ledger-dsn", "sqlite:never.db"}, {"-dev", "-console-token", "hunter2"}} {
		err := dispatch(context.Background(), args, func(k string) string { return env[k] }, &bytes.Buffer{})
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "-console-token") || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("worker %q with a short token: %v, want a usage error naming -console-token and how to make one", args, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("the refusal created %v", entries)
	}
}
