package order_test

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/onceflow/onceflow/examples/order"
)

// TestPlaceOrderReplaysItsRecordedHistory replays a history recorded on a
// real server (examples/order/internal/e2e's TestTimeoutAfterChargeWaitsForADecision,
// rewritten with ONCEFLOW_UPDATE_TESTDATA=1): an order whose charge timed
// out after the gateway charged, waited in the pending list, and was
// resolved "completed" by an operator's Update. A change to PlaceOrder
// that is not deterministic against it fails here: version it with
// workflow.GetVersion, or, if no such workflow can be running anywhere,
// record the history again.
func TestPlaceOrderReplaysItsRecordedHistory(t *testing.T) {
	t.Parallel()
	const fixture = "testdata/place-order-resolved.json"
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED", `"name": "onceflow.decide"`, "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("%s has no %s: it no longer records a resolved recovery", fixture, want)
		}
	}
	r := sdkworker.NewWorkflowReplayer()
	r.RegisterWorkflow(order.PlaceOrder)
	if err := r.ReplayWorkflowHistoryFromJSONFile(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)), fixture); err != nil {
		t.Fatalf("PlaceOrder no longer replays its recorded history: %v", err)
	}
}
