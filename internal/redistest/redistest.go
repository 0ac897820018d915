// Package redistest runs real redis-server processes for tests: a shared
// one per test binary (or the server named by REDIS_URL), private ones that
// a test may kill and restart, and a TCP proxy that injects faults.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	sharedMu   sync.Mutex
	sharedAddr string
	sharedSrv  *Server
)

// Main runs the tests of a package against one shared Redis: the one at
// REDIS_URL when set, otherwise a redis-server started here on a free
// loopback port and stopped afterwards. A missing redis-server binary fails
// the run loudly.
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			fmt.Fprintf(os.Stderr, "redistest: REDIS_URL %q: %v\n", url, err)
			return 2
		}
		sharedAddr = opt.Addr
		return m.Run()
	}
	srv, err := start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "redistest: %v\n", err)
		return 2
	}
	sharedSrv, sharedAddr = srv, srv.Addr()
	code := m.Run()
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

// Server is a redis-server child process.
type Server struct {
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a private redis-server for one test and stops it when the
// test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

func start() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (install Debian's redis-server, or set REDIS_URL): %w", err)
	}
	dir, err := os.MkdirTemp("", "onceflow-redis-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	for try := 0; try < 5; try++ {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		if err = s.launch(); err == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

// Addr is the server's "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func (s *Server) launch() error {
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", "redis.log", "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(s.dir + "/redis.log")
			return fmt.Errorf("redis-server on port %d exited: %s", s.port, log)
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d did not answer PING: %w", s.port, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL and waits for it to exit. Everything
// in it is lost (it keeps nothing on disk).
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Kill()
	if err := s.launch(); err != nil {
		tb.Fatal(err)
	}
}

// Close kills the server and removes its directory.
func (s *Server) Close() {
	s.Kill()
	_ = os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// SharedAddr returns the shared server's address, or "" outside Main. For
// examples, which get no testing.TB.
func SharedAddr() string {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return sharedAddr
}
