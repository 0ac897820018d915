package worker

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow/idemstore"

	"github.com/onceflow/onceflow/idemstore/driver"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// OperatorCommands are the commands RunOperator knows.
var OperatorCommands = []string{"pending", "resolve", "reopen", "inspect"}

// RunOperator runs an operator command:
//
//	pending [-task-queue Q] [-limit N] [-json]
//	    lists every running workflow of the task queue that waits on a
//	    decision: one line per incident, with the resolve command to send
//	    (visibility lists the running workflows, newest first, at most
//	    -limit of them; each is asked PendingQuery)
//	pending -workflow-id ID [-run-id ID]
//	    prints the incidents the workflow waits on a decision for, and the
//	    decisions it refused, as JSON
//	resolve -workflow-id ID [-run-id ID] -record KEY -attempt N -rev N -decision completed|retry|fail [-result JSON] [-reason TEXT] [-signal]
//	    sends the decision about that incident as an Update and prints
//	    whether it was applied or refused (with -signal: as a signal, fire
//	    and forget)
//	reopen -record KEY [-reason TEXT]
//	    reopens a record a fail decision left FAILED, or an ABANDONED one
//	    no workflow waits on (an idemhttp key whose outcome an operator
//	    has found to be "no effect"), so the next request or attempt runs
//	    (it talks to Redis: -redis-url, -key-namespace)
//	inspect -record KEY | -code CODE -key KEY [-dev] [-json]
//	    prints one Redis record: state, attempt, rev, lease and TTL left,
//	    codec and response size; -code and -key name an activity's
//	    business key, digested with ONCEFLOW_SECRET (-dev: the dev
//	    secret) and -namespace. A corrupt record is reported and the
//	    command fails.
//
// pending and resolve take the Temporal connection flags of the worker
// (-temporal-address, -namespace, the TLS files and the API key), each
// falling back to the same environment variable.
func RunOperator(ctx context.Context, command string, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(out)
	env := envOr(getenv)
	var c Config
	registerTemporalFlags(fs, &c, env)
	wfID := fs.String("workflow-id", "", "the waiting workflow's ID (pending, resolve)")
	runID := fs.String("run-id", "", "its run ID (default: the latest run)")
	record := fs.String("record", "", "the record key of the incident, as pending lists it (resolve, reopen)")
	attempt := fs.Int64("attempt", 0, "resolve: the incident's attempt, as pending lists it")
	rev := fs.Int64("rev", 0, "resolve: the incident's rev, as pending lists it")
	decision := fs.String("decision", "", "resolve: completed, retry or fail")
	result := fs.String("result", "", "resolve completed: the activity's result as JSON")
	reason := fs.String("reason", "", "resolve, reopen: why, for the history and the record")
	signal := fs.Bool("signal", false, "resolve: send the decision as a signal, without waiting for an answer")
	fs.StringVar(&c.TaskQueue, "task-queue", env("TEMPORAL_TASK_QUEUE", DefaultTaskQueue), "pending: the task queue whose workflows are listed (TEMPORAL_TASK_QUEUE)")
	limit := fs.Int("limit", 100, "pending: list at most this many running workflows")
	asJSON := fs.Bool("json", false, "pending, inspect: print JSON")
	fs.StringVar(&c.RedisURL, "redis-url", env("REDIS_URL", DefaultRedisURL), "reopen, inspect: Redis URL (REDIS_URL)")
	fs.StringVar(&c.KeyNamespace, "key-namespace", env("ONCEFLOW_KEY_NAMESPACE", DefaultKeyNamespace), "reopen, inspect: prefix of every Redis key (ONCEFLOW_KEY_NAMESPACE)")
	code := fs.String("code", "", "inspect: the operation code of the record")
	key := fs.String("key", "", "inspect: the business key of the record (with -code)")
	dev := fs.Bool("dev", env("ONCEFLOW_DEV", "") == "true", "inspect: digest keys with the -dev secret when ONCEFLOW_SECRET is unset")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", command, fs.Args())
	}
	switch command {
	case "pending":
		if *wfID == "" {
			if *limit <= 0 {
				return errors.New("pending: -limit must be positive")
			}
			return pendingList(ctx, c, *limit, *asJSON, out)
		}
		return pending(ctx, c, *wfID, *runID, out)
	case "resolve":
		res := idemwf.Resolution{RecordKey: *record, Attempt: *attempt, Rev: *rev, Decision: idemwf.Decision(*decision), Reason: *reason}
		if err := validateResolution(&res, *result); err != nil {
			return err
		}
		if *wfID == "" {
			return errors.New("resolve: -workflow-id is required")
		}
		return resolve(ctx, c, *wfID, *runID, res, *signal, out)
	case "reopen":
		return reopen(ctx, c, *record, *reason, out)
	case "inspect":
		return inspect(ctx, c, getenv, *record, *code, *key, *dev, *asJSON, out)
	}
	return fmt.Errorf("unknown operator command %q (want %s)", command, strings.Join(OperatorCommands, ", "))
}

// validateResolution checks what the command can before anything is sent:
// the incident is named, the decision is known, a completed result is
// non-empty JSON.
func validateResolution(res *idemwf.Resolution, result string) error {
	if _, err := idemstore.ParseRef(res.RecordKey); err != nil {
		return fmt.Errorf("resolve: -record: %w (copy it from the pending list)", err)
	}
	if res.Attempt <= 0 || res.Rev <= 0 {
		return errors.New("resolve: -attempt and -rev are required: they name the incident, as the pending list shows them")
	}
	switch res.Decision {
	case idemwf.Completed:
		if strings.TrimSpace(result) == "" || !json.Valid([]byte(result)) {
			return errors.New("resolve: -decision completed needs -result with the activity's result as valid JSON (the pending list says its type)")
		}
		res.Result = json.RawMessage(result)
	case idemwf.Retry, idemwf.Fail:
		if result != "" {
			return fmt.Errorf("resolve: -result goes with -decision completed only, not %s", res.Decision)
		}
	default:
		return fmt.Errorf("resolve: -decision must be completed, retry or fail, got %q", res.Decision)
	}
	return nil
}

func dial(ctx context.Context, c Config, command string) (client.Client, error) {
	opts, err := c.TemporalClientOptions()
	if err != nil {
		return nil, err
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: Temporal at %s is not reachable (check -temporal-address and the TLS flags): %w", command, opts.HostPort, err)
	}
	return tc, nil
}

// PendingReport is what the pending command prints.
type PendingReport struct {
	WorkflowID string                   `json:"workflowId"`
	Pending    []idemwf.PendingRecovery `json:"pending"`
	Refused    idemwf.RefusalsReport    `json:"refused"`
}

func pending(ctx context.Context, c Config, wfID, runID string, out io.Writer) error {
	tc, err := dial(ctx, c, "pending")
	if err != nil {
		return err
	}
	defer tc.Close()
	rep := PendingReport{WorkflowID: wfID}
	v, err := tc.QueryWorkflow(ctx, wfID, runID, idemwf.PendingQuery)
	if err != nil {
		return fmt.Errorf("pending: query %s: %w", wfID, err)
	}
	if err := v.Get(&rep.Pending); err != nil {
		return fmt.Errorf("pending: decode the answer: %w", err)
	}
	if v, err := tc.QueryWorkflow(ctx, wfID, runID, idemwf.RefusalsQuery); err == nil {
		_ = v.Get(&rep.Refused)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// Waiting is one running workflow that waits on decisions, as pending
// without -workflow-id lists it.
type Waiting struct {
	WorkflowID string                   `json:"workflowId"`
	RunID      string                   `json:"runId"`
	Type       string                   `json:"workflowType"`
	Pending    []idemwf.PendingRecovery `json:"pending"`
}

// ListPending lists the running workflows of a task queue in a namespace
// that wait on a decision, inspecting at most limit of them, newest first
// (what `worker pending` prints and the console shows).
func ListPending(ctx context.Context, tc client.Client, namespace, taskQueue string, limit int) ([]Waiting, error) {
	c := Config{Namespace: namespace, TaskQueue: taskQueue}
	query := fmt.Sprintf("ExecutionStatus = 'Running' AND TaskQueue = '%s'", strings.ReplaceAll(c.TaskQueue, "'", "''"))
	out := []Waiting{}
	var token []byte
	var errs []error // workflows that could not be asked
	seen := 0
	for seen < limit {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.Namespace, Query: query, PageSize: int32(min(limit-seen, 100)), NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("pending: list the running workflows of %s: %w", c.TaskQueue, err)
		}
		for _, e := range resp.GetExecutions() {
			if seen == limit {
				break
			}
			seen++
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			v, err := tc.QueryWorkflow(ctx, id, run, idemwf.PendingQuery)
			var failed *serviceerror.QueryFailed
			var gone *serviceerror.NotFound
			switch {
			case errors.As(err, &failed), errors.As(err, &gone):
				// Not a onceflow workflow (no such query), or it just
				// ended: nothing to decide there.
				continue
			case err != nil:
				errs = append(errs, fmt.Errorf("workflow %s: %w", id, err))
				continue
			}
			var p []idemwf.PendingRecovery
			if err := v.Get(&p); err != nil {
				errs = append(errs, fmt.Errorf("workflow %s: its %s answer does not decode: %w", id, idemwf.PendingQuery, err))
				continue
			}
			if len(p) == 0 {
				continue
			}
			out = append(out, Waiting{WorkflowID: id, RunID: run, Type: e.GetType().GetName(), Pending: p})
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("pending: %d running workflows of %s could not be asked what they wait on, so the list may be short: %w",
			len(errs), c.TaskQueue, errors.Join(errs...))
	}
	return out, nil
}

func pendingList(ctx context.Context, c Config, limit int, asJSON bool, out io.Writer) error {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	tc, err := dial(ctx, c, "pending")
	if err != nil {
		return err
	}
	defer tc.Close()
	list, listErr := ListPending(ctx, tc, c.Namespace, c.TaskQueue, limit)
	if list == nil {
		return listErr
	}
	// What could be read is printed; the workflows that could not be
	// asked make the command fail after it.
	if err := printPending(list, c.TaskQueue, asJSON, out); err != nil {
		return err
	}
	return listErr
}

// printPending prints the waiting workflows as JSON or a table.
func printPending(list []Waiting, taskQueue string, asJSON bool, out io.Writer) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(out, "no running workflow of task queue %s waits on a decision\n", taskQueue)
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW ID\tACTIVITY\tRECORD\tATTEMPT\tREV\tSTATE\tRESULT TYPE\tSINCE")
	for _, w := range list {
		for _, p := range w.Pending {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", w.WorkflowID, p.Activity, p.Incident.RecordKey, p.Incident.Attempt, p.Incident.Rev,
				p.Details.State, p.ResultType, p.Since.UTC().Format(time.RFC3339))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	w, p := list[0], list[0].Pending[0]
	_, err := fmt.Fprintf(out, "\ndecide with: worker resolve -workflow-id %s -record %s -attempt %d -rev %d -decision completed -result '<%s as JSON>' (or retry, or fail -reason TEXT)\n",
		w.WorkflowID, p.Incident.RecordKey, p.Incident.Attempt, p.Incident.Rev, p.ResultType)
	return err
}

func resolve(ctx context.Context, c Config, wfID, runID string, res idemwf.Resolution, signal bool, out io.Writer) error {
	tc, err := dial(ctx, c, "resolve")
	if err != nil {
		return err
	}
	defer tc.Close()
	if signal {
		if err := tc.SignalWorkflow(ctx, wfID, runID, idemwf.ResolveSignal, res); err != nil {
			return fmt.Errorf("resolve: signal %s: %w", wfID, err)
		}
		_, err := fmt.Fprintf(out, "sent %s for %s to %s as a signal: no answer comes back; run pending to see it applied or refused\n", res.Decision, res.Incident(), wfID)
		return err
	}
	reply, err := Resolve(ctx, tc, wfID, runID, res)
	var refused *DecisionRefusedError
	switch {
	case errors.As(err, &refused):
		_, _ = fmt.Fprintln(out, refused.Message)
		return fmt.Errorf("resolve: the workflow %s %s", wfID, refused.Message)
	case err != nil:
		return fmt.Errorf("resolve: %w", err)
	case reply.Signalled:
		_, err := fmt.Fprintf(out, "this Temporal server does not take Updates; sent %s for %s to %s as a signal: run pending to see it applied or refused\n", res.Decision, res.Incident(), wfID)
		return err
	}
	_, err = fmt.Fprintf(out, "applied: %s for %s in %s\n", reply.Decision, reply.Applied, wfID)
	return err
}

// ResolveReply is how a decision was delivered.
type ResolveReply struct {
	idemwf.DecisionReply
	// Signalled: the server takes no Updates, so the decision went as the
	// onceflow.resolve signal and no answer came back.
	Signalled bool
}

// DecisionRefusedError is a decision the workflow refused (stale,
// duplicate, no such pending incident, a result that does not decode).
type DecisionRefusedError struct {
	WorkflowID string
	// Message is the workflow's reason, for the operator.
	Message string
	Err     error
}

func (e *DecisionRefusedError) Error() string {
	return "the workflow " + e.WorkflowID + " refused the decision: " + e.Message
}

func (e *DecisionRefusedError) Unwrap() error { return e.Err }

// Resolve sends an operator's decision to a waiting workflow as the
// onceflow.resolve Update and returns the workflow's answer; a server that
// takes no Updates gets the onceflow.resolve signal instead. A refusal is
// a *DecisionRefusedError. The worker resolve command and the console
// both use it.
func Resolve(ctx context.Context, tc client.Client, wfID, runID string, res idemwf.Resolution) (ResolveReply, error) {
	handle, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: wfID, RunID: runID, UpdateName: idemwf.ResolveUpdate, Args: []any{res},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var reply ResolveReply
	if err == nil {
		err = handle.Get(ctx, &reply.DecisionReply)
	}
	var unimplemented *serviceerror.Unimplemented
	var ae *temporal.ApplicationError
	switch {
	case err == nil:
		return reply, nil
	case errors.As(err, &ae) && ae.Type() == idemwf.TypeDecisionRefused:
		return reply, &DecisionRefusedError{WorkflowID: wfID, Message: ae.Error(), Err: err}
	case errors.As(err, &unimplemented):
		if err := tc.SignalWorkflow(ctx, wfID, runID, idemwf.ResolveSignal, res); err != nil {
			return reply, fmt.Errorf("signal %s: %w", wfID, err)
		}
		reply.Signalled = true
		return reply, nil
	}
	return reply, fmt.Errorf("update %s: %w", wfID, err)
}

func reopen(ctx context.Context, c Config, record, reason string, out io.Writer) error {
	ref, err := idemstore.ParseRef(record)
	if err != nil {
		return fmt.Errorf("reopen: -record: %w", err)
	}
	store, closeStore, err := OpenStore(c)
	if err != nil {
		return err
	}
	defer closeStore()
	obs, err := store.Inspect(ctx, ref)
	if err != nil {
		return fmt.Errorf("reopen: read %s: %w", record, err)
	}
	if !obs.Found {
		return fmt.Errorf("reopen: there is no record %s under the key namespace %q (expired, or check -key-namespace)", record, c.KeyNamespace)
	}
	r := obs.Record
	if r.State != idemstore.StateFailed && r.State != idemstore.StateAbandoned {
		return fmt.Errorf("reopen: %s is %s: only a FAILED or ABANDONED record is reopened", record, r.State)
	}
	if reason == "" {
		reason = "reopened by an operator"
	}
	res, err := store.Resolve(ctx, driver.ResolveRequest{Ref: ref, Attempt: r.Attempt, Rev: r.Rev, Target: idemstore.StateFailedRetryable,
		Reason: reason, TTL: max(r.TTL, time.Minute)})
	if err != nil {
		return fmt.Errorf("reopen: %s: %w", record, err)
	}
	switch o := res.(type) {
	case driver.Transitioned, driver.AlreadyTransitioned:
	case driver.Refused:
		return fmt.Errorf("reopen: %s moved on (%s); run it again", record, o.Reason)
	case driver.Missing:
		return fmt.Errorf("reopen: %s expired before it was reopened: there is nothing to reopen, the next attempt claims it afresh", record)
	default:
		return fmt.Errorf("reopen: %s: %w: %T", record, idemstore.ErrUnexpectedReply, res)
	}
	_, err = fmt.Fprintf(out, "reopened %s: the next attempt runs (it was %s: %s)\n", record, r.State, r.Reason)
	return err
}
