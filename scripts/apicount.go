//go:build ignore

// apicount counts the library's exported top-level names (functions,
// types, variables and constants; not methods or fields) per public
// package: every package of the root module outside internal/, testdata/,
// cmd/ and examples/ (which are modules of their own), test files left
// out. It prints one line per package, then the total, and exits 1 when
// the total is over the limit (-max, 380 by default; issue 48).
//
//	go run scripts/apicount.go [-max N] [-methods]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "apicount:", err)
		os.Exit(1)
	}
}

func run() error {
	max := flag.Int("max", 380, "fail when the library exports more top-level names than this")
	methods := flag.Bool("methods", false, "count exported methods of exported types too, in a column of their own")
	flag.Parse()

	names := map[string]int{}
	meths := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			base := d.Name()
			if path != "." && (base == "internal" || base == "testdata" || base == "cmd" || base == "examples" || base == "scripts" || strings.HasPrefix(base, ".")) {
				return filepath.SkipDir
			}
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		pkg := filepath.Dir(path)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names[pkg]++
				} else if recvExported(d.Recv) {
					meths[pkg]++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names[pkg]++
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names[pkg]++
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	pkgs := make([]string, 0, len(names))
	for p := range names {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	total, totalMethods := 0, 0
	for _, p := range pkgs {
		if *methods {
			fmt.Printf("%5d %5d  %s\n", names[p], meths[p], p)
		} else {
			fmt.Printf("%5d  %s\n", names[p], p)
		}
		total += names[p]
		totalMethods += meths[p]
	}
	if *methods {
		fmt.Printf("%5d %5d  total (names, methods)\n", total, totalMethods)
	} else {
		fmt.Printf("%5d  total, at most %d\n", total, *max)
	}
	if total > *max {
		return fmt.Errorf("%d exported top-level names, more than %d: unexport or fold what users do not need", total, *max)
	}
	return nil
}

// recvExported reports whether a method's receiver type is exported.
func recvExported(fl *ast.FieldList) bool {
	if fl == nil || len(fl.List) == 0 {
		return false
	}
	t := fl.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}
