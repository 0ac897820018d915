package e2e_test

// End-to-end tests of recovery: decisions per incident, the Update's
// answer, parallel recoveries, a recorded fail, the ordered stop, and a
// duplicate that waits instead of using up its retries.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

var recoveryActivity = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute, HeartbeatTimeout: 5 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 3},
}

func recoverWorkflow(ctx workflow.Context, activity, in string) (string, error) {
	r, err := idemwf.NewRecovery(ctx)
	if err != nil {
		return "", err
	}
	return idemwf.Execute[string](ctx, r, idemwf.Options{Activity: recoveryActivity}, activity, in)
}

// recoverTwoWorkflow runs two idempotent activities at once on one Recovery.
func recoverTwoWorkflow(ctx workflow.Context, activity string) ([]string, error) {
	r, err := idemwf.NewRecovery(ctx)
	if err != nil {
		return nil, err
	}
	out, errs := make([]string, 2), make([]error, 2)
	wg := workflow.NewWaitGroup(ctx)
	for i, in := range []string{"a", "b"} {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			out[i], errs[i] = idemwf.Execute[string](ctx, r, idemwf.Options{Activity: recoveryActivity}, activity, in)
		})
	}
	wg.Wait(ctx)
	return out, errors.Join(errs...)
}

// unknownThen registers activity name: business-keyed on its input, its
// effect unknown on its first n calls per input, then it succeeds.
func unknownThen(r worker.Registry, name string, n int32, calls map[string]*atomic.Int32) {
	r.Worker.RegisterWorkflow(recoverWorkflow)
	r.Worker.RegisterWorkflow(recoverTwoWorkflow)
	onceactivity.Register(r.Worker, r.Activities, func(_ context.Context, in string) (string, error) {
		if calls[in].Add(1) <= n {
			return "", errors.New("read timeout after the request was sent")
		}
		return "done: " + in, nil
	}, onceactivity.Name(name), onceactivity.Code("flaky"), onceactivity.BusinessKey(func(in string) string { return in }))
}

// operator runs an operator command against the test server.
func (h *harness) operator(command string, args ...string) (string, error) {
	all := append([]string{"-temporal-address", temporalServer.Address(), "-namespace", temporalServer.Namespace()}, args...)
	if command == "reopen" {
		all = append(args, "-redis-url", "redis://"+redistest.Addr(h.t)+"/0", "-key-namespace", h.keys)
	}
	var buf bytes.Buffer
	err := cli.RunOperator(context.Background(), command, all, func(string) string { return "" }, &buf, ledgerEvidence())
	return buf.String(), err
}

// ledgerEvidence plugs the order ledger (-ledger-dsn) into pending and
// resolve, as the order system's binary does.
func ledgerEvidence() *cli.EvidenceFlags {
	var dsn string
	return &cli.EvidenceFlags{
		Register: func(fs *flag.FlagSet, getenv func(string) string) {
			fs.StringVar(&dsn, "ledger-dsn", getenv("LEDGER_DSN"), "the order ledger")
		},
		Open: func(ctx context.Context, _ bool) (operator.EvidenceSource, func(), error) {
			if dsn == "" {
				return nil, nil, nil
			}
			l, err := ledger.OpenReadOnly(ctx, dsn)
			if err != nil {
				return nil, nil, err
			}
			return order.ChargeEvidence{Ledger: l}, func() { _ = l.Close() }, nil
		},
	}
}

// pendingOf waits until the workflow lists want incidents, and returns
// the report.
func (h *harness) pendingOf(wfID string, want int) operator.PendingReport {
	h.t.Helper()
	var rep operator.PendingReport
	h.waitFor(fmt.Sprintf("%d pending incidents", want), func() bool {
		out, err := h.operator("pending", "-workflow-id", wfID)
		rep = operator.PendingReport{}
		return err == nil && json.Unmarshal([]byte(out), &rep) == nil && len(rep.Pending) == want
	})
	return rep
}

func incidentArgs(wfID string, inc idemwf.Incident, decision string) []string {
	return []string{"-workflow-id", wfID, "-record", inc.RecordKey, "-attempt", fmt.Sprint(inc.Attempt), "-rev", fmt.Sprint(inc.Rev), "-decision", decision}
}

func counters(keys ...string) map[string]*atomic.Int32 {
	m := map[string]*atomic.Int32{}
	for _, k := range keys {
		m[k] = new(atomic.Int32)
	}
	return m
}

// TestADecisionIsBoundToItsIncident (recovery defect 1, and 4): a retry
// applied to one incident and then sent again is refused, visibly, and is
// not taken for the next incident of the same record; the Update answers
// at once; a mistyped record is refused; two approved retries make three
// calls, not four.
func TestADecisionIsBoundToItsIncident(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 0)
	in := h.keys + "/order"
	calls := counters(in)
	w := h.startWorker(func(r worker.Registry) error { unknownThen(r, "flaky", 2, calls); return nil })
	run := h.start(recoverWorkflow, "incident-"+h.keys, "flaky", in)

	a := h.pendingOf(run.GetID(), 1).Pending[0]
	out, err := h.operator("resolve", append(incidentArgs(run.GetID(), a.Incident, "retry"), "-reason", "the provider shows no charge")...)
	if err != nil || !strings.HasPrefix(out, "applied: retry for "+a.Incident.String()) {
		t.Fatalf("resolve: %q, %v", out, err)
	}
	var b idemwf.PendingRecovery
	h.waitFor("the second incident", func() bool {
		rep := h.pendingOf(run.GetID(), 1)
		b = rep.Pending[0]
		return b.Incident != a.Incident
	})
	// The resend (a new request: a new request ID): as an Update it is
	// refused at once, as a signal it is refused too and listed.
	out, err = h.operator("resolve", incidentArgs(run.GetID(), a.Incident, "retry")...)
	if err == nil || !strings.Contains(out, "refused: incident "+a.Incident.String()+" is already decided (retry by request ") {
		t.Fatalf("the resend: %q, %v; want it refused", out, err)
	}
	if _, err := h.operator("resolve", append(incidentArgs(run.GetID(), a.Incident, "retry"), "-signal")...); err != nil {
		t.Fatal(err)
	}
	var rep operator.PendingReport
	h.waitFor("the refused signal to be listed", func() bool {
		rep = h.pendingOf(run.GetID(), 1)
		return rep.Refused.Count == 1
	})
	if rep.Pending[0].Incident != b.Incident || rep.Refused.Recent[0].Via != "signal" {
		t.Fatalf("report %+v: the second incident must still wait, the resend be refused", rep)
	}
	// A mistyped record is refused by the Update.
	wrong := b.Incident
	wrong.RecordKey = "flaky:d1:" + strings.Repeat("0", 64)
	if out, err := h.operator("resolve", incidentArgs(run.GetID(), wrong, "retry")...); err == nil || !strings.Contains(out, "no such pending incident") {
		t.Fatalf("mistyped record: %q, %v", out, err)
	}
	// A result that does not decode into a string is refused; the incident stays.
	if out, err := h.operator("resolve", append(incidentArgs(run.GetID(), b.Incident, "completed"), "-result", `{"not":"a string"}`)...); err == nil || !strings.Contains(out, "does not decode into string") {
		t.Fatalf("bad result: %q, %v", out, err)
	}
	if out, err := h.operator("resolve", incidentArgs(run.GetID(), b.Incident, "retry")...); err != nil {
		t.Fatalf("resolve b: %q, %v", out, err)
	}
	var result string
	if err := run.Get(context.Background(), &result); err != nil || result != "done: "+in || calls[in].Load() != 3 {
		t.Fatalf("result %q, err %v, calls %d; want 3 (two approved retries)", result, err, calls[in].Load())
	}
	store, err := redisstore.New(redisstore.Config{Client: h.rdb, Namespace: w.Config().KeyNamespace, CommandTimeout: 5 * time.Second}) // a check, not a race with Redis
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := onceflow.ParseRef(b.RecordKey)
	if obs, err := store.Inspect(context.Background(), ref); err != nil || obs.Record.State != onceflow.StateCompleted {
		t.Fatalf("record at the end: %+v, %v", obs.Record, err)
	}
}

// TestParallelRecoveries (recovery defect 2): two activities run at once,
// both unknown; decisions sent in either order each reach their own.
func TestParallelRecoveries(t *testing.T) {
	t.Parallel()
	for _, second := range []bool{false, true} {
		t.Run(fmt.Sprintf("second first=%v", second), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, 0)
			calls := counters("a", "b")
			h.startWorker(func(r worker.Registry) error { unknownThen(r, "flaky", 1, calls); return nil })
			// The activity's inputs are "a" and "b": business keys too, so
			// each run needs its own namespace (the harness's).
			run := h.start(recoverTwoWorkflow, "parallel-"+h.keys, "flaky")
			rep := h.pendingOf(run.GetID(), 2)
			order := rep.Pending
			if second {
				order[0], order[1] = order[1], order[0]
			}
			for _, p := range order {
				res := fmt.Sprintf("%q", "decided "+p.Details.Operation[len(p.Details.Operation)-1:])
				if out, err := h.operator("resolve", append(incidentArgs(run.GetID(), p.Incident, "completed"), "-result", res)...); err != nil {
					t.Fatalf("resolve %s: %q, %v", p.Incident, out, err)
				}
			}
			var out []string
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := run.Get(ctx, &out); err != nil || len(out) != 2 || !strings.HasPrefix(out[0], "decided") || !strings.HasPrefix(out[1], "decided") {
				t.Fatalf("out %q, err %v", out, err)
			}
		})
	}
}

// TestAFailDecisionIsRecorded (recovery defect 7): fail ends the workflow
// and leaves the record FAILED with the reason, so a later workflow with
// the same business key fails at once, naming the decision, instead of
// waiting for an operator again; reopen lets the next one run.
func TestAFailDecisionIsRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 0)
	in := h.keys + "/order"
	calls := counters(in)
	h.startWorker(func(r worker.Registry) error { unknownThen(r, "flaky", 1, calls); return nil })
	first := h.start(recoverWorkflow, "fail-1-"+h.keys, "flaky", in)
	p := h.pendingOf(first.GetID(), 1).Pending[0]
	if out, err := h.operator("resolve", append(incidentArgs(first.GetID(), p.Incident, "fail"), "-reason", "refunded by hand")...); err != nil {
		t.Fatalf("resolve: %q, %v", out, err)
	}
	// The workflow fails with the activity's own error, which the
	// decision delivers, and says the effect may have happened.
	var ae *temporal.ApplicationError
	err := first.Get(context.Background(), nil)
	if _, acted := idemwf.MayHaveActed(err); !errors.As(err, &ae) || ae.Message() != "read timeout after the request was sent" || !acted {
		t.Fatalf("first workflow: %v, want the activity's own error, marked as an effect that may have happened", err)
	}
	second := h.start(recoverWorkflow, "fail-2-"+h.keys, "flaky", in)
	err = second.Get(context.Background(), nil)
	if !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeFailed.TemporalType() || !strings.Contains(err.Error(), "refunded by hand") || calls[in].Load() != 1 {
		t.Fatalf("second workflow: %v, calls %d; want %s naming the decision and no new call", err, calls[in].Load(), onceflow.OutcomeFailed.TemporalType())
	}
	if out, err := h.operator("reopen", "-record", p.RecordKey); err != nil || !strings.Contains(out, "reopened") {
		t.Fatalf("reopen: %q, %v", out, err)
	}
	third := h.start(recoverWorkflow, "fail-3-"+h.keys, "flaky", in)
	var out string
	if err := third.Get(context.Background(), &out); err != nil || out != "done: "+in || calls[in].Load() != 2 {
		t.Fatalf("third workflow: %q, %v, calls %d", out, err, calls[in].Load())
	}
}

// TestSIGTERMRecordsTheOutcome (recovery defect 6): a worker stopped with a
// stop timeout shorter than the action cancels it, and its outcome is
// written before the worker closes Redis: the record ends ABANDONED, not
// EXECUTING until its lease runs out.
func TestSIGTERMRecordsTheOutcome(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	h := newHarness(t, lease)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envChild+"=1",
		envTemporal+"="+temporalServer.Address(), envNamespace+"="+temporalServer.Namespace(),
		envQueue+"="+h.queue, envRedis+"="+redistest.Addr(t), envKeys+"="+h.keys, envLease+"="+lease.String(), envStop+"=500ms")
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	// The action takes a moment to stop once cancelled, as a real one
	// finishing its step does: the worker must wait for its outcome.
	in := effectIn{Key: h.keys + "/term", Mode: "sleep:1m", Linger: 300 * time.Millisecond}
	h.start(effectWorkflow, "term-"+h.keys, "effect-blind", in, 5*time.Second)
	h.waitFor("the child to enter the action", func() bool { return h.get("entered") == "1" })
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("the child worker did not stop cleanly: %v", err)
	}
	store, err := redisstore.New(redisstore.Config{Client: h.rdb, Namespace: h.keys, CommandTimeout: 5 * time.Second}) // a check, not a race with Redis
	if err != nil {
		t.Fatal(err)
	}
	dig, _ := onceflow.NewDigester([]byte("e2e secret e2e secret e2e secret"), 1)
	ref := onceflow.Ref{Code: "effect-blind", Digest: dig.Digest("business", temporalServer.Namespace(), in.Key)}
	obs, err := store.Inspect(context.Background(), ref)
	if err != nil || obs.Record.State != onceflow.StateAbandoned {
		t.Fatalf("record after the stop: %+v, %v; want ABANDONED, written before the worker exited", obs.Record, err)
	}
}

func effectWithAttempts(ctx workflow.Context, in effectIn, attempts int32) (effectOut, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, HeartbeatTimeout: 2 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: attempts},
	})
	var out effectOut
	err := workflow.ExecuteActivity(ctx, "effect", in).Get(ctx, &out)
	return out, err
}

// TestADuplicateWaitsAndReplays: a duplicate with MaximumAttempts 2 finds
// the first workflow's activity running; it waits inside the activity,
// heartbeating, and replays the result, without using up its retries.
func TestADuplicateWaitsAndReplays(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 0)
	h.startWorker(func(r worker.Registry) error {
		r.Worker.RegisterWorkflow(effectWithAttempts)
		return registerEffect(r, h.rdb, h.keys)
	})
	in := effectIn{Key: h.keys + "/dup", Mode: "sleep:3s"}
	first := h.start(effectWithAttempts, "dup-1-"+h.keys, in, int32(2))
	h.waitFor("the first activity to start", func() bool { return h.get("entered") == "1" })
	second := h.start(effectWithAttempts, "dup-2-"+h.keys, in, int32(2))
	var a, b effectOut
	if err := first.Get(context.Background(), &a); err != nil {
		t.Fatal(err)
	}
	if err := second.Get(context.Background(), &b); err != nil {
		t.Fatalf("the duplicate: %v; it must wait, not run out of attempts", err)
	}
	if a != b || h.counter("effects") != 1 || h.activityAttempt(second) != 1 {
		t.Fatalf("first %+v, second %+v, effects %d, duplicate's attempts %d", a, b, h.counter("effects"), h.activityAttempt(second))
	}
}
