package wire_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/idemhttp/internal/wire"
)

// The memory CanonicalJSON may allocate for a document of n bytes:
// budgetPerByte × n + budgetFixed, whatever the document's depth. It is
// checked by TestCanonicalJSONAllocatesLinearly and on every input
// FuzzCanonicalJSON tries. These tests do not run in parallel: the
// allocation count is the process's.
const (
	budgetPerByte = 48
	budgetFixed   = 64 << 10
)

// allocated returns the bytes CanonicalJSON allocates for doc.
func allocated(doc []byte) (uint64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := wire.CanonicalJSON(doc)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

func checkBudget(t *testing.T, doc []byte) {
	t.Helper()
	got, _ := allocated(doc)
	if budget := uint64(budgetPerByte*len(doc) + budgetFixed); got > budget {
		t.Fatalf("CanonicalJSON allocated %d bytes for a document of %d (%.40q…); the budget is %d", got, len(doc), doc, budget)
	}
}

// nest wraps inner in depth levels of open and close.
func nest(depth int, open, inner, close string) []byte {
	return []byte(strings.Repeat(open, depth) + inner + strings.Repeat(close, depth))
}

// Before, each level of nesting copied the levels below it: a 1 MB body
// nested 999 deep allocated about a gigabyte before its key was looked
// at.
func TestCanonicalJSONAllocatesLinearly(t *testing.T) {
	big := `"` + strings.Repeat("x", 1<<20) + `"`
	deep := wire.MaxJSONDepth - 1
	for name, doc := range map[string][]byte{
		"objects nested 999 deep around 1 MB": nest(deep, `{"a":`, big, `}`),
		"objects before their small sibling":  nest(deep, `{"b":`, big, `,"a":1}`),
		"arrays of objects nested 999 deep":   nest(deep/2, `[{"a":`, big, `}]`),
		"a flat array of small numbers":       []byte("[" + strings.Repeat("1,", 1<<19) + "1]"),
		"a flat object of small members":      []byte(`{` + members(1<<15) + `}`),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := wire.CanonicalJSON(doc); err != nil {
				t.Fatal(err)
			}
			checkBudget(t, doc)
		})
	}
}

// members returns n members with distinct names, in reverse order.
func members(n int) string {
	var b strings.Builder
	for i := n; i > 0; i-- {
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
		if i > 1 {
			b.WriteByte(',')
		}
	}
	return b.String()
}
