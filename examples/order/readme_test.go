package order_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsChargeWorkflowIsThisCode keeps docs/order.md's charge workflow
// the same code as order.go: every function it shows must appear there
// verbatim.
func TestDocsChargeWorkflowIsThisCode(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/order.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("order.go")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## The charge workflow")
	end := strings.Index(section[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/order.md has no section \"The charge workflow\"")
	}
	section = section[start : start+1+end]
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) == 0 {
		t.Fatal("the charge workflow section shows no Go code")
	}
	funcs := regexp.MustCompile(`(?ms)^(// .*?\n)*func .*?\n}\n`).FindAllString(blocks[0][1], -1)
	if len(funcs) < 3 {
		t.Fatalf("found %d functions in the charge workflow section", len(funcs))
	}
	for _, f := range funcs {
		if !strings.Contains(string(src), f) {
			t.Errorf("docs/order.md's charge workflow differs from order.go:\n%s", f)
		}
	}
}
