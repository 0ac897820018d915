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
	// TaskQueue is the task queue the workflow runs on.
	TaskQueue string `json:"taskQueue,omitempty"`
	// Count is how many incidents it waits on, as its
	// idemwf.PendingSearchAttribute says.
	Count   int64                    `json:"count"`
	Pending []idemwf.PendingRecovery `json:"pending"`
}

// ErrPendingAttributeMissing: the namespace has no
// idemwf.PendingSearchAttribute registered, so visibility cannot find the
// workflows that wait on a decision. The errors that match it are
// *PendingAttributeError, which name the command that registers it in
// their namespace.
var ErrPendingAttributeMissing = errors.New("operator: the search attribute " + idemwf.PendingSearchAttribute +
	" is not registered in the namespace: register it with `temporal operator search-attribute create --name " +
	idemwf.PendingSearchAttribute + " --type Int --namespace NS` (docs/operations.md; -dev registers it)")

// PendingAttributeError is a namespace without idemwf.PendingSearchAttribute
// as an Int: its message names the command that registers it there. It
// matches ErrPendingAttributeMissing.
type PendingAttributeError struct {
	// Namespace is the namespace that lacks it ("" when unknown).
	Namespace string
	// Type is the attribute's type when it is registered as another type
	// than Int ("Keyword"); "" when it is not registered.
	Type string
	// Err is the server's answer, when a visibility request was refused
	// for want of the attribute.
	Err error
}

// RegisterCommand is the Temporal CLI command that registers
// idemwf.PendingSearchAttribute in namespace ("NS" when empty).
func RegisterCommand(namespace string) string {
	if namespace == "" {
		namespace = "NS"
	}
	return "temporal operator search-attribute create --name " + idemwf.PendingSearchAttribute + " --type Int --namespace " + namespace
}

func (e *PendingAttributeError) Error() string {
	ns := e.Namespace
	if ns == "" {
		ns = "NS"
	}
	var b strings.Builder
	if e.Type != "" {
		fmt.Fprintf(&b, "operator: the search attribute %s of namespace %s is a %s, not an Int: remove it (`temporal operator search-attribute remove --name %s --namespace %s`) and register it with `%s`",
			idemwf.PendingSearchAttribute, ns, e.Type, idemwf.PendingSearchAttribute, ns, RegisterCommand(e.Namespace))
	} else {
		fmt.Fprintf(&b, "operator: the search attribute %s is not registered in namespace %s, so visibility cannot find the workflows that wait on a decision: register it with `%s`",
			idemwf.PendingSearchAttribute, ns, RegisterCommand(e.Namespace))
	}
	fmt.Fprintf(&b, " (Temporal Cloud: `tcld namespace search-attributes add -n %s --sa %s=Int`; docs/operations.md; -dev registers it)", ns, idemwf.PendingSearchAttribute)
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Is matches ErrPendingAttributeMissing.
func (e *PendingAttributeError) Is(target error) bool { return target == ErrPendingAttributeMissing }

// Unwrap returns the server's answer.
func (e *PendingAttributeError) Unwrap() error { return e.Err }

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

// visibilityError wraps err, a failed visibility request in namespace, as
// a *PendingAttributeError when the server refused the query for want of
// the attribute.
func visibilityError(err error, namespace string) error {
	var bad *serviceerror.InvalidArgument
	if errors.As(err, &bad) && strings.Contains(bad.Error(), idemwf.PendingSearchAttribute) {
		return &PendingAttributeError{Namespace: namespace, Err: err}
	}
	return err
}

// CheckPendingAttribute returns nil when namespace has
// idemwf.PendingSearchAttribute registered as an Int, a
// *PendingAttributeError (matching ErrPendingAttributeMissing, naming the
// command that registers it) when it has not, or the error of the
// request. An empty namespace is the one tc was dialled with. A worker
// whose workflows upsert the attribute checks it at start (worker.Attach
// does): an unregistered attribute would fail their workflow tasks.
func CheckPendingAttribute(ctx context.Context, tc client.Client, namespace string) error {
	var counted error // the count's refusal, when the namespace was not given
	if namespace == "" {
		// One count of the waiting workflows: the SDK fills the client's
		// namespace into a request that names none, which the messages then
		// name, and the server refuses it for want of the attribute.
		req := &workflowservice.CountWorkflowExecutionsRequest{Query: PendingVisibilityQuery("")}
		_, err := tc.CountWorkflow(ctx, req)
		namespace = req.GetNamespace()
		switch err := visibilityError(err, namespace); {
		case err != nil && !errors.Is(err, ErrPendingAttributeMissing):
			return fmt.Errorf("operator: count the workflows waiting on a decision in namespace %s: %w", namespace, err)
		case namespace == "":
			return err // the query ran or not: nothing more to ask
		default:
			counted = err // the attribute's type says more
		}
	}
	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	switch {
	case err != nil && counted != nil:
		return counted
	case err != nil:
		return fmt.Errorf("operator: list the search attributes of namespace %s: %w", namespace, err)
	}
	switch t, ok := resp.GetCustomAttributes()[idemwf.PendingSearchAttribute]; {
	case !ok:
		return &PendingAttributeError{Namespace: namespace}
	case t != enumspb.INDEXED_VALUE_TYPE_INT:
		return &PendingAttributeError{Namespace: namespace, Type: t.String()}
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
		return 0, fmt.Errorf("operator: count the workflows waiting on a decision: %w", visibilityError(err, namespace))
	}
	return resp.GetCount(), nil
}

// ListPending lists the running workflows of taskQueue (every task queue
// when empty: any service's, any workflow type) in namespace that wait on
// a decision, at most limit of them: visibility finds them by
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
			return nil, fmt.Errorf("operator: list the workflows of %s waiting on a decision: %w", queues(taskQueue), visibilityError(err, namespace))
		}
		for _, e := range resp.GetExecutions() {
			if seen == limit {
				break
			}
			seen++
			w := Waiting{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), Type: e.GetType().GetName(), TaskQueue: e.GetTaskQueue()}
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
			len(errs), queues(taskQueue), errors.Join(errs...))
	}
	return out, nil
}

// queues names the task queues a listing covers: "task queue Q", or
// "every task queue".
func queues(taskQueue string) string {
	if taskQueue == "" {
		return "every task queue"
	}
	return "task queue " + taskQueue
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
