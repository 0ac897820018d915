//go:build nodev

package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/onceflow/onceflow/cmd/temporalproc"
)

// worker serves the console for a namespace's workflows of any service
// (here a workflow no worker of this repository knows): / leads to it, it
// lists the running workflow, and the workflow's page is its history.
func TestServeTheConsoleForAnyWorkflow(t *testing.T) {
	if os.Getenv(temporalproc.EnvBinary) == "" {
		t.Skip("needs a development build in " + temporalproc.EnvBinary + " for its dev-server (scripts/test builds one)")
	}
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv, err := temporalproc.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	tc, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "transfer-T-42", TaskQueue: "transfers"}, "Transfer", map[string]any{"reference": "T-42"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "5f0c3b8e2a7d4c1b9e6f0a3d8c2b7e4f1a9d6c3b0e8f5a2d7c4b1e9f6a3d0c8b"
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, []string{"-temporal-address", srv.Address(), "-namespace", srv.Namespace(), "-task-queue", "transfers",
			"-http", addr, "-console-token", token}, func(string) string { return "" }, io.Discard)
	}()
	get := func(path string) (int, string, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if code, _, _ := get("/healthz"); code == http.StatusOK {
			break
		}
		select {
		case err := <-served:
			t.Fatalf("serve returned %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the console did not answer in a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	_ = tc.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "test over")
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve after its context ended: %v", err)
	}
}
