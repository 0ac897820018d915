package order_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
)

// TestAmountIsBounded: amount_cents is 1 to MaxAmountCents; an order of
// 2^63-1 cents was once accepted and charged.
func TestAmountIsBounded(t *testing.T) {
	t.Parallel()
	in := order.PlaceOrderInput{OrderID: "o-1", CustomerID: "c-1", Items: []ledger.Item{{SKU: "A", Qty: 1}}, Currency: "USD"}
	for _, ok := range []int64{1, order.MaxAmountCents} {
		in.AmountCents = ok
		if err := in.Validate(); err != nil {
			t.Errorf("%d cents: %v", ok, err)
		}
	}
	for _, bad := range []int64{order.MaxAmountCents + 1, math.MaxInt64} {
		in.AmountCents = bad
		err := in.Validate()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("amount_cents must be at most %d", order.MaxAmountCents)) {
			t.Errorf("%d cents: %v", bad, err)
		}
	}
	if order.MaxAmountCents != 10_000_000_000 {
		t.Errorf("MaxAmountCents is %d; the README documents 10^10", order.MaxAmountCents)
	}
}
