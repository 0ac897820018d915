// Package redisproc runs redis-server as a child process on a free
// loopback port, keeping nothing on disk. Tests use it through
// internal/redistest; `cmd/worker -dev` uses it when redis-server is on
// PATH.
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
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotInstalled: there is no redis-server on PATH.
var ErrNotInstalled = errors.New("redisproc: redis-server is not on PATH (install Debian's redis-server)")

// Server is a redis-server child process.
type Server struct {
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server on a free loopback port in a new temporary
// directory and waits until it answers PING.
func Start() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "onceflow-redis-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	for try := 0; try < 5; try++ {
		if s.port, err = freePort(); err != nil {
			break
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

// Restart starts the server again on the same port, empty.
func (s *Server) Restart() error {
	s.Kill()
	return s.launch()
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
