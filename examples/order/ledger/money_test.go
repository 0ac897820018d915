package ledger_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/onceflow/onceflow/examples/order/ledger"
)

// FormatMoney writes minor units in the currency's ISO 4217 decimals: the
// 100× misreading of "12345 USD" for 123.45 dollars cannot happen.
func TestFormatMoney(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{12345, "USD", "123.45 USD"},
		{12345, "usd", "123.45 USD"},
		{1999, "EUR", "19.99 EUR"},
		{5, "USD", "0.05 USD"},
		{0, "USD", "0.00 USD"},
		{-250, "USD", "-2.50 USD"},
		{12345, "JPY", "12345 JPY"},
		{12345, "KWD", "12.345 KWD"},
		{7, "KWD", "0.007 KWD"},
		{12345, "CLF", "1.2345 CLF"},
		{12345, "XYZ", "123.45 XYZ"},
		{12345, "", "123.45"},
		{math.MinInt64, "JPY", "-9223372036854775808 JPY"},
	} {
		if got := ledger.FormatMoney(c.minor, c.currency); got != c.want {
			t.Errorf("FormatMoney(%d, %q) = %q, want %q", c.minor, c.currency, got, c.want)
		}
	}
}

func ExampleFormatMoney() {
	fmt.Println(ledger.FormatMoney(12345, "USD"))
	fmt.Println(ledger.FormatMoney(12345, "JPY"))
	// Output:
	// 123.45 USD
	// 12345 JPY
}
