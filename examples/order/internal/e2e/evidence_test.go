package e2e_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/examples/order"
)

// TestResolveWithTheLedgerFollowsTheEvidence: the gateway charged and
// timed out. `worker pending` with the ledger prints the charge and the
// completed decision it implies; `worker resolve` with the ledger refuses
// a retry against it (nothing is sent, the gateway shows one charge) and
// sends the implied completed, which completes the order with the
// gateway's charge ID.
func TestResolveWithTheLedgerFollowsTheEvidence(t *testing.T) {
	t.Parallel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
	s := newShop(t, dsn, 0)
	in, run, args := s.pendingCharge(order.GatewayConfig{TimeoutAfterCharge: 1})
	charge := s.books(in).calls[0].ChargeID
	table, err := s.operator("pending", "-task-queue", s.queue, "-ledger-dsn", dsn)
	if err != nil || !strings.Contains(table, "the gateway charged 19.99 USD (charge "+charge) || !strings.Contains(table, "implies completed: worker resolve") {
		t.Fatalf("pending with the ledger: %s, %v", table, err)
	}
	out, err := s.operator("resolve", append(args, "-ledger-dsn", dsn, "-decision", "retry", "-request-id", "r-1")...)
	if err == nil || !strings.Contains(out, "not sent: retry contradicts the evidence, which implies completed") {
		t.Fatalf("retry against the charge: %q, %v; want it refused", out, err)
	}
	if b := s.books(in); len(b.calls) != 1 || len(s.pendingOf(run.GetID(), 1).Pending) != 1 {
		t.Fatalf("after the refused retry: calls %+v; the incident must still wait", b.calls)
	}
	result := `{"status":"captured","gateway_charge_id":"` + charge + `"}`
	if out, err := s.operator("resolve", append(args, "-ledger-dsn", dsn, "-decision", "completed", "-result", result, "-request-id", "r-2")...); err != nil ||
		!strings.HasPrefix(out, "applied: completed") || !strings.Contains(out, "(request r-2)") {
		t.Fatalf("completed: %q, %v", out, err)
	}
	res := s.result(run)
	b := s.books(in)
	if res.Status != order.StatusCompleted || b.charges != 1 || len(b.payments) != 1 || b.payments[0].GatewayChargeID != charge {
		t.Fatalf("result %+v; calls %+v; payments %+v", res, b.calls, b.payments)
	}
}
