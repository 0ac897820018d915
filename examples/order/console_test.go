package order_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/onceflow/onceflow/console"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
)

// The console's facts about an order's workflow are the order's ledger
// rows, every amount in its currency's decimals (JPY has none); a
// workflow that placed no order has none.
func TestConsoleEvidenceFactsAreTheOrdersRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := ledger.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if _, err := l.CreateOrder(ctx, ledger.Order{ID: "o-1", CustomerID: "c-1", AmountCents: 1999, Currency: "JPY", Status: order.StatusPending, WorkflowID: "order-o-1"}); err != nil {
		t.Fatal(err)
	}
	key := "charge-card:d1:" + strings.Repeat("a", 64)
	if _, err := l.RecordGatewayCall(ctx, ledger.GatewayCall{OperationKey: key, OrderID: "o-1", AmountCents: 1999, Currency: "JPY",
		Outcome: ledger.CallCharged, ChargeID: "ch_1"}); err != nil {
		t.Fatal(err)
	}
	src := order.ConsoleEvidence{Ledger: l}
	f, err := src.Facts(ctx, console.Workflow{ID: "order-o-1"})
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, r := range f.Rows {
		text = append(text, r.Label+": "+r.Value)
	}
	all := strings.Join(text, "\n")
	if f.Title != "Order o-1" || f.Summary != order.StatusPending+", 1999 JPY" || !strings.Contains(all, "charge ch_1, 1999 JPY") || !strings.Contains(all, "money kept: 1999 JPY") {
		t.Errorf("facts %q / %q:\n%s", f.Title, f.Summary, all)
	}
	if _, err := src.Facts(ctx, console.Workflow{ID: "transfer-7"}); !errors.Is(err, operator.ErrNoEvidence) {
		t.Errorf("a workflow with no order: %v, want operator.ErrNoEvidence", err)
	}
}
