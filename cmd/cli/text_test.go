package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// TestOperatorOutputEscapesStoredText: the record line of inspect and
// trace and the evidence pending prints quote a stored value with a line
// break or a terminal escape sequence; Printable leaves ordinary text (an
// accent, CJK, a space) as it is.
func TestOperatorOutputEscapesStoredText(t *testing.T) {
	t.Parallel()
	const hostile = "r\nforged line\x1b]0;title\x07\x1b[31m"
	for in, want := range map[string]string{"ok": "ok", "Zoë 客户": "Zoë 客户", "a\nb": `"a\nb"`, "\x1b[31m": `"\x1b[31m"`, "\xff": `"\xff"`, "\u202e": `"\u202e"`} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	var out bytes.Buffer
	if err := WriteRecordReport(&out, "", operator.RecordReport{Key: "k", Corrupt: hostile}); err != nil {
		t.Fatal(err)
	}
	if err := WriteRecordReport(&out, "", operator.RecordReport{Key: hostile}); err != nil {
		t.Fatal(err)
	}
	list := []operator.Waiting{{WorkflowID: "wf" + hostile, Pending: []idemwf.PendingRecovery{{Activity: hostile, Incident: idemwf.Incident{RecordKey: hostile}}}}}
	assessed := []operator.Assessed{{Step: operator.Step{WorkflowID: list[0].WorkflowID, Pending: list[0].Pending[0]}, Evidence: &idemwf.Evidence{Summary: hostile, Facts: []string{hostile}}}}
	if err := printPending(list, assessed, "q", false, false, &out); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07") || strings.Contains(out.String(), "\nforged line") {
		t.Fatalf("stored text printed raw:\n%q", out.String())
	}
}
