package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// worker pending prints each incident's evidence after the table, with
// the decision it implies ready to send.
func TestPendingPrintsTheEvidence(t *testing.T) {
	t.Parallel()
	p := idemwf.PendingRecovery{Incident: idemwf.Incident{RecordKey: "charge-card:d1:aa", Attempt: 1, Rev: 2}, RecordKey: "charge-card:d1:aa", Activity: "order.ChargeCard"}
	list := []operator.Waiting{{WorkflowID: "order-1", Pending: []idemwf.PendingRecovery{p}}}
	ev := &idemwf.Evidence{Summary: "the gateway charged 19.99 USD (charge ch_1)", Implies: idemwf.Completed,
		Result: json.RawMessage(`{"gateway_charge_id":"ch_1"}`), Facts: []string{"gateway call c1: charged-then-timeout ch_1"}}
	var out bytes.Buffer
	if err := printPending(list, []operator.Assessed{{Step: operator.Step{WorkflowID: "order-1", Pending: p}, Evidence: ev}}, "onceflow", false, false, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"evidence for charge-card:d1:aa@1.2 in order-1: the gateway charged 19.99 USD (charge ch_1)",
		"  gateway call c1: charged-then-timeout ch_1",
		`implies completed: worker resolve -workflow-id order-1 -record charge-card:d1:aa -attempt 1 -rev 2 -decision completed -result '{"gateway_charge_id":"ch_1"}'`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

// The commands pending prints for the state of a -dev worker carry -dev,
// so that, pasted as they are, they talk to the same servers.
func TestPendingHintsKeepDev(t *testing.T) {
	t.Parallel()
	p := idemwf.PendingRecovery{Incident: idemwf.Incident{RecordKey: "charge-card:d1:aa", Attempt: 1, Rev: 2}, RecordKey: "charge-card:d1:aa", Activity: "order.ChargeCard"}
	list := []operator.Waiting{{WorkflowID: "order-1", Pending: []idemwf.PendingRecovery{p}}}
	ev := &idemwf.Evidence{Summary: "no call", Implies: idemwf.Retry}
	for _, dev := range []bool{false, true} {
		var out bytes.Buffer
		if err := printPending(list, []operator.Assessed{{Step: operator.Step{WorkflowID: "order-1", Pending: p}, Evidence: ev}}, "onceflow", false, dev, &out); err != nil {
			t.Fatal(err)
		}
		hints := strings.Count(out.String(), "worker resolve -dev -workflow-id")
		if want := map[bool]int{false: 0, true: 2}[dev]; hints != want || strings.Count(out.String(), "worker resolve") != 2 {
			t.Errorf("dev %v: %d hints with -dev, want %d:\n%s", dev, hints, want, out.String())
		}
	}
}

// pending names what it listed when nothing waits (without -task-queue:
// every task queue of the namespace); an activity that returns only an
// error has no result type, and the hint to complete it takes no -result,
// while another's names its type.
func TestPendingListsEveryTaskQueueAndKnowsErrorOnlyActivities(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := printPending(nil, nil, pendingScope("payments", ""), false, false, &out); err != nil ||
		out.String() != "no running workflow waits on a decision (namespace payments, every task queue)\n" {
		t.Fatalf("nothing waits: %q, %v", out.String(), err)
	}
	p := idemwf.PendingRecovery{Incident: idemwf.Incident{RecordKey: "deposit:d1:aa", Attempt: 1, Rev: 2}, RecordKey: "deposit:d1:aa", Activity: "Deposit", NoResult: true}
	list := []operator.Waiting{{WorkflowID: "transfer-1", TaskQueue: "transfers", Pending: []idemwf.PendingRecovery{p}}}
	out.Reset()
	if err := printPending(list, nil, pendingScope("payments", ""), false, false, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "deposit:d1:aa  1        2           none         ") ||
		!strings.Contains(s, "decide with: worker resolve -workflow-id transfer-1 -record deposit:d1:aa -attempt 1 -rev 2 -decision completed (or retry, or fail -reason TEXT)") {
		t.Errorf("an error-only activity's incident:\n%s", s)
	}
	p.NoResult, p.ResultType = false, "transfer.Confirmation"
	list[0].Pending[0] = p
	out.Reset()
	if err := printPending(list, nil, pendingScope("payments", "transfers"), false, false, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "-decision completed -result '<transfer.Confirmation as JSON>' (or retry") {
		t.Errorf("a typed activity's incident:\n%s", s)
	}
}
