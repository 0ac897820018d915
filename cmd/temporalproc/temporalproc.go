// Package temporalproc runs the dev Temporal server (`worker dev-server`,
// the development build of cmd/worker) as a child process, on a free
// loopback port: the end-to-end tests, cmd/chaos and cmd/idembench use it,
// so their race-instrumented binaries do not link the Temporal server, and
// CI compiles the server once, without the race detector. It runs in
// memory, or on a SQLite file (Options.DBFile) that outlives a kill -9:
// cmd/chaos kills it and starts it again on the same address and file.
//
// The binary is $ONCEFLOW_DEV_WORKER when set (scripts/test builds it once
// for every test binary), else it is built into a temporary directory
// with `go build`. The child dies with its parent (package childproc,
// and its stdin closing).
package temporalproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/harness/childproc"
)

// EnvBinary names a prebuilt development build of cmd/worker
// (go build ./cmd/worker, no tags).
const EnvBinary = "ONCEFLOW_DEV_WORKER"

const (
	pkg       = "github.com/onceflow/onceflow/cmd/worker"
	cmdModule = "github.com/onceflow/onceflow/cmd"
)

// Server is a running `worker dev-server`.
type Server struct {
	addr, namespace string
	cmd             *exec.Cmd
	stdin           io.Closer
	spawn           *childproc.Spawner
	exited          chan struct{}
	tmp             string
}

// Options say how to start the server; the zero value is what Start
// does.
type Options struct {
	// Binary is a development build of cmd/worker. Default: $ONCEFLOW_DEV_WORKER,
	// else one built into a temporary directory (removed by Stop).
	Binary string
	// Address is the frontend's host:port on loopback. Default: a free
	// port. A restart gives the address the killed server had.
	Address string
	// DBFile is the SQLite file the server keeps its state in (created
	// with its schema when missing). Default: in memory, gone with the
	// process.
	DBFile string
	// Namespace is the one namespace it registers (if missing). Default:
	// a random name, so that nothing passes by assuming "default".
	Namespace string
}

// Start builds the development worker if needed and starts its
// dev-server in memory on a free port, with one namespace of a random
// name (so that nothing passes by assuming "default").
func Start(ctx context.Context) (*Server, error) { return StartWith(ctx, Options{}) }

// StartWith starts the dev-server as opts say, and returns once it
// accepts connections.
func StartWith(ctx context.Context, opts Options) (*Server, error) {
	s := &Server{namespace: opts.Namespace}
	if s.namespace == "" {
		s.namespace = "onceflow-test-" + strconv.FormatUint(rand.Uint64()%1e6, 10)
	}
	addr := opts.Address
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	bin := opts.Binary
	if bin == "" {
		bin = os.Getenv(EnvBinary)
	}
	if bin == "" {
		var err error
		if s.tmp, err = os.MkdirTemp("", "onceflow-dev-worker-"); err != nil {
			return nil, err
		}
		if bin, err = Build(ctx, s.tmp); err != nil {
			_ = os.RemoveAll(s.tmp)
			return nil, err
		}
	}
	args := []string{"dev-server", "-address", addr, "-namespace", s.namespace, "-exit-on-stdin-eof"}
	if opts.DBFile != "" {
		args = append(args, "-db-file", opts.DBFile)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stderr = os.Stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	s.stdin = stdin
	s.spawn = childproc.New()
	if err := s.spawn.Start(s.cmd); err != nil {
		s.spawn.Close()
		return nil, fmt.Errorf("temporalproc: start %s: %w", bin, err)
	}
	s.exited = make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	select {
	case l := <-lines:
		addr, ok := strings.CutPrefix(l, "listening ")
		if !ok {
			s.Stop()
			return nil, fmt.Errorf("temporalproc: dev-server said %q, want \"listening ADDRESS\"", l)
		}
		s.addr = addr
		return s, nil
	case <-s.exited:
		// The exit status tells a server that failed (its errors are on
		// stderr) from one a signal ended (nothing printed).
		status := "unknown status"
		if ps := s.cmd.ProcessState; ps != nil {
			status = ps.String()
		}
		s.Stop()
		return nil, fmt.Errorf("temporalproc: worker dev-server exited at start (%s; its errors, if any, are above)", status)
	case <-time.After(2 * time.Minute):
		s.Stop()
		return nil, errors.New("temporalproc: worker dev-server did not come up in 2 minutes")
	case <-ctx.Done():
		s.Stop()
		return nil, ctx.Err()
	}
}

// Build builds the development worker into dir (without the race
// detector: here it is the server, not the code under test) and returns
// its path.
func Build(ctx context.Context, dir string) (string, error) {
	modDir, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", cmdModule).Output()
	if err != nil {
		return "", fmt.Errorf("temporalproc: find the module %s (run from the repository, or set %s): %w", cmdModule, EnvBinary, err)
	}
	bin := filepath.Join(dir, "worker")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	build.Dir = strings.TrimSpace(string(modDir))
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("temporalproc: go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// Address is the frontend's host:port.
func (s *Server) Address() string { return s.addr }

// Namespace is the namespace it registered.
func (s *Server) Namespace() string { return s.namespace }

// Stop stops the server (closing its stdin; SIGKILL after 10 s) and
// removes the binary Start built.
func (s *Server) Stop() {
	_ = s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.release()
}

// Kill stops the server with SIGKILL, as a crash would, waits until it is
// gone, and removes the binary Start built. With Options.DBFile, what it
// committed stays in the file for the next StartWith.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	_ = s.stdin.Close()
	s.release()
}

func (s *Server) release() {
	s.spawn.Close()
	if s.tmp != "" {
		_ = os.RemoveAll(s.tmp)
	}
}
