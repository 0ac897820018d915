package devstate

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The endpoints a -dev worker writes are what the commands read; without
// them the commands are told no worker runs, and nothing is created.
func TestEndpointsRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", dir)
	if _, err := ReadEndpoints(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("ReadEndpoints before any worker = %v, want ErrNotRunning", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadEndpoints created the state directory: %v", err)
	}
	got, err := Dir()
	if err != nil || got != dir {
		t.Fatalf("Dir = %q, %v", got, err)
	}
	want := Endpoints{TemporalAddress: "127.0.0.1:7233", Namespace: "default", RedisURL: "redis://127.0.0.1:1234/0", PID: 42, Started: time.Unix(1, 0).UTC()}
	if err := WriteEndpoints(dir, want); err != nil {
		t.Fatal(err)
	}
	if e, err := ReadEndpoints(); err != nil || e != want {
		t.Fatalf("ReadEndpoints = %+v, %v; want %+v", e, err, want)
	}
	if err := RemoveEndpoints(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEndpoints(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("after RemoveEndpoints: %v, want ErrNotRunning", err)
	}
}

// One -dev worker per state directory.
func TestLockKeepsASecondWorkerOff(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no lock here")
	}
	t.Parallel()
	dir := t.TempDir()
	unlock, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock = %v, want ErrLocked", err)
	}
	unlock()
	unlock2, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	unlock2()
}

// Reset deletes the state, and nothing else.
func TestResetDeletesTheState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{TemporalDB, TemporalDB + "-wal", LedgerDB, EndpointsFile, LayoutFile, filepath.Join(RedisDir, "appendonly.aof"), "mine.txt"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Reset(dir); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 || left[0].Name() != "mine.txt" {
		t.Fatalf("left after Reset: %v, want only mine.txt", left)
	}
}

// A state directory of a build whose records are in another layout (an
// older build wrote no layout file; a later one may name another) is
// refused in words that say to run -dev-reset; an empty one, and one this
// build marked, pass; Reset deletes the state and the mark.
func TestAStateOfAnotherRecordLayoutIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := CheckLayout(dir); err != nil {
		t.Fatalf("an empty state directory: %v", err)
	}
	for _, name := range []string{TemporalDB, LedgerDB} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, RedisDir), 0o700); err != nil {
		t.Fatal(err)
	}
	err := CheckLayout(dir)
	if !errors.Is(err, ErrOlderLayout) || !strings.Contains(err.Error(), "-dev-reset") {
		t.Fatalf("a state without a layout (an older build's): %v, want ErrOlderLayout saying to run -dev-reset", err)
	}
	if err := os.WriteFile(filepath.Join(dir, LayoutFile), []byte("idem:v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckLayout(dir); !errors.Is(err, ErrOlderLayout) || !strings.Contains(err.Error(), "-dev-reset") || !strings.Contains(err.Error(), `"idem:v1"`) {
		t.Fatalf("a state of the layout idem:v1: %v, want ErrOlderLayout naming it and -dev-reset", err)
	}
	if err := WriteLayout(dir); err != nil {
		t.Fatal(err)
	}
	if err := CheckLayout(dir); err != nil {
		t.Fatalf("a state this build marked: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, LayoutFile)); err != nil {
		t.Fatal(err)
	}
	if err := Reset(dir); err != nil {
		t.Fatal(err)
	}
	if err := CheckLayout(dir); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
	if err := WriteLayout(dir); err != nil {
		t.Fatal(err)
	}
	if err := Reset(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, LayoutFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Reset left the layout file: %v", err)
	}
}
