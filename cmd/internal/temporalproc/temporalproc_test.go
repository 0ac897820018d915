package temporalproc

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	opts.Address = s.Address()
	run := startWorkflow(ctx, t, opts)
	s.Kill()

	s, err = StartWith(ctx, opts)
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, opts.Address, s.Address(), "the restarted server is on another address")
	tc := dial(ctx, t, opts)
	desc, err := tc.DescribeWorkflowExecution(ctx, "kept", "")
	require.NoError(t, err, "the workflow started before the kill is gone")
	require.Equal(t, run, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
}

func startWorkflow(ctx context.Context, t *testing.T, opts Options) string {
	tc := dial(ctx, t, opts)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "kept", TaskQueue: "nobody-polls"}, "NoSuchWorkflow")
	require.NoError(t, err)
	return run.GetRunID()
}

func dial(ctx context.Context, t *testing.T, opts Options) client.Client {
	tc, err := client.DialContext(ctx, client.Options{HostPort: opts.Address, Namespace: opts.Namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	return tc
}
