//go:build ignore

// Internalcheck fails when a Go file of one of this repository's modules
// imports an internal/ package of another of its modules. Go's own rule
// does not forbid it: github.com/onceflow/onceflow/internal/x may be
// imported by any package under github.com/onceflow/onceflow/, which
// includes the nested modules (cmd, examples/order, harness). But a module
// that imports another's internal/ cannot be versioned apart from it, and
// a user cannot import what an example builds on. Shared code lives in a
// module of its own (harness) or in the module that uses it.
//
// Every module is found by its go.mod under the current directory (the
// repository's root), and every .go file is read, whatever its build
// constraints (tests, -tags nodev, //go:build ignore scripts), except
// under testdata, vendor and directories starting with "." or "_".
//
// Usage, from the repository's root (scripts/test runs it):
//
//	go run scripts/internalcheck.go
package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
)

// module is one go.mod of the repository.
type module struct {
	path string // module path
	dir  string // directory, relative to the root ("." for the root)

	files, dirs int
	ownInternal int // imports of its own internal/ packages
}

func main() {
	modules, err := findModules(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "scripts/internalcheck:", err)
		os.Exit(2)
	}
	var violations []string
	byDir := slices.Clone(modules)
	slices.SortFunc(byDir, func(a, b *module) int { return strings.Compare(a.dir, b.dir) })
	for _, m := range byDir {
		v, err := check(m, modules)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scripts/internalcheck:", err)
			os.Exit(2)
		}
		violations = append(violations, v...)
		fmt.Printf("scripts/internalcheck: %s (%s): %d Go files in %d directories, %d imports of its own internal/ packages\n",
			m.path, m.dir, m.files, m.dirs, m.ownInternal)
	}
	if len(violations) > 0 {
		fmt.Fprintf(os.Stderr, "scripts/internalcheck: %d imports of another module's internal/ packages:\n", len(violations))
		for _, v := range violations {
			fmt.Fprintln(os.Stderr, "\t"+v)
		}
		os.Exit(1)
	}
	fmt.Printf("scripts/internalcheck: no module imports another module's internal/ packages (%d modules)\n", len(modules))
}

// skipDir reports whether the go command ignores the directory name.
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || name == "node_modules" ||
		(len(name) > 1 && (name[0] == '.' || name[0] == '_'))
}

// findModules returns every module under root, longest path first, so
// that the first whose path prefixes an import path owns it.
func findModules(root string) ([]*module, error) {
	var modules []*module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		path := modfile.ModulePath(data)
		if path == "" {
			return fmt.Errorf("%s: no module line", p)
		}
		modules = append(modules, &module{path: path, dir: filepath.ToSlash(filepath.Dir(p))})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(modules) == 0 {
		return nil, fmt.Errorf("no go.mod under %s: run it from the repository's root", root)
	}
	slices.SortFunc(modules, func(a, b *module) int { return len(b.path) - len(a.path) })
	return modules, nil
}

// owner returns the module of the repository that holds the package
// importPath, or nil.
func owner(importPath string, modules []*module) *module {
	for _, m := range modules {
		if importPath == m.path || strings.HasPrefix(importPath, m.path+"/") {
			return m
		}
	}
	return nil
}

// isInternal reports whether importPath has an internal element.
func isInternal(importPath string) bool {
	return slices.Contains(strings.Split(importPath, "/"), "internal")
}

// check reads the imports of every .go file of m (not of the modules
// nested in it) and returns those of another module's internal/ packages.
func check(m *module, modules []*module) ([]string, error) {
	var violations []string
	fset := token.NewFileSet()
	dirs := map[string]bool{}
	err := filepath.WalkDir(m.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == m.dir {
				return nil
			}
			if skipDir(d.Name()) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module, checked on its own
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		m.files++
		dirs[filepath.Dir(p)] = true
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %v", fset.Position(spec.Pos()), err)
			}
			if !isInternal(imp) {
				continue
			}
			switch o := owner(imp, modules); {
			case o == nil: // not this repository's; the go command keeps those out
			case o == m:
				m.ownInternal++
			default:
				violations = append(violations, fmt.Sprintf("%s: module %s imports %s, an internal/ package of module %s (%s)",
					fset.Position(spec.Pos()), m.path, imp, o.path, o.dir))
			}
		}
		return nil
	})
	m.dirs = len(dirs)
	return violations, err
}
