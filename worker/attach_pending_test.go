package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// bareNamespace is a Temporal client of the namespace payments, which has
// no custom search attribute: its visibility refuses a query of
// OnceflowPending as the server does. All Attach's check asks of it is
// that count (whose request the SDK fills in with the client's namespace)
// and the namespace's search attributes; anything else panics.
type bareNamespace struct {
	client.Client
	asked *atomic.Int32
}

func (b bareNamespace) CountWorkflow(_ context.Context, req *workflowservice.CountWorkflowExecutionsRequest) (*workflowservice.CountWorkflowExecutionsResponse, error) {
	b.asked.Add(1)
	if req.GetNamespace() == "" {
		req.Namespace = "payments"
	}
	return nil, serviceerror.NewInvalidArgument("invalid query: unable to convert filter expression: invalid search attribute: " + idemwf.PendingSearchAttribute)
}

func (b bareNamespace) OperatorService() operatorservice.OperatorServiceClient {
	return noAttributes{asked: b.asked}
}

// noAttributes is bareNamespace's operator service.
type noAttributes struct {
	operatorservice.OperatorServiceClient // nil: any other call panics
	asked                                 *atomic.Int32
}

func (n noAttributes) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	n.asked.Add(1)
	return &operatorservice.ListSearchAttributesResponse{}, nil
}

// TestAttachChecksThePendingAttribute: Attach refuses a namespace without
// the OnceflowPending search attribute, which its workflows would upsert,
// with the command that registers it in that namespace; with
// NoPendingSearchAttribute it checks nothing and attaches (the activity
// registered under the name the SDK gives it). The real server's answers
// are cmd/worker's TestAttachRefusesANamespaceWithoutTheAttribute.
func TestAttachChecksThePendingAttribute(t *testing.T) {
	t.Parallel()
	tc := bareNamespace{asked: new(atomic.Int32)}
	cfg := worker.AttachConfig{Secret: []byte("a secret from your secret store, 32 bytes or more"), KeyNamespace: redistest.Namespace(t)}
	_, err := worker.Attach(t.Context(), tc, redistest.Client(t), cfg)
	const register = "temporal operator search-attribute create --name OnceflowPending --type Int --namespace payments"
	if !errors.Is(err, operator.ErrPendingAttributeMissing) || !strings.Contains(err.Error(), register) || !strings.Contains(err.Error(), "AttachConfig.NoPendingSearchAttribute") {
		t.Fatalf("Attach on a namespace without the attribute: %v; want a refusal naming %q", err, register)
	}
	cfg.NoPendingSearchAttribute = true
	once, err := worker.Attach(t.Context(), tc, redistest.Client(t), cfg)
	if asked := tc.asked.Load(); err != nil || asked != 2 {
		t.Fatalf("with NoPendingSearchAttribute: %v, %d requests in all; want it attached without asking", err, asked)
	}
	defer once.Close()
	c, err := client.NewLazyClient(client.Options{HostPort: "localhost:7233"}) // an SDK worker needs the SDK's client
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := sdkworker.New(c, "transfers", sdkworker.Options{Interceptors: once.Interceptors()})
	onceactivity.Register(w, once.Activities, Withdraw)
	a, ok := once.Activities.WrappedActivity("Withdraw")
	if !ok || a.Name != "Withdraw" || a.Code != "withdraw" || a.HeartbeatTimeout.String() != "10s" || a.ResultType != "string" {
		t.Fatalf("Withdraw wrapped as %+v (%v)", a, ok)
	}
}
