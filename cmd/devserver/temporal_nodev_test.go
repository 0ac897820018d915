//go:build nodev

package devserver

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/onceflow/onceflow/cmd/devstate"
	"github.com/onceflow/onceflow/worker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A nodev build asked for -dev without a Temporal address says how to get
// a build that has the embedded server, and starts nothing.
func TestNodevBuildSaysHowToGetADevServer(t *testing.T) {
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", t.TempDir())
	cfg := worker.Config{RedisURL: "redis://127.0.0.1:1/0"}
	_, err := Start(&cfg, Options{}, quiet)
	if err == nil || !strings.Contains(err.Error(), "go build ./cmd/worker") || !strings.Contains(err.Error(), "-temporal-address") {
		t.Fatalf("err = %v, want it to name the build and -temporal-address", err)
	}
}

// -dev's Redis keeps its data in the state directory, the endpoints file
// names it, a second -dev on the directory is refused, Stop removes the
// endpoints and keeps the data, and Reset deletes it.
func TestDevRedisEndpointsLockAndReset(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", dir)
	cfg := worker.Config{TemporalAddress: "127.0.0.1:7233"} // given: no embedded Temporal
	d, err := Start(&cfg, Options{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	e, err := devstate.ReadEndpoints()
	if err != nil {
		t.Fatal(err)
	}
	if e.RedisURL != cfg.RedisURL || e.TemporalAddress != "127.0.0.1:7233" || e.PID != os.Getpid() || e.Namespace != worker.DefaultConfig().Namespace {
		t.Fatalf("endpoints %+v, config %+v", e, cfg)
	}
	cfg2 := worker.Config{TemporalAddress: "127.0.0.1:7233"}
	if _, err := Start(&cfg2, Options{}, quiet); !errors.Is(err, devstate.ErrLocked) {
		t.Fatalf("a second -dev on the directory: %v, want ErrLocked", err)
	}
	redisPID := e.RedisPID
	d.Stop()
	if _, err := devstate.ReadEndpoints(); !errors.Is(err, devstate.ErrNotRunning) {
		t.Fatalf("after Stop the endpoints are still there: %v", err)
	}
	if redisPID != 0 && syscall.Kill(redisPID, 0) == nil {
		if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(redisPID) + "/stat"); len(stat) > 0 && !strings.Contains(string(stat), ") Z") {
			t.Fatalf("redis-server %d still runs after Stop", redisPID)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, devstate.RedisDir)); err != nil {
		t.Fatalf("Stop removed Redis' data: %v", err)
	}
	cfg3 := worker.Config{TemporalAddress: "127.0.0.1:7233"}
	d, err = Start(&cfg3, Options{Reset: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	d.Stop()
}

// A state directory that a build of an older record layout wrote (Redis'
// data, no layout file) is refused before anything starts, in words that
// say to run -dev-reset; -dev-reset deletes it and -dev starts on it
// afresh, and marks it as this build's, so the next -dev starts too.
func TestDevRefusesAStateOfAnOlderBuild(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", dir)
	if err := os.MkdirAll(filepath.Join(dir, devstate.RedisDir), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := worker.Config{TemporalAddress: "127.0.0.1:7233"} // given: no embedded Temporal
	if _, err := Start(&cfg, Options{}, quiet); !errors.Is(err, devstate.ErrOlderLayout) || !strings.Contains(err.Error(), "-dev-reset") {
		t.Fatalf("-dev on an older build's state: %v, want ErrOlderLayout saying to run -dev-reset", err)
	}
	if _, err := devstate.ReadEndpoints(); !errors.Is(err, devstate.ErrNotRunning) {
		t.Fatalf("the refused -dev wrote its endpoints: %v", err)
	}
	for _, reset := range []bool{true, false} {
		cfg := worker.Config{TemporalAddress: "127.0.0.1:7233"}
		d, err := Start(&cfg, Options{Reset: reset}, quiet)
		if err != nil {
			t.Fatalf("-dev (reset %v): %v", reset, err)
		}
		d.Stop()
	}
}

// Start refuses to put the embedded Temporal server, which has no
// authentication, on an address other than loopback unless AllowRemote,
// and says how.
func TestStartRefusesARemoteTemporalAddress(t *testing.T) {
	t.Setenv("ONCEFLOW_DEV_STATE_DIR", t.TempDir())
	cfg := worker.Config{RedisURL: "redis://127.0.0.1:1/0"}
	_, err := Start(&cfg, Options{TemporalAddress: "0.0.0.0:7233"}, quiet)
	if err == nil || !strings.Contains(err.Error(), "-dev-allow-remote") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("err = %v, want a refusal naming -dev-allow-remote and loopback", err)
	}
	cfg = worker.Config{RedisURL: "redis://127.0.0.1:1/0"}
	if _, err := Start(&cfg, Options{TemporalAddress: "0.0.0.0:7233", AllowRemote: true}, quiet); !errors.Is(err, errNoDevServer) {
		t.Fatalf("with AllowRemote: %v, want it to go on (to this build's errNoDevServer)", err)
	}
	for addr, want := range map[string]bool{"127.0.0.1:7233": true, "127.1.2.3:0": true, "[::1]:7233": true, "LOCALHOST:1": true,
		":7233": false, "0.0.0.0:7233": false, "[::]:7233": false, "192.0.2.1:7233": false, "dev.example:7233": false, "127.0.0.1": false} {
		if got := LoopbackAddress(addr); got != want {
			t.Errorf("LoopbackAddress(%q) = %v, want %v", addr, got, want)
		}
	}
}

// The production build has no Temporal server for dev-server to run, and
// says how to get one.
func TestDevServerCommandInAProductionBuild(t *testing.T) {
	var out strings.Builder
	err := Command(t.Context(), []string{"-address", "127.0.0.1:0"}, &out)
	if err == nil || !strings.Contains(err.Error(), "go build ./cmd/worker") {
		t.Fatalf("dev-server in a nodev build: %v, want it to say how to get a build with the server", err)
	}
}
