package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/cmd/devstate"
	"github.com/onceflow/onceflow/cmd/temporalproc"
	"github.com/onceflow/onceflow/examples/order/internal/trail"
	"github.com/onceflow/onceflow/harness/childproc"
)

// devWorker is one `worker -dev` process on a state directory.
type devWorker struct {
	t            *testing.T
	bin, state   string
	temporalAddr string
	httpAddr     string
	spawn        *childproc.Spawner
	cmd          *exec.Cmd
	exited       chan struct{}
	ends         devstate.Endpoints
	log          *syncBuffer // the running worker's output
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDevMode runs the README's -dev story for real on the development
// build: the crash walk-through (a worker that crashes right after the
// gateway charged; -dev started again; the order completes with the one
// charge), an order placed before a restart that replays after it with
// the same order ID and payment and no second charge, no redis-server
// left behind by a crashed or SIGKILLed worker, -dev-reset, a taken
// Temporal address named with the flag that moves it, and the public dev
// account and payment provider the docs' curl commands use.
func TestDevMode(t *testing.T) {
	t.Parallel()
	bin := os.Getenv(temporalproc.EnvBinary)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "worker")
		build := exec.Command("go", "build", "-o", bin, "github.com/onceflow/onceflow/examples/order/cmd/worker")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./examples/order/cmd/worker: %v\n%s", err, out)
		}
	}
	spawn := childproc.New()
	t.Cleanup(spawn.Close)
	d := &devWorker{t: t, bin: bin, state: t.TempDir(), spawn: spawn,
		temporalAddr: "127.0.0.1:" + strconv.Itoa(freeTCPPort(t)), httpAddr: "127.0.0.1:" + strconv.Itoa(freeTCPPort(t))}

	// The crash walk-through: charge, crash, start again, one charge.
	d.start("-gateway-crash-after-charge", "1")
	crashedRedis := d.ends.RedisPID
	d.run("order", "-dev", "-order-id", "o-crash", "-wait", "0")
	d.waitExit(2 * time.Minute)
	if code := d.cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("the worker exited with %d, want 3 (the crash hook)", code)
	}
	waitGone(t, crashedRedis, "the crashed worker's redis-server")
	d.start()
	res := d.orderResult("o-crash", "-wait", "2m")
	if res.Status != "completed" || res.PaymentID == "" {
		t.Fatalf("after the crash and a restart the order ended %+v, want completed with a payment", res)
	}
	d.wantOneCharge("o-crash")

	// An order placed before a restart replays after it.
	before := d.orderResult("o-keep", "-wait", "1m")
	d.stop()
	d.start()
	out := d.run("order", "-dev", "-order-id", "o-keep", "-wait", "1m")
	if !strings.Contains(out, "already ran") {
		t.Fatalf("placing o-keep again after the restart printed %q, want its earlier result", out)
	}
	after := decodeResult(t, out)
	if after != before {
		t.Fatalf("o-keep after the restart %+v, before %+v: want the same result", after, before)
	}
	d.wantOneCharge("o-keep")
	d.devCredentials() // the docs' curl commands
	d.consoleAnnounced()

	// A taken Temporal address: the error names the flag that moves it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other := &devWorker{t: t, bin: bin, state: t.TempDir(), spawn: spawn, temporalAddr: l.Addr().String(), httpAddr: "off"}
	if out, err := other.command("-dev").CombinedOutput(); err == nil || !strings.Contains(string(out), "-dev-temporal-address") {
		t.Fatalf("-dev on a taken address: %v\n%s\nwant an error naming -dev-temporal-address", err, out)
	}

	// SIGKILL leaves no redis-server behind.
	killedRedis := d.ends.RedisPID
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitExit(time.Minute)
	waitGone(t, killedRedis, "the SIGKILLed worker's redis-server")

	// -dev-reset starts from nothing: the orders are gone.
	d.start("-dev-reset")
	if out, err := d.command("ledger", "-dev", "-order-id", "o-keep").CombinedOutput(); err == nil || !strings.Contains(string(out), "no order") {
		t.Fatalf("after -dev-reset the ledger still has o-keep: %v\n%s", err, out)
	}
	d.stop()
}

// consoleAnnounced: the -dev worker prints the console's address at
// startup, and its address's / leads there.
func (d *devWorker) consoleAnnounced() {
	d.t.Helper()
	want := "url=http://" + d.httpAddr + "/console"
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(d.log.String(), want) {
		if time.Now().After(deadline) {
			d.t.Fatalf("the -dev worker never printed %q:\n%s", want, d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get("http://" + d.httpAddr + "/")
	if err != nil {
		d.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console" {
		d.t.Fatalf("GET /: %d, Location %q; want 302 to /console", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// command is the dev worker binary with args, in the state directory's
// environment, and none of the servers' variables of the test's own.
func (d *devWorker) command(args ...string) *exec.Cmd {
	cmd := exec.Command(d.bin, args...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "REDIS_URL", "LEDGER_DSN", "ONCEFLOW_SECRET", "HTTP_ADDR", "ONCEFLOW_DEV_STATE_DIR":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "ONCEFLOW_DEV_STATE_DIR="+d.state, "ONCEFLOW_DEV_TEMPORAL_ADDRESS="+d.temporalAddr, "HTTP_ADDR="+d.httpAddr)
	return cmd
}

// start starts `worker -dev` with extra flags and waits until it serves
// /readyz and has written its endpoints.
func (d *devWorker) start(extra ...string) {
	d.t.Helper()
	d.cmd = d.command(append([]string{"-dev", "-lease", "3s"}, extra...)...)
	log := &syncBuffer{}
	d.log = log
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.spawn.Start(d.cmd); err != nil {
		d.t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.cmd, d.exited)
	d.t.Cleanup(func() { _ = d.cmd.Process.Kill() })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-d.exited:
			// Wait has returned: ProcessState says how it ended (an
			// exit code, or the signal that killed it), which the log
			// cannot when the process was killed; the embedded Temporal
			// server logs to a file of the state, not to stderr, so a
			// fatal error of its own is only there.
			d.t.Fatalf("worker -dev %v exited at start (%v):\n%s\nthe end of %s:\n%s", extra, d.cmd.ProcessState, log.String(),
				devstate.TemporalLog, tail(filepath.Join(d.state, devstate.TemporalLog), 4096))
		default:
		}
		if e, err := d.readEndpoints(); err == nil && e.PID == d.cmd.Process.Pid && ready(d.httpAddr) {
			d.ends = e
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("worker -dev %v not ready in 2 minutes:\n%s", extra, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *devWorker) readEndpoints() (devstate.Endpoints, error) {
	b, err := os.ReadFile(filepath.Join(d.state, devstate.EndpointsFile))
	if err != nil {
		return devstate.Endpoints{}, err
	}
	var e devstate.Endpoints
	return e, json.Unmarshal(b, &e)
}

// stop stops the worker with SIGTERM, as Ctrl-C would, and waits.
func (d *devWorker) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	d.waitExit(time.Minute)
	if _, err := d.readEndpoints(); !errors.Is(err, os.ErrNotExist) {
		d.t.Fatalf("a stopped -dev worker left its endpoints file: %v", err)
	}
}

func (d *devWorker) waitExit(timeout time.Duration) {
	d.t.Helper()
	select {
	case <-d.exited:
	case <-time.After(timeout):
		d.t.Fatalf("the worker did not exit in %v", timeout)
	}
}

// run runs a command of the binary and returns its output.
func (d *devWorker) run(args ...string) string {
	d.t.Helper()
	out, err := d.command(args...).CombinedOutput()
	if err != nil {
		d.t.Fatalf("worker %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// orderResult places (or attaches to) an order with `worker order -dev`
// and returns its result.
func (d *devWorker) orderResult(id string, args ...string) orderResultJSON {
	d.t.Helper()
	return decodeResult(d.t, d.run(append([]string{"order", "-dev", "-order-id", id}, args...)...))
}

// wantOneCharge: the gateway charged the order exactly once.
func (d *devWorker) wantOneCharge(id string) {
	d.t.Helper()
	var rows trail.Rows
	if err := json.Unmarshal([]byte(d.run("ledger", "-dev", "-json", "-order-id", id)), &rows); err != nil {
		d.t.Fatal(err)
	}
	charges := 0
	for _, c := range rows.GatewayCalls {
		if c.Charged() {
			charges++
		}
	}
	if charges != 1 || len(rows.Payments) != 1 {
		d.t.Fatalf("order %s: %d charges and %d payments, want 1 and 1: %+v", id, charges, len(rows.Payments), rows.GatewayCalls)
	}
}

type orderResultJSON struct {
	OrderID   string `json:"order_id"`
	Status    string `json:"status"`
	PaymentID string `json:"payment_id"`
	Charged   int64  `json:"charged_cents"`
}

// decodeResult reads the JSON result `worker order` prints after its
// first line.
func decodeResult(t *testing.T, out string) orderResultJSON {
	t.Helper()
	i := strings.IndexByte(out, '{')
	var r orderResultJSON
	if i < 0 || json.Unmarshal([]byte(out[i:]), &r) != nil {
		t.Fatalf("worker order printed no result: %q", out)
	}
	return r
}

func ready(addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitGone waits until pid no longer runs (a zombie counts as gone).
// tail is the last n bytes of the file at path, or why there are none.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-n):])
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	if pid == 0 {
		t.Fatalf("%s: no PID in the endpoints file", what)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		s := string(stat)
		if err != nil || strings.Contains(s[strings.LastIndexByte(s, ')')+1:], " Z ") {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) outlived its worker", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
