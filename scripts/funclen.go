//go:build ignore

// funclen reports the functions that are too long to read in one sitting
// (issue 48): every function, method and function literal declared at
// top level (var f = func...) in the .go files under the given
// directories (the repository's root, all its modules, when none is
// given), tests included, whose span from the func keyword to its closing
// brace is more than -max lines. Directories named testdata or vendor,
// and those whose names start with "." or "_" (which the go tool ignores
// too), are skipped, and so are generated files. It prints one line per
// function, file:line, name and length, longest first, and exits 1 when
// there is one.
//
//	go run scripts/funclen.go [-max 120] [dir...]
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
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(1)
	}
}

// long is a function over the limit.
type long struct {
	pos   token.Position
	name  string
	lines int
}

func run() error {
	limit := flag.Int("max", 120, "report functions longer than this many lines")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}

	fset := token.NewFileSet()
	var found []long
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != dir && skipDir(d.Name()) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
			if err != nil {
				return err
			}
			if ast.IsGenerated(f) {
				return nil
			}
			found = append(found, longFuncs(fset, f, *limit)...)
			return nil
		})
		if err != nil {
			return err
		}
	}

	sort.Slice(found, func(i, j int) bool {
		if found[i].lines != found[j].lines {
			return found[i].lines > found[j].lines
		}
		if found[i].pos.Filename != found[j].pos.Filename {
			return found[i].pos.Filename < found[j].pos.Filename
		}
		return found[i].pos.Line < found[j].pos.Line
	})
	for _, l := range found {
		fmt.Printf("%s:%d: %s is %d lines\n", l.pos.Filename, l.pos.Line, l.name, l.lines)
	}
	if len(found) > 0 {
		return fmt.Errorf("%d functions over %d lines: split them along their steps", len(found), *limit)
	}
	return nil
}

// skipDir reports whether a directory holds no code of the repository's
// own: test data, vendored code, and what the go tool ignores.
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || name == "node_modules" ||
		strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// longFuncs returns the functions of f, and the function literals of its
// top-level variables, that span more than limit lines.
func longFuncs(fset *token.FileSet, f *ast.File, limit int) []long {
	var found []long
	check := func(name string, from, to token.Pos) {
		start, end := fset.Position(from), fset.Position(to)
		if n := end.Line - start.Line + 1; n > limit {
			found = append(found, long{pos: start, name: name, lines: n})
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Body != nil {
				check(funcName(d), d.Pos(), d.End())
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, v := range vs.Values {
					lit, ok := v.(*ast.FuncLit)
					if !ok || i >= len(vs.Names) {
						continue
					}
					check(vs.Names[i].Name+" (func literal)", lit.Pos(), lit.End())
				}
			}
		}
	}
	return found
}

// funcName is a function's name, or a method's as (*T).M or T.M.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	recv := "?"
	if id, ok := t.(*ast.Ident); ok {
		recv = id.Name
	}
	if star != "" {
		return "(*" + recv + ")." + d.Name.Name
	}
	return recv + "." + d.Name.Name
}
