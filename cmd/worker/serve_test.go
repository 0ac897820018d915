//go:build nodev

package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
)

// worker serves the console for a namespace's workflows of any service
// (here a workflow no worker of this repository knows): / leads to it, it
// lists the running workflow, and the workflow's page is its history.
func TestServeTheConsoleForAnyWorkflow(t *testing.T) {
	t.Parallel()
	srv, tc := startTemporal(t)
	run, err := tc.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "transfer-T-42", TaskQueue: "transfers"}, "Transfer", map[string]any{"reference": "T-42"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tc.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test over") }()
	get := startConsole(t, "-temporal-address", srv.Address(), "-namespace", srv.Namespace(), "-task-queue", "transfers")
	if code, loc, _ := get("/"); code != http.StatusFound || loc != "/console" {
		t.Errorf("GET /: %d %q, want a redirect to /console", code, loc)
	}
	if code, _, body := get("/console"); code != http.StatusOK || !strings.Contains(body, `href="/console/workflows/transfer-T-42"`) ||
		!strings.Contains(body, "task queue <code>transfers</code>") {
		t.Errorf("GET /console: %d %s", code, body)
	}
	code, _, body := get("/console/workflows/transfer-T-42")
	if code != http.StatusOK || !strings.Contains(body, "started Transfer") || !strings.Contains(body, "RUNNING") || !strings.Contains(body, "T-42") {
		t.Errorf("the workflow's page: %d %s", code, body)
	}
}
