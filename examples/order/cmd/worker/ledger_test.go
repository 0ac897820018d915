//go:build nodev

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/examples/order/ledger"
)

// The reading commands create no file: not without a ledger named, not
// for a SQLite ledger that does not exist, not under -dev before the dev
// worker ran; and an existing ledger is read.
func TestReadingCommandsCreateNoLedger(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	state := filepath.Join(t.TempDir(), "state")
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", state)
	noEnv := func(string) string { return "" }
	ctx := context.Background()
	var out bytes.Buffer

	err := showLedger(ctx, []string{"-order-id", "o-1"}, noEnv, &out)
	if err == nil || !strings.Contains(err.Error(), "-ledger-dsn") || !strings.Contains(err.Error(), "LEDGER_DSN") {
		t.Errorf("no ledger named: %v, want it to name -ledger-dsn and LEDGER_DSN", err)
	}
	missing := filepath.Join(cwd, "missing.db")
	if err := showLedger(ctx, []string{"-order-id", "o-1", "-ledger-dsn", "sqlite:" + missing}, noEnv, &out); err == nil || !strings.Contains(err.Error(), "no ledger at") {
		t.Errorf("a missing SQLite ledger: %v", err)
	}
	if err := showLedger(ctx, []string{"-order-id", "o-1", "-dev"}, noEnv, &out); err == nil || !strings.Contains(err.Error(), "ONCEFLOW_DEV_STATE_DIR") {
		t.Errorf("-dev before the dev worker ran: %v", err)
	}
	if err := trace(ctx, []string{"-order-id", "o-1", "-dev"}, noEnv, &out); err == nil || !strings.Contains(err.Error(), "no -dev worker is running") {
		t.Errorf("trace -dev before the dev worker ran: %v", err)
	}
	// Given the servers, trace -dev reads the dev ledger, which is missing.
	addrs := []string{"-temporal-address", "127.0.0.1:1", "-namespace", "default", "-redis-url", "redis://127.0.0.1:1/0"}
	if err := trace(ctx, append([]string{"-order-id", "o-1", "-dev"}, addrs...), noEnv, &out); err == nil || !strings.Contains(err.Error(), "no ledger at") {
		t.Errorf("trace -dev with the servers given, before the dev worker ran: %v", err)
	}
	if entries, err := os.ReadDir(cwd); err != nil || len(entries) != 0 {
		t.Errorf("the working directory has %v (%v), want nothing", entries, err)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dev state directory was created: %v", err)
	}

	// An existing ledger is read, and read-only.
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := ledger.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateOrder(ctx, ledger.Order{ID: "o-1", CustomerID: "c-1", AmountCents: 100, Currency: "USD", WorkflowID: "order-o-1"}); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	out.Reset()
	if err := showLedger(ctx, []string{"-order-id", "o-1", "-ledger-dsn", "sqlite:" + path}, noEnv, &out); err != nil || !strings.Contains(out.String(), "o-1") {
		t.Fatalf("an existing ledger: %q, %v", out.String(), err)
	}
	dsn := "sqlite:" + path
	ro, err := openLedgerToRead(ctx, "ledger", &dsn, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.CreateOrder(ctx, ledger.Order{ID: "o-2", CustomerID: "c-1", AmountCents: 100, Currency: "USD", WorkflowID: "order-o-2"}); err == nil {
		t.Fatal("a reading command's ledger took a write")
	}
}

// Outside -dev the serving worker has no default ledger: it names the
// flag, and creates nothing, before it connects to anything.
func TestServeNeedsALedgerOutsideDev(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	env := map[string]string{"ONCEFLOW_SECRET": strings.Repeat("s", 32)}
	err := serve(context.Background(), nil, func(k string) string { return env[k] }, io.Discard)
	if !errors.Is(err, errNoServeLedger) || !strings.Contains(err.Error(), "LEDGER_DSN") {
		t.Fatalf("err = %v, want errNoServeLedger", err)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Fatalf("the working directory has %v", entries)
	}
}
