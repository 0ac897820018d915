// Package redisproc runs redis-server as a child process on a free
// loopback port: keeping nothing on disk (Start: the tests, through
// package redistest), its data in a directory with an append-only file
// (StartIn: `cmd/worker -dev`, whose records outlive a restart), or with
// the caller's arguments and config file (StartArgs: the replicas,
// Sentinels and Cluster nodes of package redistopo). The child dies with
// its parent (package childproc): a parent killed with SIGKILL leaves no
// redis-server behind on Linux.
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

	"github.com/onceflow/onceflow/harness/childproc"
)

// EnvServer names the redis-server binary to run instead of the one on
// PATH: a newer server, or Valkey, for the tests that need one (the
// WAITAOF test needs Redis 7.2 or newer; docs/production.md).
const EnvServer = "ONCEFLOW_REDIS_SERVER"

// ErrNotInstalled: there is no redis-server on PATH.
var ErrNotInstalled = errors.New("redisproc: redis-server is not on PATH (install Debian's redis-server)")

// Server is a redis-server child process.
type Server struct {
	bin     string
	port    int
	dir     string
	durable bool     // dir is the caller's and holds an AOF
	keepDir bool     // dir is the caller's
	conf    string   // a config file, first on the command line ("": none)
	args    []string // after the common arguments
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
	s, err := start(&Server{dir: dir}, 0)
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
	return start(&Server{dir: dir, durable: true, keepDir: true}, 0)
}

// StartArgs starts redis-server in dir (created if missing; kept by Close)
// with args after the common ones (a later argument wins over an earlier
// one of the same name), and with the config file conf written to
// dir/redis.conf first on its command line when conf is not empty (a
// Sentinel needs a config file it can rewrite). The server keeps nothing
// on disk unless args say so. port 0 picks a free port. It waits until the
// server answers PING.
func StartArgs(dir string, port int, conf string, args ...string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redisproc: create %s: %w", dir, err)
	}
	s := &Server{dir: dir, keepDir: true, args: args}
	if conf != "" {
		s.conf = filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			return nil, fmt.Errorf("redisproc: write %s: %w", s.conf, err)
		}
	}
	return start(s, port)
}

func start(s *Server, port int) (*Server, error) {
	name := "redis-server"
	if b := os.Getenv(EnvServer); b != "" {
		name = b
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		if name != "redis-server" {
			return nil, fmt.Errorf("redisproc: $%s %s: %w", EnvServer, name, err)
		}
		return nil, ErrNotInstalled
	}
	s.bin, s.spawn = bin, childproc.New()
	for try := 0; try < 5; try++ {
		if s.port = port; port == 0 {
			if s.port, err = freePort(); err != nil {
				break
			}
		}
		if err = s.launch(); err == nil || port != 0 {
			break
		}
	}
	if err != nil {
		s.spawn.Close()
		return nil, err
	}
	return s, nil
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

// Port is the server's loopback port.
func (s *Server) Port() int { return s.port }

// Addr is the server's "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func (s *Server) launch() error {
	appendonly := []string{"--appendonly", "no"}
	if s.durable {
		appendonly = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	var argv []string
	if s.conf != "" {
		argv = append(argv, s.conf)
	}
	argv = append(argv, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "",
		"--dir", s.dir, "--logfile", "redis.log", "--protected-mode", "no")
	argv = append(append(argv, appendonly...), s.args...)
	cmd := exec.Command(s.bin, argv...)
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
			s.cmd = nil
			return fmt.Errorf("redisproc: redis-server on port %d exited: %s", s.port, s.LogTail(2000))
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redisproc: redis-server on port %d did not answer PING: %w", s.port, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// LogTail is the last n bytes of the server's log, for an error message.
func (s *Server) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
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

// Restart starts the server again on the same port with the same
// arguments (after a Kill, or killing it first): empty, or for a StartIn
// server with what its append-only file holds.
func (s *Server) Restart() error {
	s.Kill()
	return s.launch()
}

// Close stops the server. A StartIn server gets SIGTERM, so it fsyncs its
// append-only file and exits (SIGKILL after 10 s), and its directory is
// kept; a StartArgs server is killed and its directory kept; a Start
// server is killed and its directory removed.
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
	if !s.keepDir {
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
