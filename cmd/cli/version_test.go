package cli_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/cmd/cli"
)

// worker version names the build and Go.
func TestVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := cli.Version(&out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "onceflow worker ") || !strings.Contains(s, runtime.Version()) {
		t.Fatalf("version printed %q", s)
	}
}
