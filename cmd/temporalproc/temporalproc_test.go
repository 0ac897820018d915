package temporalproc

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// A server on a SQLite file, killed with SIGKILL and started again on the
// same address and file, still has the workflow started before the kill:
// what cmd/chaos's temporal-kill phase rests on.
func TestKillKeepsHistoryOnDBFile(t *testing.T) {
	if os.Getenv(EnvBinary) == "" {
		t.Skip("needs a development build of cmd/worker in " + EnvBinary + " (scripts/test builds one)")
	}
	ctx := t.Context()
	opts := Options{DBFile: filepath.Join(t.TempDir(), "temporal.db"), Namespace: "onceflow-kill-test"}
	s, err := StartWith(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Address = s.Address()
	run := startWorkflow(ctx, t, opts)
	s.Kill()

	s, err = StartWith(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.Address() != opts.Address {
		t.Fatalf("the restarted server is on %s, want %s", s.Address(), opts.Address)
	}
	tc := dial(ctx, t, opts)
	desc, err := tc.DescribeWorkflowExecution(ctx, "kept", "")
	if err != nil {
		t.Fatalf("the workflow started before the kill is gone: %v", err)
	}
	if got := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); got != run {
		t.Fatalf("run %s after the restart, want %s", got, run)
	}
}

func startWorkflow(ctx context.Context, t *testing.T, opts Options) string {
	tc := dial(ctx, t, opts)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "kept", TaskQueue: "nobody-polls"}, "NoSuchWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	return run.GetRunID()
}

func dial(ctx context.Context, t *testing.T, opts Options) client.Client {
	tc, err := client.DialContext(ctx, client.Options{HostPort: opts.Address, Namespace: opts.Namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	return tc
}
