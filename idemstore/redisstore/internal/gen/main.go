// Command gen writes the Lua scripts Redis runs, lua/gen/<name>.lua, from
// the hand-written sources: each script body lua/<name>.lua, the helpers
// of lua/record.lua and the record schema (../schema). Run it with
//
//	go generate ./idemstore/redisstore
//
// (it runs in that directory). The store embeds the files it writes and
// sends exactly those bytes; TestGeneratedScriptsAreUpToDate fails when
// they differ from what the sources generate.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	src := flag.String("src", "lua", "the directory of the hand-written scripts")
	out := flag.String("out", "lua/gen", "the directory to write the generated scripts to")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	files, err := generate(os.DirFS(src))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, f := range files {
		keep[f.name] = true
		path := filepath.Join(out, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return err
		}
	}
	// A script whose source is gone goes too.
	stale, err := filepath.Glob(filepath.Join(out, "*.lua"))
	if err != nil {
		return err
	}
	for _, path := range stale {
		if name := filepath.Base(path); !keep[name] && strings.HasSuffix(name, ".lua") {
			if err := os.Remove(path); err != nil {
				return err
			}
		}
	}
	return nil
}
