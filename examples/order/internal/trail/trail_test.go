package trail_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/examples/order/internal/trail"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// hostile holds a line break, a terminal escape sequence (clear the
// screen, then red), a NUL byte and a bidirectional override.
const hostile = "x\nledger forged\x1b[2J\x1b[31m\x00\u202e"

// TestWriteEscapesStoredText: a value read from the ledger, Redis or a
// workflow with a newline or an escape sequence is printed quoted, so it
// neither forges a line of the trail nor reaches the operator's terminal
// (the console shows the same text); ordinary values are printed as they
// are.
func TestWriteEscapesStoredText(t *testing.T) {
	t.Parallel()
	rows := trail.Rows{
		Order:        &ledger.Order{ID: "o-1" + hostile, Status: "pending" + hostile, Currency: "USD", WorkflowID: "wf" + hostile, Reason: hostile},
		Reservation:  &ledger.Reservation{Status: "reserved", Items: []ledger.Item{{SKU: "A-1" + hostile, Qty: 2}}},
		Payments:     []ledger.Payment{{ID: "p-1", Status: hostile, IdempotencyKey: hostile, GatewayChargeID: hostile}},
		GatewayCalls: []ledger.GatewayCall{{ID: "g-1", Outcome: hostile, ChargeID: hostile, OperationKey: hostile}},
		Refunds:      []ledger.GatewayRefund{{ID: hostile, ChargeID: hostile, Currency: hostile}},
		Shipment:     &ledger.Shipment{ID: hostile},
	}
	tr := trail.Trail{
		HTTP:       &operator.RecordReport{Key: "orders-api:d1:" + hostile, Found: true, State: "COMPLETED", Reason: hostile},
		WorkflowID: "wf" + hostile, RunID: hostile, Status: "RUNNING",
		Pending:  []idemwf.PendingRecovery{{Activity: "Charge" + hostile, Incident: idemwf.Incident{RecordKey: hostile}}},
		Evidence: []*idemwf.Evidence{{Summary: hostile, Facts: []string{hostile}, Implies: idemwf.Decision("completed" + hostile)}},
		Decisions: []idemwf.Decided{{Resolution: idemwf.Resolution{Decision: "retry", By: hostile, Reason: hostile, RequestID: hostile,
			Evidence: &idemwf.Evidence{Summary: hostile}}, Via: hostile, Incident: idemwf.Incident{RecordKey: hostile}}},
		DecisionsError: hostile,
		Timeline:       []operator.Event{{Step: "charge" + hostile, State: hostile, Actor: hostile, Detail: hostile}},
		TimelineError:  hostile,
		OrderID:        "o-1" + hostile,
		Steps:          []trail.StepTrail{{Step: "charge", Key: hostile, Record: operator.RecordReport{Key: hostile, Corrupt: hostile}}},
		Ledger:         &rows,
	}
	var out bytes.Buffer
	if err := trail.Write(&out, tr, false); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.ContainsAny(text, "\x1b\x00\u202e") {
		t.Fatalf("the trail prints a control character raw:\n%q", text)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "ledger forged") {
			t.Fatalf("a stored newline forged a line of the trail:\n%s", text)
		}
	}
	if !strings.Contains(text, `"x\nledger forged\x1b[2J\x1b[31m\x00\u202e"`) {
		t.Fatalf("the hostile value is not shown quoted:\n%s", text)
	}

	var plain bytes.Buffer
	rows = trail.Rows{Order: &ledger.Order{ID: "o-2", Status: "completed", AmountCents: 1999, Currency: "EUR", WorkflowID: "order-o-2"},
		Reservation: &ledger.Reservation{Status: "reserved", Items: []ledger.Item{{SKU: "Zoë-客户", Qty: 1}}}}
	if err := trail.PrintRows(&plain, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"completed, 19.99 EUR, workflow order-o-2\n", " Zoë-客户×1\n"} {
		if !strings.Contains(plain.String(), want) {
			t.Fatalf("ordinary values changed:\n%q\nwant %q in it", plain.String(), want)
		}
	}
}
