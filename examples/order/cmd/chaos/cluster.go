package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	// The ledger's database drivers, as cmd/worker has them.
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/harness/childproc"
)

// workerPackage is the worker's import path; cmdModule is the module it
// is built in.
const (
	workerPackage = "github.com/onceflow/onceflow/examples/order/cmd/worker"
	cmdModule     = "github.com/onceflow/onceflow/cmd"
)

// cluster is everything the run starts: Temporal, Redis, the workers, and
// the ledger they share.
type cluster struct {
	cfg   config
	log   *slog.Logger
	tl    *timeline
	work  string // removed on close unless -keep
	out   string
	bin   string
	spawn *childproc.Spawner

	temporal                *temporalServer
	temporalAddr, namespace string
	tc                      client.Client
	redis                   redisBackend
	ledgerDSN               string
	pg                      *pgServer // -ledger postgres; else nil
	net                     *network  // with a net phase in -phases; else nil
	ledger                  *ledger.Ledger
	secret                  string
	apiKey                  string // the load's order API key (account "chaos")
	workers                 []*workerProc

	supervisors sync.WaitGroup
	closers     []func()
}

// startCluster starts Temporal, Redis and the workers, and waits until
// every worker is ready. On an error it stops what it started.
func startCluster(ctx context.Context, cfg config, log *slog.Logger, tl *timeline, out string) (_ *cluster, err error) {
	c := &cluster{cfg: cfg, log: log, tl: tl, out: out, spawn: childproc.New()}
	c.closers = append(c.closers, c.spawn.Close)
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if c.work, err = os.MkdirTemp("", "onceflow-chaos-"); err != nil {
		return nil, fmt.Errorf("create a temporary directory (check TMPDIR): %w", err)
	}
	c.closers = append(c.closers, func() {
		if cfg.keep {
			log.Info("chaos: kept the temporary directory (-keep): the worker binary, the SQLite ledger, Redis' data", "dir", c.work)
			return
		}
		_ = os.RemoveAll(c.work)
	})
	if c.bin, err = workerBinary(ctx, cfg.workerBin, c.work, log); err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	c.secret = hex.EncodeToString(secret)

	if c.redis, err = startBackend(ctx, cfg, c, filepath.Join(c.work, "redis")); err != nil {
		return nil, err
	}
	c.closers = append(c.closers, c.redis.kill)

	log.Info("chaos: starting the dev Temporal server")
	if c.temporal, err = startTemporal(ctx, c.work); err != nil {
		return nil, err
	}
	c.closers = append(c.closers, c.temporal.stop)
	addr := c.temporal.addr
	c.temporalAddr, c.namespace = addr, c.temporal.namespace
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	if c.tc, err = client.DialContext(ctx, client.Options{HostPort: addr, Namespace: c.namespace, Logger: quiet}); err != nil {
		return nil, fmt.Errorf("connect to the dev Temporal server at %s: %w", addr, err)
	}
	c.closers = append(c.closers, c.tc.Close)

	switch c.ledgerDSN = cfg.ledgerDSN; {
	case cfg.ledger == ledgerPostgres:
		log.Info("chaos: starting a PostgreSQL cluster of the run's own")
		if c.pg, err = startPostgres(ctx, c.spawn, filepath.Join(out, "postgres.log")); err != nil {
			return nil, err
		}
		c.closers = append(c.closers, c.pg.close)
		c.ledgerDSN = c.pg.dsn("chaos")
	case c.ledgerDSN == "":
		c.ledgerDSN = "sqlite:" + filepath.Join(c.work, "ledger.db")
	}
	if c.ledger, err = ledger.Open(ctx, c.ledgerDSN); err != nil {
		return nil, fmt.Errorf("open the ledger (check -ledger-dsn): %w", err)
	}
	c.closers = append(c.closers, func() { _ = c.ledger.Close() })
	// The order API answers only an account's key: the load is one
	// account, whose key every worker finds in the shared ledger.
	if err := c.ledger.CreateAccount(ctx, "chaos"); err != nil {
		return nil, err
	}
	if c.apiKey, err = c.ledger.IssueAPIKey(ctx, "chaos"); err != nil {
		return nil, err
	}

	if c.net, err = c.startNetwork(); err != nil {
		return nil, err
	}
	for i := range cfg.workers {
		w, err := c.newWorker(i)
		if err != nil {
			return nil, err
		}
		c.workers = append(c.workers, w)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.closers = append(c.closers, func() { stop(); c.supervisors.Wait() })
	for _, w := range c.workers {
		c.supervisors.Go(func() { w.supervise(wctx) })
	}
	for _, w := range c.workers {
		if err := w.waitReady(ctx, time.Minute); err != nil {
			return nil, err
		}
	}
	log.Info("chaos: cluster ready", "temporal", addr, "namespace", c.namespace, "redis", c.redis.describe(), "redis_url", c.redis.url(),
		"ledger", ledger.RedactDSN(c.ledgerDSN), "workers", len(c.workers), "task_queue", cfg.taskQueue)
	return c, nil
}

// startNetwork starts the toxiproxies between the workers and the
// servers when a phase of -phases needs them.
func (c *cluster) startNetwork() (*network, error) {
	need := false
	for _, p := range c.cfg.phases {
		need = need || p.net
	}
	if !need {
		return nil, nil
	}
	ups := map[string]string{linkTemporal: c.temporalAddr}
	var err error
	if ups[linkRedis], err = hostPort(c.redis.url()); err != nil {
		return nil, err
	}
	if strings.HasPrefix(c.ledgerDSN, "postgres") {
		if ups[linkPostgres], err = hostPort(c.ledgerDSN); err != nil {
			return nil, err
		}
	}
	n, err := startNetwork(c.cfg.workers, ups)
	if err != nil {
		return nil, err
	}
	c.closers = append(c.closers, n.close)
	c.log.Info("chaos: toxiproxy between every worker and the servers", "links", len(ups))
	return n, nil
}

// close stops everything, in the reverse order of its start.
func (c *cluster) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

// restartAll restarts every worker at once with k, and waits until they
// are ready.
func (c *cluster) restartAll(ctx context.Context, k knobs) error {
	errs := make([]error, len(c.workers))
	var wg sync.WaitGroup
	for i, w := range c.workers {
		wg.Go(func() { errs[i] = w.restart(ctx, k) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// workerEnv is the environment of the worker processes: the secret, and
// nothing else the worker would read a setting from.
func (c *cluster) workerEnv() []string {
	env := []string{"ONCEFLOW_SECRET=" + c.secret}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// temporalFlags are the Temporal connection flags of the worker and of its
// operator commands.
func (c *cluster) temporalFlags() []string {
	return []string{"-temporal-address", c.temporalAddr, "-namespace", c.namespace}
}

// workerBinary is the worker binary: -worker-bin (as an absolute path),
// else one built into dir.
func workerBinary(ctx context.Context, given, dir string, log *slog.Logger) (string, error) {
	if given == "" {
		return buildWorker(ctx, dir, log)
	}
	path, err := exec.LookPath(given)
	if err != nil {
		return "", fmt.Errorf("-worker-bin %s: %w (give the path of a cmd/worker binary, or leave it out to build one)", given, err)
	}
	return filepath.Abs(path)
}

// buildWorker builds cmd/worker into dir (-tags nodev,simulate: without
// the embedded Temporal server, which the workers do not use, and with the
// gateway simulator's fault knobs, which a production build (-tags nodev)
// leaves out), with -race when chaos itself was built with it.
func buildWorker(ctx context.Context, dir string, log *slog.Logger) (string, error) {
	bin := filepath.Join(dir, "worker")
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", cmdModule)
	modDir, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("find the module %s (run from the repository, or give -worker-bin): %w%s", cmdModule, err, stderrOf(err))
	}
	args := []string{"build", "-tags", "nodev,simulate", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	log.Info("chaos: building the worker", "bin", bin, "race", raceEnabled)
	build := exec.CommandContext(ctx, "go", append(args, workerPackage)...)
	build.Dir = strings.TrimSpace(string(modDir))
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s (fix the build, or give -worker-bin): %w\n%s", workerPackage, err, out)
	}
	return bin, nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// redisServer is the redis-server child process, with its data (AOF,
// appendfsync always) in dir, on one port for its whole life.
type redisServer struct {
	bin, dir, logPath string
	port              int
	spawn             *childproc.Spawner

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedis starts redis-server on a free loopback port.
func startRedis(ctx context.Context, spawn *childproc.Spawner, dir, logPath string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not on PATH: install it (Debian: apt-get install redis-server)")
	}
	r := &redisServer{bin: bin, dir: dir, logPath: logPath, spawn: spawn}
	for range 5 {
		if r.port, err = freePort(); err != nil {
			return nil, err
		}
		if err = r.start(ctx); err == nil {
			return r, nil
		}
	}
	return nil, err
}

func (r *redisServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

func (r *redisServer) url() string { return "redis://" + r.addr() + "/0" }

// start starts the server on its port with whatever data its directory
// holds, and waits until it answers PING (after loading its AOF).
func (r *redisServer) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return fmt.Errorf("create Redis' directory: %w", err)
	}
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", r.dir, "--logfile", r.logPath)
	if err := r.spawn.Start(cmd); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.cmd, r.exited = cmd, exited
	rdb := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer rdb.Close()
	what := fmt.Sprintf("redis-server on port %d", r.port)
	if err := waitServing(ctx, what, cmd, exited, r.logPath, 30*time.Second, func(ctx context.Context) error { return rdb.Ping(ctx).Err() }); err != nil {
		r.cmd = nil
		return err
	}
	return nil
}

// waitServing waits until ping succeeds against the server cmd just
// started (what names it, logPath is its log). When it exits first, or
// does not answer within timeout, it is killed and waitServing says why.
func waitServing(ctx context.Context, what string, cmd *exec.Cmd, exited <-chan struct{}, logPath string, timeout time.Duration, ping func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start: %s", what, tail(logPath, 1500))
		default:
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("%s did not answer (see %s): %w", what, logPath, errors.Join(err, ctx.Err()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the server with SIGKILL and waits until it is gone.
func (r *redisServer) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// wipe kills the server, deletes its data and starts it again empty after
// down.
func (r *redisServer) wipe(ctx context.Context, down time.Duration) error {
	r.kill()
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("delete Redis' data: %w", err)
	}
	sleepCtx(ctx, down)
	return r.start(ctx)
}

// pause sends CLIENT PAUSE for d in mode (ALL or WRITE).
func (r *redisServer) pause(ctx context.Context, d time.Duration, mode string) error {
	rdb := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer rdb.Close()
	return rdb.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), mode).Err()
}

// unpause ends a CLIENT PAUSE.
func (r *redisServer) unpause(ctx context.Context) error {
	rdb := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer rdb.Close()
	return rdb.ClientUnpause(ctx).Err()
}

// workerProc is one worker slot: its HTTP address and log stay; the
// supervisor starts a new process whenever the last one exited.
type workerProc struct {
	c    *cluster
	idx  int
	addr string
	logf *os.File

	mu      sync.Mutex
	knobs   knobs
	proc    *os.Process
	exited  chan struct{}
	planned bool // the exit was asked for: start again at once
	paused  bool // SIGSTOPped
}

func (c *cluster) newWorker(i int) (*workerProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.out, fmt.Sprintf("worker-%d.log", i))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create the worker's log (check -out): %w", err)
	}
	c.closers = append(c.closers, func() { _ = f.Close() })
	return &workerProc{c: c, idx: i, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), logf: f}, nil
}

// args are the worker's flags with the knobs k.
func (w *workerProc) args(k knobs) []string {
	cfg := w.c.cfg
	args := []string{"-temporal-address", w.temporalAddr(), "-namespace", w.c.namespace,
		"-task-queue", cfg.taskQueue, "-redis-url", w.redisURL(), "-ledger-dsn", w.ledgerDSN(), "-http", w.addr,
		"-lease", cfg.lease.String(), "-order-wait", cfg.orderWait.String(), "-stop-timeout", "2s", "-outcome-timeout", "2s",
		"-redis-durability", cfg.durability,
		// The load is one account's, far past the order API's default
		// rate limit: the faults are the run's subject, not the limit.
		"-api-account-limit", "off", "-api-key-limit", "off"}
	if cfg.durability != "none" {
		args = append(args, "-redis-durable-replicas", strconv.Itoa(w.c.redis.durableReplicas()))
	}
	return append(args, k.flags()...)
}

// ledgerDSN is the worker's -ledger-dsn: under -ledger postgres its
// connections are named (application_name) for postgres-kill-backends;
// through its toxiproxy when the network phases run.
func (w *workerProc) ledgerDSN() string {
	dsn := w.c.ledgerDSN
	if w.c.pg != nil {
		dsn = w.c.pg.dsn(workerApp + strconv.Itoa(w.idx))
	}
	if w.c.net != nil && strings.HasPrefix(dsn, "postgres") {
		dsn = withHost(dsn, w.c.net.addr(w.idx, linkPostgres))
	}
	return dsn
}

// redisURL is the worker's -redis-url, through its toxiproxy when the
// network phases run.
func (w *workerProc) redisURL() string {
	if w.c.net != nil {
		return withHost(w.c.redis.url(), w.c.net.addr(w.idx, linkRedis))
	}
	return w.c.redis.url()
}

// temporalAddr is the worker's -temporal-address, through its toxiproxy
// when the network phases run.
func (w *workerProc) temporalAddr() string {
	if w.c.net != nil {
		return w.c.net.addr(w.idx, linkTemporal)
	}
	return w.c.temporalAddr
}

// supervise keeps a worker process running until ctx is done, then kills
// it.
func (w *workerProc) supervise(ctx context.Context) {
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		cmd, exited, err := w.launch()
		if err != nil {
			w.c.log.Error("chaos: cannot start a worker; trying again", "worker", w.idx, "err", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		select {
		case <-exited:
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			return
		}
		w.mu.Lock()
		planned := w.planned
		w.proc, w.paused = nil, false
		w.mu.Unlock()
		if planned {
			backoff = 250 * time.Millisecond
			continue
		}
		what := exitString(cmd.ProcessState)
		w.c.tl.observe("worker " + what)
		w.c.log.Info("chaos: worker exited; starting it again", "worker", w.idx, "exit", what)
		if time.Since(began) < 5*time.Second {
			backoff = min(2*backoff, 4*time.Second)
		} else {
			backoff = 250 * time.Millisecond
		}
		sleepCtx(ctx, backoff)
	}
}

// launch starts a worker process with the slot's knobs.
func (w *workerProc) launch() (*exec.Cmd, chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	args := w.args(w.knobs)
	fmt.Fprintf(w.logf, "=== chaos %s: worker %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), w.c.bin, strings.Join(args, " "))
	cmd := exec.Command(w.c.bin, args...)
	cmd.Env = w.c.workerEnv()
	cmd.Stdout, cmd.Stderr = w.logf, w.logf
	if err := w.c.spawn.Start(cmd); err != nil {
		return nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	w.proc, w.exited, w.planned, w.paused = cmd.Process, exited, false, false
	return cmd, exited, nil
}

// restart stops the worker (SIGTERM: in-flight activities get the stop
// timeout; SIGKILL after 15s), lets the supervisor start it with k, and
// waits until it is ready.
func (w *workerProc) restart(ctx context.Context, k knobs) error {
	w.mu.Lock()
	w.knobs = k
	p, exited, paused := w.proc, w.exited, w.paused
	if p != nil {
		w.planned = true
	}
	w.mu.Unlock()
	if p != nil {
		if paused {
			_ = p.Signal(syscall.SIGCONT)
		}
		_ = p.Signal(syscall.SIGTERM)
		t := time.NewTimer(15 * time.Second)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			_ = p.Kill()
			<-exited
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.waitReady(ctx, time.Minute)
}

// signal sends sig to the running process; false when there is none.
func (w *workerProc) signal(sig syscall.Signal) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.proc != nil && w.proc.Signal(sig) == nil
}

// pause stops the process with SIGSTOP for d, then continues it (unless
// it was replaced meanwhile); false when there was no process to stop.
func (w *workerProc) pause(ctx context.Context, d time.Duration) bool {
	w.mu.Lock()
	p := w.proc
	if p == nil || w.paused || p.Signal(syscall.SIGSTOP) != nil {
		w.mu.Unlock()
		return false
	}
	w.paused = true
	w.mu.Unlock()
	sleepCtx(ctx, d)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc == p && w.paused {
		_ = p.Signal(syscall.SIGCONT)
		w.paused = false
	}
	return true
}

// waitReady waits until the worker answers GET /readyz with 200.
func (w *workerProc) waitReady(ctx context.Context, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	deadline := time.Now().Add(timeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.addr+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker %d at %s is not ready after %v: see %s", w.idx, w.addr, timeout, w.logf.Name())
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// exitString says how a process ended.
func exitString(s *os.ProcessState) string {
	if s == nil {
		return "exit: unknown"
	}
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	if s.ExitCode() == 3 {
		return "exit status 3 (crash after charge)"
	}
	return "exit status " + strconv.Itoa(s.ExitCode())
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the end of a file, for an error message.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}
