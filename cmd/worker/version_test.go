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
