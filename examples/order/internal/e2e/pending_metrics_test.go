package e2e_test

// Pending recoveries found by visibility, and the metrics the shipped
// alert rules and dashboard use, on a running `worker -dev`.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/cmd/temporalproc"
	"github.com/onceflow/onceflow/harness/childproc"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/operator"
)

// TestPendingRecoveriesSurviveARestart: three orders whose charges time
// out after the money is taken wait for a decision; after the worker
// restarts, onceflow_pending_recoveries on its first scrape and `worker
// pending` both say 3. Every metric name deploy/prometheus/rules.yml and
// deploy/grafana/onceflow.json use is on the worker's /metrics.
func TestPendingRecoveriesSurviveARestart(t *testing.T) {
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

	d.start("-gateway-timeout-after-charge", "1")
	for _, id := range []string{"o-pending-1", "o-pending-2", "o-pending-3"} {
		d.run("order", "-dev", "-order-id", id, "-skip-reconcile", "-wait", "0")
	}
	var list []operator.Waiting
	deadline := time.Now().Add(time.Minute)
	for {
		list = nil
		if err := json.Unmarshal([]byte(d.run("pending", "-dev", "-json")), &list); err != nil {
			t.Fatal(err)
		}
		if len(list) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // visibility is not signalled
	}
	if len(list) != 3 {
		t.Fatalf("before the restart `worker pending` lists %d workflows, want 3: %+v", len(list), list)
	}
	seen := metricNames(t, scrape(t, d.httpAddr))

	d.stop()
	d.start()
	page := scrape(t, d.httpAddr)
	if got := sample(page, "onceflow_pending_recoveries"); got != "3" {
		t.Errorf("after the restart onceflow_pending_recoveries is %q on the first scrape, want 3:\n%s", got, grepLines(page, "onceflow_"))
	}
	list = nil
	if err := json.Unmarshal([]byte(d.run("pending", "-dev", "-json")), &list); err != nil {
		t.Fatal(err)
	}
	incidents := 0
	for _, w := range list {
		incidents += len(w.Pending)
		if w.Count != 1 || len(w.Pending) != 1 || !strings.HasPrefix(w.WorkflowID, "order-o-pending-") {
			t.Errorf("after the restart `worker pending` lists %+v, want one charge of order-o-pending-*", w)
		}
	}
	if len(list) != 3 || incidents != 3 {
		t.Errorf("after the restart `worker pending` lists %d workflows with %d incidents, want 3 and 3", len(list), incidents)
	}
	table := d.run("pending", "-dev")
	if n := strings.Count(table, "order-o-pending-"); n < 3 {
		t.Errorf("the pending table names %d of the orders, want 3:\n%s", n, table)
	}

	for name := range metricNames(t, page) {
		seen[name] = true
	}
	for _, file := range []string{"../../../../deploy/prometheus/rules.yml", "../../../../deploy/grafana/onceflow.json"} {
		used := usedMetrics(t, file)
		if len(used) < 4 {
			t.Fatalf("%s uses only %v: the pattern is stale", file, used)
		}
		for _, name := range used {
			if !seen[name] {
				t.Errorf("%s uses %s, which the worker's /metrics does not have", file, name)
			}
		}
	}
	d.stop()
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sample is the value of the unlabelled series name on a /metrics page.
func sample(page, name string) string {
	for _, l := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
		if rest, ok := strings.CutPrefix(l, name+"{"); ok {
			if _, v, ok := strings.Cut(rest, "} "); ok {
				return v
			}
		}
	}
	return ""
}

// metricNames are the series names of a /metrics page.
func metricNames(t *testing.T, page string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, l := range strings.Split(page, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		names[l[:strings.IndexAny(l, "{ ")]] = true
	}
	return names
}

var metricName = regexp.MustCompile(`\b(?:onceflow|temporal)_[a-z_]+[a-z]`)

// usedMetrics are the onceflow_ and temporal_ metric names a file uses.
func usedMetrics(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range metricName.FindAllString(string(b), -1) {
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	return names
}

// TestPendingNeedsTheSearchAttribute: on a namespace without
// OnceflowPending, the worker's start check, the count behind the gauge
// and `worker pending` each fail with an error that says how to register
// it.
func TestPendingNeedsTheSearchAttribute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 0)
	ns := "bare-" + storetest.RandomHex(6)
	if _, err := h.tc.WorkflowService().RegisterNamespace(t.Context(), &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	tc, err := client.Dial(client.Options{HostPort: temporalServer.Address(), Namespace: ns, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var checkErr error
	h.waitFor("the new namespace", func() bool {
		checkErr = operator.CheckPendingAttribute(t.Context(), tc, ns)
		var nf *serviceerror.NamespaceNotFound
		return !errors.As(checkErr, &nf)
	})
	const fix = "temporal operator search-attribute create --name OnceflowPending --type Int"
	if !errors.Is(checkErr, operator.ErrPendingAttributeMissing) || !strings.Contains(checkErr.Error(), fix) {
		t.Errorf("CheckPendingAttribute: %v, want ErrPendingAttributeMissing naming %q", checkErr, fix)
	}
	if _, err := operator.CountPending(t.Context(), tc, ns, ""); !errors.Is(err, operator.ErrPendingAttributeMissing) {
		t.Errorf("CountPending: %v, want ErrPendingAttributeMissing", err)
	}
	var out bytes.Buffer
	err = cli.RunOperator(t.Context(), "pending", []string{"-temporal-address", temporalServer.Address(), "-namespace", ns}, func(string) string { return "" }, &out, nil)
	if !errors.Is(err, operator.ErrPendingAttributeMissing) || !strings.Contains(err.Error(), fix) {
		t.Errorf("worker pending: %v, want an error naming %q", err, fix)
	}
	// Where it is registered, the check passes.
	if err := operator.CheckPendingAttribute(t.Context(), h.tc, temporalServer.Namespace()); err != nil {
		t.Errorf("CheckPendingAttribute on the test server's namespace: %v", err)
	}
}
