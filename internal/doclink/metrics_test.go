package doclink

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// instrumentKinds are the OpenTelemetry Meter's and the Temporal SDK's
// MetricsHandler's instrument constructors, by the kind the table names.
var instrumentKinds = map[string]string{
	"Int64Counter": "counter", "Float64Counter": "counter",
	"Int64ObservableCounter": "counter", "Float64ObservableCounter": "counter",
	"Int64UpDownCounter": "updowncounter", "Float64UpDownCounter": "updowncounter",
	"Int64Histogram": "histogram", "Float64Histogram": "histogram",
	"Int64Gauge": "gauge", "Float64Gauge": "gauge",
	"Int64ObservableGauge": "gauge", "Float64ObservableGauge": "gauge",
	// client.MetricsHandler (workflow.GetMetricsHandler)
	"Counter": "counter", "Gauge": "gauge", "Timer": "histogram",
}

// sdkLabels are the labels the Temporal SDK's handler adds to what a
// workflow emits; they are in no source of ours.
var sdkLabels = []string{"namespace", "task_queue", "workflow_type"}

// instrument is a metric as the sources create it.
type instrument struct {
	name, kind, unit, from string
}

// TestOperationsListsEveryMetric keeps docs/operations.md the one list of
// onceflow's metric names and span attributes, which no package exports
// as Go constants: every instrument the repository's sources create under
// an onceflow name is a row of its metrics table with the kind, unit,
// Prometheus series and package the code gives it, and every row is such
// an instrument; every label a row names is a string of its package; the
// span attribute table names exactly the onceflow.* keys the sources set.
// It reads the sources, not a running program, so an instrument no test
// exercises is checked too (idemstore's TestTelemetrySpansAndMetrics
// checks what an executor emits against the same table).
func TestOperationsListsEveryMetric(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	metrics, attrs := documentedTelemetry(t, string(doc))

	code, keys, strs := sourceTelemetry(t, root)
	if len(code) < 15 || len(keys) < 8 {
		t.Fatalf("found only %d instruments and %d span attributes in the sources: has the code moved?", len(code), len(keys))
	}
	t.Logf("%d instruments and %d span attributes in the sources", len(code), len(keys))
	for name, in := range code {
		row, ok := metrics[name]
		if !ok {
			t.Errorf("%s (a %s of %s) is not in docs/operations.md's metrics table", name, in.kind, in.from)
			continue
		}
		if row.kind != in.kind || row.unit != in.unit || row.from != in.from {
			t.Errorf("docs/operations.md: %s is a %s in %q from %s; the code makes a %s in %q from %s",
				name, row.kind, row.unit, row.from, in.kind, in.unit, in.from)
		}
		if want := prometheusName(in); row.prometheus != want {
			t.Errorf("docs/operations.md: %s's Prometheus series is %s, not %s", name, want, row.prometheus)
		}
		for _, l := range row.labels {
			if !slices.Contains(sdkLabels, l) && !strs[in.from][l] {
				t.Errorf("docs/operations.md: %s's label %q is no string of %s", name, l, in.from)
			}
		}
	}
	for name, row := range metrics {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/operations.md lists %s (from %s), which no source creates", name, row.from)
		}
	}
	for k := range keys {
		if !attrs[k] {
			t.Errorf("span attribute %s is not in docs/operations.md's attribute table", k)
		}
	}
	for k := range attrs {
		if !keys[k] {
			t.Errorf("docs/operations.md lists span attribute %s, which no source sets", k)
		}
	}
}

// documentedMetric is a row of docs/operations.md's metrics table.
type documentedMetric struct {
	prometheus, kind, unit, from string
	labels                       []string
}

// documentedTelemetry reads docs/operations.md's metrics table (by OTel
// name) and span attribute table.
func documentedTelemetry(t *testing.T, doc string) (map[string]documentedMetric, map[string]bool) {
	t.Helper()
	metrics, attrs := map[string]documentedMetric{}, map[string]bool{}
	for _, tb := range Tables(doc) {
		switch {
		case tb.Column("metric") == 0 && tb.Column("Prometheus") >= 0:
			col := func(row []string, name string) string {
				i := tb.Column(name)
				if i < 0 || i >= len(row) {
					t.Fatalf("docs/operations.md:%d: no column %q in %q", tb.Line, name, row)
				}
				return row[i]
			}
			for _, row := range tb.Rows {
				name := code(col(row, "metric"))
				if _, dup := metrics[name]; dup || name == "" {
					t.Errorf("docs/operations.md:%d: metric %q twice or unnamed", tb.Line, row[0])
				}
				m := documentedMetric{prometheus: code(col(row, "Prometheus")), kind: col(row, "kind"),
					unit: code(none(col(row, "unit"))), from: code(col(row, "from"))}
				for _, l := range strings.Split(none(col(row, "labels")), ",") {
					if l = code(strings.TrimSpace(l)); l != "" {
						m.labels = append(m.labels, l)
					}
				}
				metrics[name] = m
			}
		case tb.Column("attribute") == 0:
			for _, row := range tb.Rows {
				attrs[code(row[0])] = true
			}
		}
	}
	if len(metrics) == 0 || len(attrs) == 0 {
		t.Fatalf("docs/operations.md: found %d metrics and %d span attributes: has the table moved?", len(metrics), len(attrs))
	}
	return metrics, attrs
}

// code strips a cell's code span.
func code(cell string) string { return strings.Trim(cell, "`") }

// none is "" for the table's "—".
func none(cell string) string {
	if cell == "—" {
		return ""
	}
	return cell
}

// prometheusName is the series the OpenTelemetry Prometheus exporter
// writes for an instrument.
func prometheusName(in instrument) string {
	n := strings.ReplaceAll(in.name, ".", "_")
	if in.unit == "s" {
		n += "_seconds"
	}
	if in.kind == "counter" {
		n += "_total"
	}
	return n
}

// sourceTelemetry reads every Go source of the repository but tests: the
// instruments created under an onceflow name (by name), the onceflow.*
// span attribute keys set, and the string literals of each package (by
// directory, slash-separated from root).
func sourceTelemetry(t *testing.T, root string) (map[string]instrument, map[string]bool, map[string]map[string]bool) {
	t.Helper()
	files := map[string][]*ast.File{} // by directory
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = append(files[filepath.ToSlash(rel)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	instruments, keys, strs := map[string]instrument{}, map[string]bool{}, map[string]map[string]bool{}
	for dir, fs := range files {
		consts, lits := map[string]string{}, map[string]bool{}
		for _, f := range fs {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					for i, id := range n.Names {
						if i < len(n.Values) {
							if s, ok := stringValue(n.Values[i]); ok {
								consts[id.Name] = s
							}
						}
					}
				case *ast.BasicLit:
					if s, ok := stringLit(n); ok {
						lits[s] = true
					}
				}
				return true
			})
		}
		strs[dir] = lits
		for _, f := range fs {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "attribute" {
					if s, ok := stringLit(call.Args[0]); ok && strings.HasPrefix(s, "onceflow.") {
						keys[s] = true // attribute.Key("onceflow.…"), attribute.String("onceflow.…", v), …
					}
					return true
				}
				kind, ok := instrumentKinds[sel.Sel.Name]
				if !ok {
					return true
				}
				name, ok := stringLit(call.Args[0])
				if id, isID := call.Args[0].(*ast.Ident); isID {
					name, ok = consts[id.Name]
				}
				if !ok || !strings.HasPrefix(name, "onceflow") {
					return true
				}
				in := instrument{name: name, kind: kind, from: dir}
				for _, arg := range call.Args[1:] {
					if c, ok := arg.(*ast.CallExpr); ok {
						if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "WithUnit" && len(c.Args) == 1 {
							in.unit, _ = stringLit(c.Args[0])
						}
					}
				}
				if prev, dup := instruments[name]; dup && prev != in {
					t.Errorf("%s is created twice, differently: %+v and %+v", name, prev, in)
				}
				instruments[name] = in
				return true
			})
		}
	}
	return instruments, keys, strs
}

// stringValue is a constant's string: a literal, or attribute.Key of one.
func stringValue(e ast.Expr) (string, bool) {
	if c, ok := e.(*ast.CallExpr); ok && len(c.Args) == 1 {
		if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Key" {
			return stringLit(c.Args[0])
		}
	}
	return stringLit(e)
}
