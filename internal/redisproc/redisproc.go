// Package redisproc runs redis-server as a child process on a free
// loopback port: keeping nothing on disk (Start: the tests, through
// internal/redistest), or its data in a directory with an append-only file
// (StartIn: `cmd/worker -dev`, whose records outlive a restart). The child
// dies with its parent (package childproc): a parent killed with SIGKILL
// leaves no redis-server behind on Linux.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/internal/childproc"
)

// ErrNotInstalled: there is no redis-server on PATH.
var ErrNotInstalled = errors.New("redisproc: redis-server is not on PATH (install Debian's redis-server)")

// Server is a redis-server child process.
type Server struct {
	bin     string
	port    int
	dir     string
	durable bool // dir is the caller's and holds an AOF
	spawn   *childproc.Spawner
	cmd     *exec.Cmd
	done    chan struct{}
}

// Start starts redis-server on a free loopback port in a new temporary
// directory, keeping nothing on disk, and waits until it answers PING.
func Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "onceflow-redis-")
	if err != nil {
		return nil, err
	}
	s, err := start(dir, false)
	if err != nil {
		_ = os.RemoveAll(dir)
	}
	return s, err
}

// StartIn starts redis-server on a free loopback port with its data in
// dir (created if missing): an append-only file fsynced on every write
// (appendfsync always), loaded again by the next StartIn on the same
// directory. It waits until the server answers PING, so after loading.
// Close stops it gracefully and keeps dir.
func StartIn(dir string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redisproc: create %s: %w", dir, err)
	}
	return start(dir, true)
}

func start(dir string, durable bool) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	s := &Server{bin: bin, dir: dir, durable: durable, spawn: childproc.New()}
	for try := 0; try < 5; try++ {
		if s.port, err = freePort(); err != nil {
			break
		}
		if err = s.launch(); err == nil {
			return s, nil
		}
	}
	s.spawn.Close()
	return nil, err
}

// Dir is the directory of the server's data and log (redis.log).
func (s *Server) Dir() string { return s.dir }

// PID is the server process' ID, 0 when it is not running.
func (s *Server) PID() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Addr is the server's "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func (s *Server) launch() error {
	appendonly := []string{"--appendonly", "no"}
	if s.durable {
		appendonly = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	cmd := exec.Command(s.bin, append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "",
		"--dir", s.dir, "--logfile", "redis.log", "--protected-mode", "no"}, appendonly...)...)
	if err := s.spawn.Start(cmd); err != nil {
		return fmt.Errorf("redisproc: start redis-server: %w", err)
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
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.cmd = nil
			return fmt.Errorf("redisproc: redis-server on port %d exited: %s", s.port, log)
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redisproc: redis-server on port %d did not answer PING: %w", s.port, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL and waits for it to exit. Everything
// in it is lost.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port: empty, or for a
// StartIn server with what its append-only file holds.
func (s *Server) Restart() error {
	s.Kill()
	return s.launch()
}

// Close stops the server. A StartIn server gets SIGTERM, so it fsyncs its
// append-only file and exits (SIGKILL after 10 s), and its directory is
// kept; a Start server is killed and its directory removed.
func (s *Server) Close() {
	if s.durable && s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
			s.cmd = nil
		case <-time.After(10 * time.Second):
		}
	}
	s.Kill()
	s.spawn.Close()
	if !s.durable {
		_ = os.RemoveAll(s.dir)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
