// Package redistest runs real redis-server processes for tests: a shared
// one per test binary (or the server named by REDIS_URL), private ones that
// a test may kill and restart, read-only replicas of them (StartReplica),
// and a TCP proxy that injects faults.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/harness/redisproc"
)

var (
	sharedMu   sync.Mutex
	sharedAddr string
)

// Main runs the tests of a package against one shared Redis: the one at
// REDIS_URL when set, otherwise a redis-server started here on a free
// loopback port and stopped afterwards. A missing redis-server binary fails
// the run loudly.
func Main(m *testing.M) {
	os.Exit(With(m.Run))
}

// With runs run (usually a TestMain's m.Run, after more setup) with the
// shared Redis up, and returns its exit code.
func With(run func() int) int {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			fmt.Fprintf(os.Stderr, "redistest: REDIS_URL %q: %v\n", url, err)
			return 2
		}
		sharedAddr = opt.Addr
		return run()
	}
	srv, err := redisproc.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "redistest: %v\n", err)
		return 2
	}
	sharedAddr = srv.Addr()
	code := run()
	srv.Close()
	return code
}

// Addr returns the shared server's address. Main must have run.
func Addr(tb testing.TB) string {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedAddr == "" {
		tb.Fatal("redistest: no shared Redis; call redistest.Main(m) from TestMain")
	}
	return sharedAddr
}

// Client returns a client of the shared server, closed when the test ends.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return NewClient(tb, Addr(tb))
}

// NewClient returns a client of addr with the options the store expects
// (ContextTimeoutEnabled), closed when the test ends.
func NewClient(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Namespace returns a key namespace no other test uses.
func Namespace(tb testing.TB) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

// Server is a private redis-server process.
type Server = redisproc.Server

// Start starts a private redis-server for one test and stops it when the
// test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := redisproc.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// StartReplica starts a private redis-server that replicates the server
// at primary (REPLICAOF; read-only, as replicas are by default), waits
// until it has synced, and stops it when the test ends. It sets the
// primary's repl-diskless-sync-delay to 0 so the sync starts at once.
func StartReplica(tb testing.TB, primary string) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		tb.Fatalf("redistest: primary address %q: %v", primary, err)
	}
	ctx := context.Background()
	pc := redis.NewClient(&redis.Options{Addr: primary})
	defer pc.Close()
	if err := pc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		tb.Fatalf("redistest: primary %s: %v", primary, err)
	}
	s := Start(tb)
	rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rc.Close()
	if err := rc.ReplicaOf(ctx, host, port).Err(); err != nil {
		tb.Fatalf("redistest: REPLICAOF %s on %s: %v", primary, s.Addr(), err)
	}
	WaitFor(tb, 10*time.Second, func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, "redistest: the replica %s never synced with %s", s.Addr(), primary)
	return s
}

// WaitFor checks cond on a 10 ms ticker until it holds, and fails tb
// (Fatalf with format and args) when it does not within timeout: the wait
// for a state of a server that sends no signal (replication, an
// append-only rewrite).
func WaitFor(tb testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			tb.Fatalf(format, args...)
		case <-tick.C:
		}
	}
}

// SharedAddr returns the shared server's address, or "" outside Main. For
// examples, which get no testing.TB.
func SharedAddr() string {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return sharedAddr
}

// MainM adapts a *testing.M to run with the shared Redis up, for
// goleak.VerifyTestMain(redistest.MainM(m)): the leak check then runs after
// every test and the shared server are done.
func MainM(m *testing.M) interface{ Run() int } { return withRedis{m} }

type withRedis struct{ m *testing.M }

func (w withRedis) Run() int { return With(w.m.Run) }
