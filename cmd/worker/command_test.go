//go:build nodev

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// worker -h lists every subcommand and the console's flags, and is no
// error; the console outside -dev needs a token.
func TestHelpListsTheCommands(t *testing.T) {
	t.Parallel()
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
	for _, f := range []string{"-console-token", "-task-queue", "-temporal-address", "-dev-reset"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("worker -h does not list %s", f)
		}
	}
	err = dispatch(context.Background(), nil, func(string) string { return "" }, &out)
	if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "-console-token") {
		t.Errorf("worker without -dev or a token: %v, want a usage error naming -console-token", err)
	}
}

// trace prints any workflow's trail: its incidents with the resolve
// command (with -dev when the trace was), its decisions and its timeline,
// every stored value quoted when it is not printable text.
func TestTracePrintsTheTrail(t *testing.T) {
	t.Parallel()
	hostile := "x\nforged\x1b[2J"
	tr := workflowTrail{WorkflowID: "transfer-1", RunID: "r-1", Status: "RUNNING",
		History: operator.History{Type: "Transfer", Timeline: []operator.Event{
			{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Step: "Withdraw", State: "failed", Attempt: 2, Actor: "w-1", Detail: hostile}}},
		Pending: []idemwf.PendingRecovery{{Activity: "Withdraw", RecordKey: "withdraw:d1:aa", Incident: idemwf.Incident{RecordKey: "withdraw:d1:aa", Attempt: 1, Rev: 2},
			Details: onceflow.EffectUnknownDetails{DownstreamKey: "T-42"}, RetentionPassed: true}}}
	var out bytes.Buffer
	if err := writeTrail(&out, tr, true); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"workflow transfer-1 run r-1: RUNNING (Transfer)", "worker resolve -dev -workflow-id transfer-1 -record withdraw:d1:aa -attempt 1 -rev 2", "    downstream key: T-42\n",
		"    downstream's retention of the key: expired (past it, a retry needs -override-retention)\n",
		"Withdraw  failed  attempt 2  w-1: " + `"x\nforged\x1b[2J"`} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if strings.Contains(s, "\x1b") {
		t.Errorf("a control character reached the output:\n%q", s)
	}
}
