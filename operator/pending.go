package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	idemwf "github.com/onceflow/onceflow/workflow"
)

// Waiting is one running workflow that waits on decisions.
type Waiting struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	Type       string `json:"workflowType"`
	// Count is how many incidents it waits on, as its
	// idemwf.PendingSearchAttribute says.
	Count   int64                    `json:"count"`
	Pending []idemwf.PendingRecovery `json:"pending"`
}

// ErrPendingAttributeMissing: the namespace has no
// idemwf.PendingSearchAttribute registered, so visibility cannot find the
// workflows that wait on a decision. It names the fix.
var ErrPendingAttributeMissing = errors.New("operator: the search attribute " + idemwf.PendingSearchAttribute +
	" is not registered in the namespace: register it with `temporal operator search-attribute create --name " +
	idemwf.PendingSearchAttribute + " --type Int --namespace NS` (docs/operations.md; -dev registers it)")

// PendingVisibilityQuery is the visibility query of the running workflows
// of taskQueue (every task queue when empty) that wait on at least one
// decision (idemwf.PendingSearchAttribute > 0).
func PendingVisibilityQuery(taskQueue string) string {
	q := "ExecutionStatus = 'Running' AND " + idemwf.PendingSearchAttribute + " > 0"
	if taskQueue != "" {
		q += fmt.Sprintf(" AND TaskQueue = '%s'", strings.ReplaceAll(taskQueue, "'", "''"))
	}
	return q
}

// visibilityError wraps err, a failed visibility request, as
// ErrPendingAttributeMissing when the server refused the query for want of
// the attribute.
func visibilityError(err error) error {
	var bad *serviceerror.InvalidArgument
	if errors.As(err, &bad) && strings.Contains(bad.Error(), idemwf.PendingSearchAttribute) {
		return fmt.Errorf("%w: %w", ErrPendingAttributeMissing, err)
	}
	return err
}

// CheckPendingAttribute returns nil when namespace has
// idemwf.PendingSearchAttribute registered as an Int, an error matching
// ErrPendingAttributeMissing when it has not, or the error of the request.
// A worker whose workflows upsert the attribute checks it at start: an
// unregistered attribute would fail their workflow tasks.
func CheckPendingAttribute(ctx context.Context, tc client.Client, namespace string) error {
	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("operator: list the search attributes of namespace %s: %w", namespace, err)
	}
	switch t, ok := resp.GetCustomAttributes()[idemwf.PendingSearchAttribute]; {
	case !ok:
		return fmt.Errorf("%w (namespace %s)", ErrPendingAttributeMissing, namespace)
	case t != enumspb.INDEXED_VALUE_TYPE_INT:
		return fmt.Errorf("operator: the search attribute %s of namespace %s is a %s, want an Int: %w", idemwf.PendingSearchAttribute, namespace, t, ErrPendingAttributeMissing)
	}
	return nil
}

// CountPending counts the running workflows of taskQueue (every task
// queue when empty) in namespace that wait on at least one decision: one
// visibility Count request, asking no workflow. An unregistered attribute
// is an error matching ErrPendingAttributeMissing.
func CountPending(ctx context.Context, tc client.Client, namespace, taskQueue string) (int64, error) {
	resp, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: PendingVisibilityQuery(taskQueue)})
	if err != nil {
		return 0, fmt.Errorf("operator: count the workflows waiting on a decision: %w", visibilityError(err))
	}
	return resp.GetCount(), nil
}

// ListPending lists the running workflows of taskQueue in namespace that
// wait on a decision, at most limit of them: visibility finds them by
// idemwf.PendingSearchAttribute (PendingVisibilityQuery), newest first,
// and only those are asked idemwf.PendingQuery for their incidents. An
// unregistered attribute is an error matching ErrPendingAttributeMissing.
//
// A workflow that ended meanwhile, or that waits on nothing any more, is
// skipped. Any other workflow that could not be asked is listed with its
// Count and no Pending, and makes ListPending return the list together
// with an error saying which: a short list is never taken for a complete
// one. An error listing the workflows returns a nil list.
func ListPending(ctx context.Context, tc client.Client, namespace, taskQueue string, limit int) ([]Waiting, error) {
	switch {
	case namespace == "":
		return nil, errors.New("operator: ListPending needs the namespace")
	case taskQueue == "":
		return nil, errors.New("operator: ListPending needs the task queue")
	case limit <= 0:
		return nil, fmt.Errorf("operator: ListPending: the limit must be positive, got %d", limit)
	}
	query := PendingVisibilityQuery(taskQueue)
	out := []Waiting{}
	var token []byte
	var errs []error // workflows that could not be asked
	seen := 0
	for seen < limit {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, Query: query, PageSize: int32(min(limit-seen, 100)), NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("operator: list the workflows of %s waiting on a decision: %w", taskQueue, visibilityError(err))
		}
		for _, e := range resp.GetExecutions() {
			if seen == limit {
				break
			}
			seen++
			w := Waiting{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), Type: e.GetType().GetName()}
			if sa := e.GetSearchAttributes().GetIndexedFields()[idemwf.PendingSearchAttribute]; sa != nil {
				_ = converter.GetDefaultDataConverter().FromPayload(sa, &w.Count)
			}
			p, err := PendingRecoveries(ctx, tc, w.WorkflowID, w.RunID)
			var gone *serviceerror.NotFound
			switch {
			case errors.As(err, &gone):
				continue // it just ended: nothing to decide there
			case err != nil:
				errs = append(errs, err)
				out = append(out, w)
				continue
			case len(p) == 0:
				continue // decided since visibility saw it
			}
			w.Pending = p
			out = append(out, w)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("operator: %d workflows of %s waiting on a decision could not be asked what they wait on, so the list lacks their incidents: %w",
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
