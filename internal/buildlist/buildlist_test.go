package buildlist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The library packages a user's service imports.
var libraryPackages = []string{
	"github.com/onceflow/onceflow/activity",
	"github.com/onceflow/onceflow/workflow",
	"github.com/onceflow/onceflow/worker",
	"github.com/onceflow/onceflow/operator",
	"github.com/onceflow/onceflow/console",
	"github.com/onceflow/onceflow/idemstore",
	"github.com/onceflow/onceflow/idemstore/driver",
	"github.com/onceflow/onceflow/idemstore/redisstore",
	"github.com/onceflow/onceflow/idemstore/storetest",
	"github.com/onceflow/onceflow/sqlfence",
	"github.com/onceflow/onceflow",
}

// Modules that must never reach a user's build list.
var forbidden = []string{"go.temporal.io/server", "k8s.io/client-go", "cloud.google.com/go/storage"}

// TestUserBuildListIsLean builds a module that imports library packages,
// resolves its build list with go mod tidy, and fails if the Temporal
// server or its graph is in it.
func TestUserBuildListIsLean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy")
	}
	t.Parallel()
	for _, c := range []struct {
		name     string
		packages []string
	}{
		{"activity and worker", libraryPackages[:3]},
		{"every library package", libraryPackages},
	} {
		modules := buildList(t, c.packages)
		for _, m := range modules {
			for _, bad := range forbidden {
				if m == bad {
					t.Errorf("%s: %s is in the build list", c.name, bad)
				}
			}
		}
		t.Logf("a service importing %s has %d modules in its build list (itself included)", c.name, len(modules))
	}
}

// buildList returns the module paths in the build list of a new module
// that imports packages.
func buildList(t *testing.T, packages []string) []string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The library's tests require the harness module at a placeholder
	// version until it is released (docs/releasing.md); go list -m all
	// resolves every module of the graph, so it is replaced too. No
	// library package outside a test imports it.
	goMod := "module example.com/userservice\n\ngo 1.26.8\n\nrequire github.com/onceflow/onceflow v0.0.0\n\n" +
		"replace github.com/onceflow/onceflow => " + root + "\n\n" +
		"replace github.com/onceflow/onceflow/harness => " + filepath.Join(root, "harness") + "\n"
	var imports strings.Builder
	for _, p := range packages {
		imports.WriteString("\t_ \"" + p + "\"\n")
	}
	main := "package main\n\nimport (\n" + imports.String() + ")\n\nfunc main() {}\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum")) // every hash it can need, so nothing is looked up
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"go.mod": []byte(goMod), "main.go": []byte(main), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")
	return strings.Fields(goCmd("list", "-m", "-f", "{{.Path}}", "all"))
}
