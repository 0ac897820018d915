package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	idemwf "github.com/onceflow/onceflow/workflow"
)

// Waiting is one running workflow that waits on decisions.
type Waiting struct {
	WorkflowID string                   `json:"workflowId"`
	RunID      string                   `json:"runId"`
	Type       string                   `json:"workflowType"`
	Pending    []idemwf.PendingRecovery `json:"pending"`
}

// ListPending lists the running workflows of taskQueue in namespace that
// wait on a decision, asking at most limit of them (visibility lists the
// running workflows newest first; each is asked idemwf.PendingQuery).
//
// A workflow that does not answer the query (ErrNotOnceflow) or one that
// ended meanwhile is skipped. Any other workflow that could not be asked
// makes ListPending return the list it could read together with an error
// saying which: a short list is never taken for a complete one. An error
// listing the workflows returns a nil list.
func ListPending(ctx context.Context, tc client.Client, namespace, taskQueue string, limit int) ([]Waiting, error) {
	switch {
	case namespace == "":
		return nil, errors.New("operator: ListPending needs the namespace")
	case taskQueue == "":
		return nil, errors.New("operator: ListPending needs the task queue")
	case limit <= 0:
		return nil, fmt.Errorf("operator: ListPending: the limit must be positive, got %d", limit)
	}
	query := fmt.Sprintf("ExecutionStatus = 'Running' AND TaskQueue = '%s'", strings.ReplaceAll(taskQueue, "'", "''"))
	out := []Waiting{}
	var token []byte
	var errs []error // workflows that could not be asked
	seen := 0
	for seen < limit {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, Query: query, PageSize: int32(min(limit-seen, 100)), NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("operator: list the running workflows of %s: %w", taskQueue, err)
		}
		for _, e := range resp.GetExecutions() {
			if seen == limit {
				break
			}
			seen++
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			p, err := PendingRecoveries(ctx, tc, id, run)
			var gone *serviceerror.NotFound
			switch {
			case errors.Is(err, ErrNotOnceflow), errors.As(err, &gone):
				// Not a onceflow workflow, or it just ended: nothing
				// to decide there.
				continue
			case err != nil:
				errs = append(errs, err)
				continue
			case len(p) == 0:
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
		return out, fmt.Errorf("operator: %d running workflows of %s could not be asked what they wait on, so the list may be short: %w",
			len(errs), taskQueue, errors.Join(errs...))
	}
	return out, nil
}

// ErrNotOnceflow: the workflow does not answer idemwf.PendingQuery (the
// query failed: not a onceflow workflow, or one whose query handler
// fails), so there is nothing to decide there.
var ErrNotOnceflow = errors.New("operator: not a onceflow workflow (its " + idemwf.PendingQuery + " query fails)")

// PendingRecoveries asks the workflow wfID (runID empty: its latest run)
// for the incidents it waits on a decision for (idemwf.PendingQuery). A
// workflow that does not answer the query is an error matching
// ErrNotOnceflow; every other error (a workflow that is not found, a
// server that cannot be reached, an answer that does not decode) is
// returned as it is.
func PendingRecoveries(ctx context.Context, tc client.Client, wfID, runID string) ([]idemwf.PendingRecovery, error) {
	v, err := tc.QueryWorkflow(ctx, wfID, runID, idemwf.PendingQuery)
	var failed *serviceerror.QueryFailed
	switch {
	case errors.As(err, &failed):
		return nil, fmt.Errorf("workflow %s: %w: %w", wfID, ErrNotOnceflow, err)
	case err != nil:
		return nil, fmt.Errorf("workflow %s: query %s: %w", wfID, idemwf.PendingQuery, err)
	}
	var p []idemwf.PendingRecovery
	if err := v.Get(&p); err != nil {
		return nil, fmt.Errorf("workflow %s: its %s answer does not decode: %w", wfID, idemwf.PendingQuery, err)
	}
	return p, nil
}

// PendingReport is what one workflow waits on, and the decisions it
// refused.
type PendingReport struct {
	WorkflowID string                   `json:"workflowId"`
	Pending    []idemwf.PendingRecovery `json:"pending"`
	Refused    idemwf.RefusalsReport    `json:"refused"`
}

// Pending asks the workflow wfID (runID empty: its latest run) for the
// incidents it waits on a decision for (idemwf.PendingQuery) and the
// decisions it refused (idemwf.RefusalsQuery). Every error is returned
// (see PendingRecoveries), except a workflow that answers the first query
// but not the refusals one, whose report then lists no refusals.
func Pending(ctx context.Context, tc client.Client, wfID, runID string) (PendingReport, error) {
	rep := PendingReport{WorkflowID: wfID}
	p, err := PendingRecoveries(ctx, tc, wfID, runID)
	if err != nil {
		return rep, err
	}
	rep.Pending = p
	v, err := tc.QueryWorkflow(ctx, wfID, runID, idemwf.RefusalsQuery)
	var failed *serviceerror.QueryFailed
	switch {
	case errors.As(err, &failed):
		return rep, nil // a workflow of a version without the query
	case err != nil:
		return rep, fmt.Errorf("workflow %s: query %s: %w", wfID, idemwf.RefusalsQuery, err)
	}
	if err := v.Get(&rep.Refused); err != nil {
		return rep, fmt.Errorf("workflow %s: its %s answer does not decode: %w", wfID, idemwf.RefusalsQuery, err)
	}
	return rep, nil
}
