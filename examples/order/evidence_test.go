package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// The charge's evidence: a call that took money implies completed with
// the gateway's charge pre-filled, a call that took none implies retry,
// and another step has no evidence.
func TestChargeEvidenceImpliesTheDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := ledger.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	src := order.ChargeEvidence{Ledger: l}
	step := func(key, activity string) operator.Step {
		return operator.Step{WorkflowID: "order-1", Pending: idemwf.PendingRecovery{
			Incident: idemwf.Incident{RecordKey: key, Attempt: 1, Rev: 2}, RecordKey: key, Activity: activity}}
	}
	charged := "charge-card:d1:" + strings.Repeat("a", 64)
	if _, err := l.RecordGatewayCall(ctx, ledger.GatewayCall{OperationKey: charged, OrderID: "o-1", AmountCents: 1999, Currency: "USD",
		Outcome: ledger.CallChargedThenTimeout, ChargeID: "ch_1"}); err != nil {
		t.Fatal(err)
	}
	ev, err := src.Evidence(ctx, step(charged, order.ChargeCardActivity))
	var p ledger.Payment
	if err != nil || ev.Implies != idemwf.Completed || json.Unmarshal(ev.Result, &p) != nil || p.GatewayChargeID != "ch_1" || p.Status != ledger.PaymentCaptured ||
		p.AmountCents != 1999 || !strings.Contains(ev.Summary, "ch_1") || len(ev.Facts) != 2 {
		t.Fatalf("a charge: %+v (%s), %v", ev, ev.Result, err)
	}

	none := "charge-card:d1:" + strings.Repeat("b", 64)
	if _, err := l.RecordGatewayCall(ctx, ledger.GatewayCall{OperationKey: none, OrderID: "o-2", AmountCents: 1999, Currency: "USD",
		Outcome: ledger.CallTimeoutBeforeCharge}); err != nil {
		t.Fatal(err)
	}
	ev, err = src.Evidence(ctx, step(none, order.ChargeCardActivity))
	if err != nil || ev.Implies != idemwf.Retry || len(ev.Result) != 0 || !strings.Contains(ev.Summary, "took no money") {
		t.Fatalf("no charge: %+v, %v", ev, err)
	}
	if _, err := src.Evidence(ctx, step(none, order.ShipActivity)); !errors.Is(err, operator.ErrNoEvidence) {
		t.Fatalf("another step: %v, want ErrNoEvidence", err)
	}
}
