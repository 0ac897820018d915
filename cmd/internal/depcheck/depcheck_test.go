package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoExampleInTheBinariesModule: go list -deps -test over the module's
// packages names no package of examples/: cmd/worker, the dev server and
// the operator commands work for any wrapped activity without the order
// system.
func TestNoExampleInTheBinariesModule(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-test", "github.com/onceflow/onceflow/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 100 {
		t.Fatalf("go list named %d packages: %s", len(pkgs), out)
	}
	for _, p := range pkgs {
		if strings.HasPrefix(p, "github.com/onceflow/onceflow/examples/") {
			t.Errorf("the binaries' module depends on %s: move what needs it into the example's module", p)
		}
	}
}
