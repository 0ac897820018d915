package order

import (
	"context"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/console"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// ConsoleEvidence is the order system's source for the operator console
// (package console): ChargeEvidence for each pending charge, and, as a
// console.FactSource, the order a workflow places with its ledger rows
// (the reservation, the payments, the gateway's calls and refunds, the
// shipment, the money kept), every amount in ledger.FormatMoney's format.
// It reads the ledger and changes nothing.
type ConsoleEvidence struct {
	Ledger *ledger.Ledger
}

var _ console.FactSource = ConsoleEvidence{}

// Evidence is ChargeEvidence's.
func (e ConsoleEvidence) Evidence(ctx context.Context, step operator.Step) (idemwf.Evidence, error) {
	return ChargeEvidence(e).Evidence(ctx, step)
}

// Facts are the ledger's rows of the order workflow w places;
// operator.ErrNoEvidence when the ledger has no order of it.
func (e ConsoleEvidence) Facts(ctx context.Context, w console.Workflow) (console.Facts, error) {
	o, ok, err := e.Ledger.OrderByWorkflow(ctx, w.ID)
	switch {
	case err != nil:
		return console.Facts{}, err
	case !ok:
		return console.Facts{}, operator.ErrNoEvidence
	}
	rows, err := e.Ledger.ReadOrderRows(ctx, o.ID)
	if err != nil {
		return console.Facts{}, fmt.Errorf("order: read the rows of order %s: %w", o.ID, err)
	}
	return OrderFacts(rows), nil
}

// OrderFacts are an order's ledger rows as the console shows them, one a
// row.
func OrderFacts(r ledger.OrderRows) console.Facts {
	o := r.Order
	if o == nil {
		return console.Facts{}
	}
	f := console.Facts{Title: "Order " + o.ID, Summary: o.Status + ", " + o.Amount()}
	add := func(label, format string, args ...any) {
		f.Rows = append(f.Rows, console.Fact{Label: label, Value: fmt.Sprintf(format, args...)})
	}
	add("order", "%s, %s, customer %s%s", o.Status, o.Amount(), o.CustomerID, suffix(", reason: ", o.Reason))
	if res := r.Reservation; res != nil {
		var items []string
		for _, it := range res.Items {
			items = append(items, fmt.Sprintf("%s×%d", it.SKU, it.Qty))
		}
		add("reservation", "%s: %s", res.Status, strings.Join(items, " "))
	}
	for _, p := range r.Payments {
		add("payment "+p.ID, "%s, %s%s, fence %s", p.Status, ledger.FormatMoney(p.AmountCents, p.Currency), suffix(", charge ", p.GatewayChargeID), p.Fence)
	}
	for _, c := range r.GatewayCalls {
		add("gateway call "+c.ID, "%s at %s%s, %s", c.Outcome, c.CalledAt.UTC().Format("2006-01-02 15:04:05"), suffix(", charge ", c.ChargeID), ledger.FormatMoney(c.AmountCents, c.Currency))
	}
	for _, rf := range r.Refunds {
		add("refund "+rf.ID, "%s of charge %s", ledger.FormatMoney(rf.AmountCents, rf.Currency), rf.ChargeID)
	}
	if s := r.Shipment; s != nil {
		add("shipment", "%s", s.ID)
	}
	add("money kept", "%s", ledger.FormatMoney(r.Kept(), o.Currency))
	return f
}

func suffix(label, v string) string {
	if v == "" {
		return ""
	}
	return label + v
}
