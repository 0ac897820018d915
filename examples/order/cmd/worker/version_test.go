//go:build nodev

package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// worker version names the build and Go.
func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := version(&out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "onceflow worker ") || !strings.Contains(s, runtime.Version()) {
		t.Fatalf("version printed %q", s)
	}
}

// The production build has no Temporal server for dev-server to run, and
// says how to get one.
func TestDevServerInAProductionBuild(t *testing.T) {
	var out bytes.Buffer
	err := devServer(t.Context(), []string{"-address", "127.0.0.1:0"}, &out)
	if err == nil || !strings.Contains(err.Error(), "go build ./cmd/worker") {
		t.Fatalf("dev-server in a nodev build: %v, want it to say how to get a build with the server", err)
	}
}
