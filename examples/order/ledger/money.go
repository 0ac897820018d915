package ledger

import (
	"strconv"
	"strings"
)

// minorUnits are the ISO 4217 currencies whose minor unit is not a
// hundredth: the number of decimals of each. Every other currency has 2.
var minorUnits = map[string]int{
	// No decimals.
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0,
	"PYG": 0, "RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	// Three decimals.
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	// Four decimals.
	"CLF": 4, "UYW": 4,
}

// MinorUnits is the number of decimals of currency's minor unit in ISO
// 4217: 2 for USD and EUR (cents), 0 for JPY, 3 for KWD. A currency the
// table does not name has 2.
func MinorUnits(currency string) int {
	if d, ok := minorUnits[strings.ToUpper(currency)]; ok {
		return d
	}
	return 2
}

// FormatMoney formats an amount in minor units of currency (the ledger's
// AmountCents: cents for USD, yen for JPY) as the amount and the currency
// code: 12345 USD is "123.45 USD", 12345 JPY "12345 JPY", 12345 KWD
// "12.345 KWD". It is the one money format of the ledger's tables, the
// console and the evidence.
func FormatMoney(minor int64, currency string) string {
	code := strings.ToUpper(currency)
	digits := strconv.FormatUint(absUint(minor), 10)
	if d := MinorUnits(code); d > 0 {
		if len(digits) <= d {
			digits = strings.Repeat("0", d-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-d] + "." + digits[len(digits)-d:]
	}
	if minor < 0 {
		digits = "-" + digits
	}
	if code == "" {
		return digits
	}
	return digits + " " + code
}

// absUint is |v|, for the smallest int64 too.
func absUint(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}
