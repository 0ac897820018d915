//go:build nodev

package main

// Operations for a service nothing in this repository implements (issue
// 45): its incidents are found without a task queue, by `worker pending`
// and the console; Attach refuses a namespace that cannot find them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/cmd/temporalproc"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// startTemporal starts a dev Temporal server for the test (skipping it
// without a development build to run) and dials its namespace.
func startTemporal(t *testing.T) (*temporalproc.Server, client.Client) {
	t.Helper()
	if os.Getenv(temporalproc.EnvBinary) == "" {
		t.Skip("needs a development build in " + temporalproc.EnvBinary + " for its dev-server (scripts/test builds one)")
	}
	srv, err := temporalproc.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv, dial(t, srv, srv.Namespace())
}

// dial is a client of srv's namespace ns.
func dial(t *testing.T, srv *temporalproc.Server, ns string) client.Client {
	t.Helper()
	tc, err := client.DialContext(t.Context(), client.Options{HostPort: srv.Address(), Namespace: ns, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	return tc
}

// consoleToken is the test consoles' token.
const consoleToken = "5f0c3b8e2a7d4c1b9e6f0a3d8c2b7e4f1a9d6c3b0e8f5a2d7c4b1e9f6a3d0c8b"

// startConsole runs `worker` (the console) with args and the test token on
// a free loopback port until the test ends, and returns a GET of its
// pages: status, Location, body.
func startConsole(t *testing.T, args ...string) func(path string) (int, string, string) {
	t.Helper()
	get, _ := startConsoleWithPost(t, args...)
	return get
}

// startConsoleWithPost is startConsole, with a POST of a form too.
func startConsoleWithPost(t *testing.T, args ...string) (get func(path string) (int, string, string), post func(path string, form url.Values) (int, string, string)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, append(args, "-http", addr, "-console-token", consoleToken), func(string) string { return "" }, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve after its context ended: %v", err)
		}
	})
	do := func(method, path string, form url.Values) (int, string, string) {
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(form.Encode()))
		req.Header.Set("Authorization", "Bearer "+consoleToken)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	get = func(path string) (int, string, string) { return do(http.MethodGet, path, nil) }
	post = func(path string, form url.Values) (int, string, string) { return do(http.MethodPost, path, form) }
	waitFor(t, "the console to answer", func() bool {
		select {
		case err := <-served:
			t.Fatalf("serve returned %v", err)
		default:
		}
		code, _, _ := get("/healthz")
		return code == http.StatusOK
	})
	return get, post
}

// waitFor polls cond (visibility, a server starting: nothing this test can
// be signalled of) until it holds, for a minute at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// command runs a worker command against srv's namespace, as typed.
func command(srv *temporalproc.Server, args ...string) (string, error) {
	var out bytes.Buffer
	args = append([]string{args[0], "-temporal-address", srv.Address(), "-namespace", srv.Namespace()}, args[1:]...)
	err := dispatch(context.Background(), args, func(string) string { return "" }, &out)
	return out.String(), err
}

// runService runs a service's SDK worker of queue, with onceflow attached
// to tc and a Redis of its own (Attach, the SDK's own worker.New) and what
// register registers, until the test ends.
func runService(t *testing.T, tc client.Client, queue string, register func(w sdkworker.Worker, once *worker.Attached)) {
	t.Helper()
	rdb := redistest.NewClient(t, redistest.Start(t).Addr())
	once, err := worker.Attach(t.Context(), tc, rdb, worker.AttachConfig{Secret: []byte("any service's secret, 32 bytes or more"), KeyNamespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	w := sdkworker.New(tc, queue, sdkworker.Options{Interceptors: once.Interceptors()})
	register(w, once)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Stop()
		if err := once.Close(); err != nil {
			t.Errorf("once.Close: %v", err)
		}
	})
}

// A service's own types, which nothing in the repository implements.
type (
	ledgerEntry struct {
		Account string `json:"account"`
		Cents   int    `json:"cents"`
	}
	postedEntry struct {
		EntryID string `json:"entryId"`
	}
)

// reconcileBooks is the service's workflow, as written for Temporal alone:
// it posts one entry, then tells the auditor (an activity that returns only
// an error).
func reconcileBooks(ctx workflow.Context, e ledgerEntry) (postedEntry, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var p postedEntry
	if err := workflow.ExecuteActivity(ctx, "Acme.PostEntry", e).Get(ctx, &p); err != nil {
		return p, err
	}
	return p, workflow.ExecuteActivity(ctx, "Acme.NotifyAuditor", p).Get(ctx, nil)
}

// TestPendingAndTheConsoleFindAnyService (issue 45): a workflow type
// nothing in the repository implements (Acme.ReconcileBooks on a task
// queue of its own, on Attach and the SDK's own worker), whose activity's
// plain error after acting makes its effect unknown, waits on a decision;
// `worker pending` and the console, given no task queue, list it. Then
// `worker resolve`: fail without -reason is refused; a retry is applied,
// and sent again under its request ID says it was already applied; a
// completed takes the post's result. The error-only activity that follows
// is completed without -result, which sent again to the workflow it
// completed says it was already applied; the workflow's page then shows
// COMPLETED.
func TestPendingAndTheConsoleFindAnyService(t *testing.T) {
	t.Parallel()
	srv, tc := startTemporal(t)
	queue := "acme-books-" + redistest.Namespace(t)
	var posts, notes atomic.Int32
	runService(t, tc, queue, func(w sdkworker.Worker, once *worker.Attached) {
		w.RegisterWorkflowWithOptions(reconcileBooks, workflow.RegisterOptions{Name: "Acme.ReconcileBooks"})
		onceactivity.Register(w, once.Activities, func(_ context.Context, e ledgerEntry) (postedEntry, error) {
			posts.Add(1)
			return postedEntry{}, errors.New("ledger: connection reset after the entry was sent")
		}, onceactivity.Name("Acme.PostEntry"), onceactivity.Code("acme-post-entry"))
		onceactivity.Register(w, once.Activities, func(_ context.Context, p postedEntry) error {
			notes.Add(1)
			return errors.New("auditor: 502 after the note was sent")
		}, onceactivity.Name("Acme.NotifyAuditor"), onceactivity.Code("acme-notify-auditor"))
	})
	wfID := "books-" + redistest.Namespace(t)
	wf, err := tc.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: wfID, TaskQueue: queue}, "Acme.ReconcileBooks", ledgerEntry{Account: "A-7", Cents: 1200})
	if err != nil {
		t.Fatal(err)
	}

	var list []operator.Waiting
	waitFor(t, "worker pending to list the workflow", func() bool {
		out, err := command(srv, "pending", "-json")
		list = nil
		return err == nil && json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 && len(list[0].Pending) == 1
	})
	first := list[0].Pending[0]
	if w := list[0]; w.WorkflowID != wfID || w.Type != "Acme.ReconcileBooks" || w.TaskQueue != queue || first.Activity != "Acme.PostEntry" || !strings.Contains(first.ResultType, "postedEntry") {
		t.Fatalf("worker pending lists %+v", list)
	}
	table, err := command(srv, "pending")
	if err != nil || !strings.Contains(table, wfID) || !strings.Contains(table, "Acme.PostEntry") || !strings.Contains(table, "decide with: worker resolve -workflow-id "+wfID) {
		t.Fatalf("worker pending: %v\n%s", err, table)
	}

	get := startConsole(t, "-temporal-address", srv.Address(), "-namespace", srv.Namespace())
	code, _, body := get("/console")
	if code != http.StatusOK || !strings.Contains(body, `<section class="incident" data-workflow="`+wfID+`">`) || !strings.Contains(body, "Acme.PostEntry in <code>"+wfID+"</code>") ||
		strings.Contains(body, "listing the pending recoveries failed") {
		t.Fatalf("the console without a task queue: %d %s", code, body)
	}

	incident := func(inc idemwf.Incident, decision string, more ...string) []string {
		return append([]string{"resolve", "-workflow-id", wfID, "-record", inc.RecordKey, "-attempt", fmt.Sprint(inc.Attempt), "-rev", fmt.Sprint(inc.Rev), "-decision", decision}, more...)
	}
	if _, err := command(srv, incident(first.Incident, "fail")...); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "-decision fail needs -reason") {
		t.Fatalf("fail without -reason: %v, want a usage error", err)
	}
	retry := incident(first.Incident, "retry", "-request-id", "req-retry-"+wfID, "-reason", "the ledger shows no entry")
	if out, err := command(srv, retry...); err != nil || !strings.HasPrefix(out, "applied: retry for "+first.Incident.String()) {
		t.Fatalf("the retry: %q, %v", out, err)
	}
	if out, err := command(srv, retry...); err != nil || out != fmt.Sprintf("already applied by request req-retry-%s: retry for %s in %s; nothing changed\n", wfID, first.Incident, wfID) {
		t.Fatalf("the retry sent again: %q, %v; want it said already applied", out, err)
	}
	next := func(what string, after idemwf.Incident) idemwf.PendingRecovery {
		var p []idemwf.PendingRecovery
		waitFor(t, what, func() bool {
			var err error
			p, err = operator.PendingRecoveries(t.Context(), tc, wfID, "")
			return err == nil && len(p) == 1 && p[0].Incident != after
		})
		return p[0]
	}
	second := next("the retried post's incident", first.Incident)
	posted := incident(second.Incident, "completed", "-result", `{"entryId":"E-7"}`, "-reason", "the ledger shows E-7")
	if out, err := command(srv, posted...); err != nil || !strings.HasPrefix(out, "applied: completed for "+second.Incident.String()) {
		t.Fatalf("completed: %q, %v", out, err)
	}
	note := next("the note's incident", second.Incident)
	if note.Activity != "Acme.NotifyAuditor" || !note.NoResult {
		t.Fatalf("the note's incident: %+v; want an error-only activity's", note)
	}
	if table, err := command(srv, "pending"); err != nil || !strings.Contains(table, "  none  ") || strings.Contains(table, "-result") {
		t.Fatalf("worker pending for an error-only activity: %v\n%s", err, table)
	}
	noted := incident(note.Incident, "completed", "-request-id", "req-note-"+wfID, "-reason", "the auditor has the note")
	if out, err := command(srv, noted...); err != nil || !strings.HasPrefix(out, "applied: completed for "+note.Incident.String()) {
		t.Fatalf("completed without -result: %q, %v", out, err)
	}
	var got postedEntry
	if err := wf.Get(t.Context(), &got); err != nil || got.EntryID != "E-7" || posts.Load() != 2 || notes.Load() != 1 {
		t.Fatalf("the workflow returned %+v, %v after %d posts and %d notes; want E-7 after 2 and 1", got, err, posts.Load(), notes.Load())
	}
	if out, err := command(srv, noted...); err != nil || out != fmt.Sprintf("already applied by request req-note-%s: completed for %s in %s; nothing changed\n", wfID, note.Incident, wfID) {
		t.Fatalf("completed sent again to the workflow it completed: %q, %v; want it said already applied", out, err)
	}
	code, _, body = get("/console/workflows/" + wfID)
	if code != http.StatusOK || !strings.Contains(body, `<strong class="status">COMPLETED</strong>`) || !strings.Contains(body, "decision: completed") || strings.Contains(body, "RUNNING") {
		t.Fatalf("the workflow's page after the decision: %d %s", code, body)
	}
}

// TestAttachRefusesANamespaceWithoutTheAttribute: on a real server, Attach
// refuses a namespace without OnceflowPending, and one where it is a
// Keyword, each with the command that registers it in that namespace, as
// `worker pending` does; the test server's namespace, which has it (as
// -dev's), attaches.
func TestAttachRefusesANamespaceWithoutTheAttribute(t *testing.T) {
	t.Parallel()
	srv, tc := startTemporal(t)
	rdb := redistest.NewClient(t, redistest.Start(t).Addr())
	cfg := worker.AttachConfig{Secret: []byte("any service's secret, 32 bytes or more"), KeyNamespace: redistest.Namespace(t)}
	attach := func(c client.Client) error {
		once, err := worker.Attach(t.Context(), c, rdb, cfg)
		if err == nil {
			err = once.Close()
		}
		return err
	}
	if err := attach(tc); err != nil {
		t.Fatalf("Attach where the attribute is registered: %v", err)
	}
	newNamespace := func(name string) client.Client {
		if _, err := tc.WorkflowService().RegisterNamespace(t.Context(), &workflowservice.RegisterNamespaceRequest{
			Namespace: name, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		return dial(t, srv, name)
	}
	suffix := redistest.Namespace(t)
	bare, keyword := "bare-"+suffix, "keyword-"+suffix
	clients := map[string]client.Client{bare: newNamespace(bare), keyword: newNamespace(keyword)}
	var addErr error
	waitFor(t, "the Keyword attribute", func() bool {
		_, addErr = tc.OperatorService().AddSearchAttributes(t.Context(), &operatorservice.AddSearchAttributesRequest{Namespace: keyword,
			SearchAttributes: map[string]enumspb.IndexedValueType{idemwf.PendingSearchAttribute: enumspb.INDEXED_VALUE_TYPE_KEYWORD}})
		var nf *serviceerror.NamespaceNotFound
		return !errors.As(addErr, &nf) // a new namespace is not known everywhere at once
	})
	if addErr != nil {
		t.Fatal(addErr)
	}
	for ns, c := range clients {
		var err error
		waitFor(t, "namespace "+ns, func() bool {
			err = attach(c)
			var nf *serviceerror.NamespaceNotFound
			return !errors.As(err, &nf)
		})
		register := "`temporal operator search-attribute create --name OnceflowPending --type Int --namespace " + ns + "`"
		if !errors.Is(err, operator.ErrPendingAttributeMissing) || !strings.Contains(err.Error(), register) {
			t.Errorf("Attach in namespace %s: %v; want a refusal naming %s", ns, err, register)
		}
		if ns == keyword && !strings.Contains(err.Error(), "is a Keyword, not an Int") {
			t.Errorf("Attach in namespace %s: %v; want it to say the attribute is a Keyword", ns, err)
		}
		if ns == bare {
			var out bytes.Buffer
			err := dispatch(t.Context(), []string{"pending", "-temporal-address", srv.Address(), "-namespace", ns}, func(string) string { return "" }, &out)
			if !errors.Is(err, operator.ErrPendingAttributeMissing) || !strings.Contains(err.Error(), register) {
				t.Errorf("worker pending in namespace %s: %v; want an error naming %s", ns, err, register)
			}
		}
	}
}

// chargeWorkflow is another service's workflow: one charge.
func chargeWorkflow(ctx workflow.Context, ref string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var id string
	err := workflow.ExecuteActivity(ctx, "Acme.Charge", ref).Get(ctx, &id)
	return id, err
}

// TestTheActivitysReconcileIsAnyServicesEvidence (issue 45): a service's
// activity declares its own Reconcile; its charge acts and then fails, so
// it waits on a decision. The console offers to ask the downstream now
// and, asked, shows the Reconcile's answer as the evidence; `worker
// pending -ask` asks too and prints the decision it implies; the decision
// completes the workflow with the reconciled result.
func TestTheActivitysReconcileIsAnyServicesEvidence(t *testing.T) {
	t.Parallel()
	srv, tc := startTemporal(t)
	queue := "acme-charges-" + redistest.Namespace(t)
	var charges atomic.Int32
	runService(t, tc, queue, func(w sdkworker.Worker, once *worker.Attached) {
		w.RegisterWorkflowWithOptions(chargeWorkflow, workflow.RegisterOptions{Name: "Acme.ChargeOnce"})
		onceactivity.Register(w, once.Activities, func(_ context.Context, ref string) (string, error) {
			charges.Add(1)
			return "", errors.New("gateway: connection reset after the charge was sent")
		}, onceactivity.Name("Acme.Charge"), onceactivity.Reconcile(func(_ context.Context, ref string, _ onceflow.Record) (string, bool, error) {
			return "ch-" + ref, charges.Load() > 0, nil
		}))
	})
	wfID := "charge-" + redistest.Namespace(t)
	wf, err := tc.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: wfID, TaskQueue: queue}, "Acme.ChargeOnce", "r1")
	if err != nil {
		t.Fatal(err)
	}
	var p []idemwf.PendingRecovery
	waitFor(t, "the incident", func() bool {
		p, err = operator.PendingRecoveries(t.Context(), tc, wfID, "")
		return err == nil && len(p) == 1
	})
	if !p[0].Reconcile || p[0].ActionError == nil || !strings.Contains(p[0].ActionError.Message, "connection reset") {
		t.Fatalf("incident %+v; want one whose activity declares a Reconcile, showing the action's error", p[0])
	}

	get, post := startConsoleWithPost(t, "-temporal-address", srv.Address(), "-namespace", srv.Namespace())
	page := "/console/workflows/" + wfID
	if code, _, body := get(page); code != http.StatusOK || !strings.Contains(body, "Ask the downstream now") || !strings.Contains(body, "connection reset after the charge was sent") {
		t.Fatalf("the workflow's page: %d %s", code, body)
	}
	inc := p[0].Incident
	if code, loc, body := post("/console/ask", url.Values{"workflow_id": {wfID}, "record": {inc.RecordKey}, "attempt": {fmt.Sprint(inc.Attempt)},
		"rev": {fmt.Sprint(inc.Rev)}, "page": {"workflows/" + wfID}}); code != http.StatusSeeOther {
		t.Fatalf("asking: %d %s %s", code, loc, body)
	}
	if code, _, body := get(page); code != http.StatusOK || !strings.Contains(body, "Acme.Charge&#39;s Reconcile found the effect") || !strings.Contains(body, `<strong class="implies">completed</strong>`) {
		t.Fatalf("the workflow's page after asking: %d %s", code, body)
	}
	table, err := command(srv, "pending", "-ask")
	if err != nil || !strings.Contains(table, "Acme.Charge's Reconcile found the effect") || !strings.Contains(table, "implies completed") {
		t.Fatalf("worker pending -ask: %v\n%s", err, table)
	}
	if _, err := command(srv, "resolve", "-workflow-id", wfID, "-record", inc.RecordKey, "-attempt", fmt.Sprint(inc.Attempt), "-rev", fmt.Sprint(inc.Rev),
		"-decision", "completed", "-result", `"ch-r1"`, "-reason", "the gateway's lookup shows ch-r1"); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := wf.Get(t.Context(), &id); err != nil || id != "ch-r1" || charges.Load() != 1 {
		t.Fatalf("the workflow returned %q, %v after %d charges; want ch-r1 after one", id, err, charges.Load())
	}
}
