package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// twoServices is a Temporal client of a namespace where two workflows of
// two services (types and task queues) wait on a decision each: it
// answers any visibility query with both and records the queries.
type twoServices struct {
	client.Client // nil: any other call panics
	mu            sync.Mutex
	queries       []string
}

func (c *twoServices) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	c.mu.Lock()
	c.queries = append(c.queries, req.GetQuery())
	c.mu.Unlock()
	exec := func(id, typ, queue string) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-" + id},
			Type: &commonpb.WorkflowType{Name: typ}, TaskQueue: queue, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	}
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{
		exec("transfer-1", "MoneyTransfer", "transfers"), exec("trip-1", "BookTrip", "trips")}}, nil
}

func (c *twoServices) QueryWorkflow(_ context.Context, wfID, _, query string, _ ...any) (converter.EncodedValue, error) {
	if query != idemwf.PendingQuery {
		return nil, errors.New("unexpected query " + query)
	}
	key := "withdraw:d1:" + wfID
	return encode([]idemwf.PendingRecovery{{Incident: idemwf.Incident{RecordKey: key, Attempt: 1, Rev: 2}, RecordKey: key}})
}

// encoded is a query's answer, as JSON.
type encoded []byte

func (v encoded) HasValue() bool    { return len(v) > 0 }
func (v encoded) Get(ptr any) error { return json.Unmarshal(v, ptr) }

// encode is v as a query's answer.
func encode(v any) (converter.EncodedValue, error) {
	b, err := json.Marshal(v)
	return encoded(b), err
}

// ListPending without a task queue lists the waiting workflows of every
// task queue of the namespace, whatever their type (a visibility query
// without TaskQueue), each with its task queue; a task queue narrows the
// query.
func TestListPendingCoversEveryTaskQueue(t *testing.T) {
	t.Parallel()
	tc := &twoServices{}
	list, err := operator.ListPending(t.Context(), tc, "payments", "", 10)
	if err != nil || len(list) != 2 || list[0].TaskQueue != "transfers" || list[1].TaskQueue != "trips" || list[1].Type != "BookTrip" || len(list[1].Pending) != 1 {
		t.Fatalf("ListPending without a task queue: %+v, %v", list, err)
	}
	if _, err := operator.ListPending(t.Context(), tc, "payments", "trips", 10); err != nil {
		t.Fatal(err)
	}
	want := []string{"ExecutionStatus = 'Running' AND OnceflowPending > 0", "ExecutionStatus = 'Running' AND OnceflowPending > 0 AND TaskQueue = 'trips'"}
	if len(tc.queries) != 2 || tc.queries[0] != want[0] || tc.queries[1] != want[1] {
		t.Fatalf("queries %q, want %q", tc.queries, want)
	}
}

// namespace is a Temporal client of the namespace payments, whose custom
// search attributes are attrs: its visibility refuses a count of
// OnceflowPending unless it is an Int, as the server does, and it fills
// its namespace into a count request that names none, as the SDK does.
type namespace struct {
	client.Client // nil: any other call panics
	attrs         map[string]enumspb.IndexedValueType
}

func (n namespace) CountWorkflow(_ context.Context, req *workflowservice.CountWorkflowExecutionsRequest) (*workflowservice.CountWorkflowExecutionsResponse, error) {
	if req.GetNamespace() == "" {
		req.Namespace = "payments"
	}
	switch t, ok := n.attrs[idemwf.PendingSearchAttribute]; {
	case !ok:
		return nil, serviceerror.NewInvalidArgument("invalid query: invalid search attribute: OnceflowPending")
	case t != enumspb.INDEXED_VALUE_TYPE_INT:
		return nil, serviceerror.NewInvalidArgument("invalid query: invalid value type for search attribute OnceflowPending of type " + t.String())
	}
	return &workflowservice.CountWorkflowExecutionsResponse{}, nil
}

func (n namespace) OperatorService() operatorservice.OperatorServiceClient {
	return operators{attrs: n.attrs}
}

// operators is the namespace's operator service: it lists the search
// attributes.
type operators struct {
	operatorservice.OperatorServiceClient // nil: any other call panics
	attrs                                 map[string]enumspb.IndexedValueType
}

func (o operators) ListSearchAttributes(_ context.Context, req *operatorservice.ListSearchAttributesRequest, _ ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	if req.GetNamespace() != "payments" {
		return nil, serviceerror.NewNamespaceNotFound(req.GetNamespace())
	}
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: o.attrs}, nil
}

// A namespace without the attribute, or with it as another type than Int,
// is an error matching ErrPendingAttributeMissing that names the command
// that registers it there: checked in the client's own namespace when
// none is given (the namespace the SDK fills in), or in the one given;
// the count behind the gauge says the same. An Int passes.
func TestAMissingAttributeNamesTheCommand(t *testing.T) {
	t.Parallel()
	const register = "`temporal operator search-attribute create --name OnceflowPending --type Int --namespace payments`"
	none := namespace{}
	for _, ns := range []string{"", "payments"} {
		err := operator.CheckPendingAttribute(t.Context(), none, ns)
		if !errors.Is(err, operator.ErrPendingAttributeMissing) || !strings.Contains(err.Error(), "not registered in namespace payments") || !strings.Contains(err.Error(), register) {
			t.Errorf("CheckPendingAttribute(%q) without it: %v; want %s", ns, err, register)
		}
	}
	_, err := operator.CountPending(t.Context(), none, "payments", "")
	var pae *operator.PendingAttributeError
	if !errors.As(err, &pae) || pae.Namespace != "payments" || !strings.Contains(err.Error(), register) {
		t.Errorf("CountPending: %v; want %s", err, register)
	}
	keyword := namespace{attrs: map[string]enumspb.IndexedValueType{idemwf.PendingSearchAttribute: enumspb.INDEXED_VALUE_TYPE_KEYWORD}}
	if err := operator.CheckPendingAttribute(t.Context(), keyword, ""); !errors.Is(err, operator.ErrPendingAttributeMissing) ||
		!strings.Contains(err.Error(), "is a Keyword, not an Int") || !strings.Contains(err.Error(), register) {
		t.Errorf("CheckPendingAttribute with a Keyword: %v; want %s", err, register)
	}
	integer := namespace{attrs: map[string]enumspb.IndexedValueType{idemwf.PendingSearchAttribute: enumspb.INDEXED_VALUE_TYPE_INT}}
	if err := operator.CheckPendingAttribute(t.Context(), integer, ""); err != nil {
		t.Errorf("CheckPendingAttribute with an Int: %v", err)
	}
}
