package order_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEQuickStartIsThisCode keeps the README's quick start the same
// code as order.go: every function it shows must appear there verbatim.
func TestREADMEQuickStartIsThisCode(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("order.go")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## Quick start")
	end := strings.Index(section[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("README has no Quick start section")
	}
	section = section[start : start+1+end]
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) == 0 {
		t.Fatal("the Quick start shows no Go code")
	}
	funcs := regexp.MustCompile(`(?ms)^(// .*?\n)*func .*?\n}\n`).FindAllString(blocks[0][1], -1)
	if len(funcs) < 3 {
		t.Fatalf("found %d functions in the Quick start", len(funcs))
	}
	for _, f := range funcs {
		if !strings.Contains(string(src), f) {
			t.Errorf("README's Quick start differs from order.go:\n%s", f)
		}
	}
}
