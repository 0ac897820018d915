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

// TestOrderTextIsValidated: the order's text fields are bounded printable
// Unicode. A newline in a customer ID forged lines in worker trace, an
// escape sequence reached operators' terminals and a NUL byte was refused
// by PostgreSQL after the order was accepted; each is refused now, and
// ordinary text (accents, CJK, a space) is not.
func TestOrderTextIsValidated(t *testing.T) {
	t.Parallel()
	valid := func() order.PlaceOrderInput {
		return order.PlaceOrderInput{OrderID: "o-1", CustomerID: "Zoë 客户-1", Items: []ledger.Item{{SKU: "A-1 blau", Qty: 2}}, AmountCents: 100, Currency: "EUR"}
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("a valid order: %v", err)
	}
	for name, c := range map[string]struct {
		mod  func(*order.PlaceOrderInput)
		want string
	}{
		"newline in customer":  {func(in *order.PlaceOrderInput) { in.CustomerID = "c-1\nledger forged" }, "customer_id must be printable text"},
		"escape in customer":   {func(in *order.PlaceOrderInput) { in.CustomerID = "\x1b[31mred" }, "customer_id must be printable text"},
		"NUL in customer":      {func(in *order.PlaceOrderInput) { in.CustomerID = "c\x00" }, "customer_id must be printable text"},
		"bidi override":        {func(in *order.PlaceOrderInput) { in.CustomerID = "c\u202e1-" }, "customer_id must be printable text"},
		"invalid UTF-8":        {func(in *order.PlaceOrderInput) { in.CustomerID = "c\xff" }, "customer_id must be valid UTF-8"},
		"long customer":        {func(in *order.PlaceOrderInput) { in.CustomerID = strings.Repeat("c", order.MaxCustomerIDLen+1) }, "customer_id must be 1 to 128 bytes"},
		"tab in sku":           {func(in *order.PlaceOrderInput) { in.Items[0].SKU = "A\t1" }, "items[0].sku must be printable text"},
		"long sku":             {func(in *order.PlaceOrderInput) { in.Items[0].SKU = strings.Repeat("s", order.MaxSKULen+1) }, "items[0].sku must be 1 to 64 bytes"},
		"huge qty":             {func(in *order.PlaceOrderInput) { in.Items[0].Qty = order.MaxItemQty + 1 }, "items[0].qty must be at most"},
		"too many items":       {func(in *order.PlaceOrderInput) { in.Items = make([]ledger.Item, order.MaxItems+1) }, "items must list at most 100 items"},
		"lower-case currency":  {func(in *order.PlaceOrderInput) { in.Currency = "usd" }, "currency must be a three-letter code"},
		"control in currency":  {func(in *order.PlaceOrderInput) { in.Currency = "U\nS" }, "currency must be a three-letter code"},
		"order ID with escape": {func(in *order.PlaceOrderInput) { in.OrderID = "o\x1b1" }, "order_id must be printable ASCII"},
	} {
		in := valid()
		c.mod(&in)
		err := in.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", name, err, c.want)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\n\x1b\x00\u202e") && name != "too many items" {
			// errors.Join separates errors by newlines; none may come from the input.
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.ContainsAny(line, "\x1b\x00\u202e") {
					t.Errorf("%s: the error repeats the input: %q", name, err)
				}
			}
		}
	}
}
