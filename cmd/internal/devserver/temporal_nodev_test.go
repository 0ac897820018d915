//go:build nodev

package devserver

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/worker"
)

// A nodev build asked for -dev without a Temporal address says how to get
// a build that has the embedded server, and starts nothing.
func TestNodevBuildSaysHowToGetADevServer(t *testing.T) {
	cfg := worker.Config{RedisURL: "redis://127.0.0.1:1/0"}
	_, err := Start(&cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "go build ./cmd/worker") || !strings.Contains(err.Error(), "-temporal-address") {
		t.Fatalf("err = %v, want it to name the build and -temporal-address", err)
	}
}
