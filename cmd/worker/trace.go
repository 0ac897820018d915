package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

const traceSynopsis = `usage: worker trace -workflow-id ID [-run-id ID] [-dev] [-json] [Temporal flags]

Prints what a workflow's history and queries say of it, for any wrapped
activity: its status, the incidents it waits on (with the resolve command
to send), the decisions it applied, and its timeline (each step's
scheduling, attempts, failures and completion with the worker that ran it,
each decision with who sent it). It changes nothing.`

// workflowTrail is what trace prints.
type workflowTrail struct {
	WorkflowID     string                   `json:"workflow_id"`
	RunID          string                   `json:"run_id"`
	Status         string                   `json:"status"`
	History        operator.History         `json:"history"`
	HistoryError   string                   `json:"history_error,omitempty"`
	Pending        []idemwf.PendingRecovery `json:"pending,omitempty"`
	Decisions      []idemwf.Decided         `json:"decisions,omitempty"`
	DecisionsError string                   `json:"decisions_error,omitempty"`
}

// closedQueryTimeout bounds the query of a closed workflow's decisions,
// which waits for a worker to replay it.
const closedQueryTimeout = 5 * time.Second

// trace prints a workflow's trail (workflowTrail).
func trace(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := cli.NewFlagSet("trace")
	var c worker.Config
	cli.TemporalFlags(fs, &c, getenv)
	wfID := fs.String("workflow-id", "", "the workflow (required)")
	runID := fs.String("run-id", "", "its run (default: the latest)")
	dev := fs.Bool("dev", getenv("ONCEFLOW_DEV") == "true", "talk to the running -dev process's Temporal (from its endpoints file) where no address is given (ONCEFLOW_DEV=true)")
	asJSON := fs.Bool("json", false, "print the trail as JSON")
	if err := cli.Parse(fs, args, cli.Help{Out: out, Synopsis: traceSynopsis}); err != nil {
		return err
	}
	if *wfID == "" {
		return cli.Usagef("trace", "-workflow-id is required")
	}
	if *dev {
		if err := cli.UseDevEndpoints(&c, cli.Needs{Temporal: true}, "trace"); err != nil {
			return err
		}
	}
	cli.Defaults(&c)
	tc, err := cli.Dial(ctx, c, "trace")
	if err != nil {
		return err
	}
	defer tc.Close()
	d, err := tc.DescribeWorkflowExecution(ctx, *wfID, *runID)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("trace: no workflow %s in the namespace %s", *wfID, c.Namespace)
	case err != nil:
		return fmt.Errorf("trace: describe workflow %s: %w", *wfID, err)
	}
	info := d.GetWorkflowExecutionInfo()
	t := workflowTrail{WorkflowID: *wfID, RunID: info.GetExecution().GetRunId(), Status: operator.Status(info.GetStatus())}
	if t.History, err = operator.ReadHistory(ctx, tc, t.WorkflowID, t.RunID, d); err != nil {
		t.HistoryError = err.Error()
	}
	running := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if t.History.Closed != "" {
		t.Status, running = t.History.Closed, false // it closed after the description: as its timeline ends
	}
	if running {
		p, err := operator.PendingRecoveries(ctx, tc, t.WorkflowID, t.RunID)
		if err != nil && !errors.Is(err, operator.ErrNotOnceflow) {
			return fmt.Errorf("trace: %w", err)
		}
		t.Pending = p
	}
	qctx, cancel := context.WithTimeout(ctx, closedQueryTimeout)
	t.Decisions, err = operator.Decisions(qctx, tc, t.WorkflowID, t.RunID)
	cancel()
	if err != nil {
		t.DecisionsError = "the decisions could not be read (is a worker running to answer the query?): " + err.Error()
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(t)
	}
	return writeTrail(out, t, *dev)
}

// writeTrail prints t, every value read from Temporal through
// cli.Printable; dev adds -dev to the commands it prints.
func writeTrail(out io.Writer, t workflowTrail, dev bool) error {
	q := cli.Printable
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(out, format, args...) }
	p("workflow %s run %s: %s (%s)\n", q(t.WorkflowID), q(t.RunID), q(t.Status), q(t.History.Type))
	for _, pr := range t.Pending {
		p("  pending: %s %s since %s\n", q(pr.Activity), q(pr.Incident.String()), pr.Since.UTC().Format(time.RFC3339))
		if k := pr.Details.DownstreamKey; k != "" {
			p("    downstream key: %s\n", q(k))
		}
		if left := cli.RetentionLeft(pr.RetentionEnds, pr.RetentionPassed, time.Now()); left != "-" {
			p("    downstream's retention of the key: %s (past it, a retry needs -override-retention)\n", left)
		}
		p("    decide with: %s -workflow-id %s -record %s -attempt %d -rev %d -decision completed|retry|fail -reason TEXT\n",
			cli.Command("resolve", dev), q(t.WorkflowID), q(pr.RecordKey), pr.Incident.Attempt, pr.Incident.Rev)
	}
	for _, d := range t.Decisions {
		r := d.Resolution
		p("  decided: %s %s at %s via %s by %s: %s\n", q(string(r.Decision)), q(d.Incident.String()), d.AppliedAt.UTC().Format(time.RFC3339), q(d.Via), q(r.By), q(r.Reason))
	}
	if t.DecisionsError != "" {
		p("  decisions: %s\n", q(t.DecisionsError))
	}
	p("timeline\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, e := range t.History.Timeline {
		attempt := ""
		if e.Attempt > 0 {
			attempt = fmt.Sprintf("attempt %d", e.Attempt)
		}
		detail := ""
		if e.Detail != "" {
			detail = ": " + q(e.Detail)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s%s\n", e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), q(e.Step), q(e.State), attempt, q(e.Actor), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if t.HistoryError != "" {
		p("  %s\n", q(t.HistoryError))
	}
	return nil
}
