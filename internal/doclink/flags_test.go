package doclink

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The sources of cmd/worker's flags and environment variables.
var flagSources = []string{"cmd/worker", "examples/order/cmd/worker", "cmd/cli", "cmd/devstate", "cmd/telemetry"}

var (
	flagName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	envName  = regexp.MustCompile(`^(ONCEFLOW|TEMPORAL|REDIS|HTTP|LEDGER|GATEWAY|ORDER|OTEL|XDG)_[A-Z0-9_]+$`)
	// The flag package's definers, and cmd/worker's own (a.duration, a.rate).
	definers = map[string]bool{
		"String": true, "StringVar": true, "Bool": true, "BoolVar": true, "Int": true, "IntVar": true,
		"Int64": true, "Int64Var": true, "Duration": true, "DurationVar": true, "Float64": true, "Float64Var": true,
		"Var": true, "Func": true, "duration": true, "rate": true,
	}
)

// TestConfigurationListsEveryFlag keeps docs/configuration.md the
// reference of every flag and environment variable of cmd/worker and its
// commands: it reads their definitions in the sources (not the binary,
// which this module does not build) and fails on one the page does not
// name.
func TestConfigurationListsEveryFlag(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "cmd", "worker")); err != nil {
		t.Skip("no cmd/worker here (not a clone of the repository)")
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	flags, envs := map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range flagSources {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || !definers[sel.Sel.Name] {
						return true
					}
					for _, arg := range n.Args {
						if s, ok := stringLit(arg); ok && flagName.MatchString(s) {
							flags[s] = true
							break
						}
					}
				case *ast.BasicLit:
					if s, ok := stringLit(n); ok && envName.MatchString(s) {
						envs[s] = true
					}
				}
				return true
			})
		}
	}
	if len(flags) < 40 || len(envs) < 30 {
		t.Fatalf("found only %d flags and %d variables in %v: has the code moved?", len(flags), len(envs), flagSources)
	}
	t.Logf("%d flags and %d environment variables in %v", len(flags), len(envs), flagSources)
	text := string(doc)
	var missing []string
	for f := range flags {
		if !regexp.MustCompile("`-" + regexp.QuoteMeta(f) + "[` ]").MatchString(text) {
			missing = append(missing, "-"+f)
		}
	}
	for e := range envs {
		if !strings.Contains(text, "`"+e) {
			missing = append(missing, e)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("docs/configuration.md does not name %s, defined in %v", m, flagSources)
	}
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
