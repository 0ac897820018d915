package onceflow_test

import (
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
)

// TestHexIdentitiesTakeOnlyLowercaseHex puts every byte value at every
// position of a nonce and an owner: exactly 0-9 and a-f are accepted.
func TestHexIdentitiesTakeOnlyLowercaseHex(t *testing.T) {
	t.Parallel()
	for _, n := range []int{32, 64} {
		for i := 0; i < n; i++ {
			for b := 0; b < 256; b++ {
				s := strings.Repeat("0", i) + string([]byte{byte(b)}) + strings.Repeat("f", n-i-1)
				want := b >= '0' && b <= '9' || b >= 'a' && b <= 'f'
				var err error
				if n == 32 {
					err = onceflow.Nonce(s).Validate()
				} else {
					err = onceflow.Owner(s).Validate()
				}
				if got := err == nil; got != want {
					t.Fatalf("%d characters, byte %#x at %d: valid = %v, want %v", n, b, i, got, want)
				}
			}
		}
	}
	for _, s := range []string{"", strings.Repeat("a", 31), strings.Repeat("a", 33)} {
		if onceflow.Nonce(s).Validate() == nil {
			t.Errorf("nonce of %d characters accepted", len(s))
		}
	}
}
