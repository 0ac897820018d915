package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEQuickStartIsThisFile keeps the README's quick start the
// program in this directory: its Go block is main.go from the activity to
// the worker's start, byte for byte (the README stays within 300 lines),
// and it links the whole file.
func TestREADMEQuickStartIsThisFile(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "\n## Quick start\n")
	if start < 0 {
		t.Fatal("README has no Quick start section")
	}
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal("the Quick start shows no Go code")
	}
	const elided = "\t// … starts Welcome twice under one workflow ID, and counts the emails.\n}\n"
	excerpt, ok := strings.CutSuffix(block[1], elided)
	if !ok || !strings.HasPrefix(excerpt, "// SendWelcome is the activity") || !strings.Contains(string(src), excerpt) ||
		!strings.HasSuffix(excerpt, "\tdefer w.Stop()\n") {
		t.Errorf("README's Quick start is not examples/quickstart/main.go as it is: copy the file from \"// SendWelcome\" to \"defer w.Stop()\" into the README's go block, then %q", elided)
	}
	if !strings.Contains(section, "(examples/quickstart/main.go)") {
		t.Error("the Quick start does not link examples/quickstart/main.go")
	}
}

// TestEnvDefaults: a variable that is unset or empty takes its default.
func TestEnvDefaults(t *testing.T) {
	t.Setenv("QUICKSTART_UNSET_FOR_TEST", "")
	if got := env("QUICKSTART_UNSET_FOR_TEST", "def"); got != "def" {
		t.Fatalf("env of an empty variable = %q, want the default", got)
	}
	t.Setenv("QUICKSTART_UNSET_FOR_TEST", "set")
	if got := env("QUICKSTART_UNSET_FOR_TEST", "def"); got != "set" {
		t.Fatalf("env of a set variable = %q", got)
	}
}
