package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/harness/redistest"
)

// The README's quick start (examples/quickstart) is a program that runs:
// built as a user would build it, against a Temporal server and a Redis,
// it starts its workflow twice and the email goes once.
func TestQuickStartRuns(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, "github.com/onceflow/onceflow/examples/quickstart")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/quickstart: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalServer.Address(), "TEMPORAL_NAMESPACE="+temporalServer.Namespace(),
		"REDIS_URL=redis://"+redistest.Addr(t)+"/0", "ONCEFLOW_SECRET=")
	out, err := cmd.CombinedOutput()
	// The SDK may log its stop (a poll cut short) after the last line.
	if err != nil || !strings.Contains(string(out), "\nsent once: 1 effect for 2 starts\n") {
		t.Fatalf("the quick start: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "sending the welcome email"); n != 1 {
		t.Fatalf("the quick start sent %d emails:\n%s", n, out)
	}
}
