package workflow_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// counts is a metrics handler that counts each counter by name and tags
// ("name{k=v,...}"), for the tests that check what a workflow counted.
type counts struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *counts) WithTags(tags map[string]string) client.MetricsHandler {
	return (&countsView{c: c}).WithTags(tags)
}

func (c *counts) Counter(name string) client.MetricsCounter { return (&countsView{c: c}).Counter(name) }
func (c *counts) Gauge(string) client.MetricsGauge          { return client.MetricsNopHandler.Gauge("") }
func (c *counts) Timer(string) client.MetricsTimer          { return client.MetricsNopHandler.Timer("") }

// get is the count of name with exactly the given tags (k=v, sorted).
func (c *counts) get(name string, tags ...string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name+"{"+strings.Join(tags, ",")+"}"]
}

// total is the count of name whatever its tags.
func (c *counts) total(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for k, v := range c.n {
		if strings.HasPrefix(k, name+"{") {
			n += v
		}
	}
	return n
}

type countsView struct {
	c    *counts
	tags map[string]string
}

func (v *countsView) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(v.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return &countsView{c: v.c, tags: merged}
}

func (v *countsView) Counter(name string) client.MetricsCounter {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(v.tags)) {
		if k == "decision" || k == "basis" || k == "by" { // the SDK adds its own tags (workflow_type, …)
			kv = append(kv, k+"="+v.tags[k])
		}
	}
	key := name + "{" + strings.Join(kv, ",") + "}"
	return counterFunc(func(d int64) {
		v.c.mu.Lock()
		defer v.c.mu.Unlock()
		v.c.n[key] += d
	})
}
func (v *countsView) Gauge(string) client.MetricsGauge { return client.MetricsNopHandler.Gauge("") }
func (v *countsView) Timer(string) client.MetricsTimer { return client.MetricsNopHandler.Timer("") }

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

// settleWorkflow runs the charge with a reconcile activity whose lookup is
// authoritative after settle (0: never).
func settleWorkflow(ctx workflow.Context, in, reconcile string, settle time.Duration) (string, error) {
	r, err := idemwf.NewRecoveryWithOptions(ctx, idemwf.RecoveryOptions{PendingSearchAttribute: true})
	if err != nil {
		return "", err
	}
	return idemwf.Execute[string](ctx, r, idemwf.Options{Activity: activityOptions, Reconcile: reconcile, Settle: settle}, "charge", in)
}

// automaticOnly checks that the run's only decision is an automatic one
// with the given decision and basis, with its reason and evidence, and
// that no incident was opened.
func automaticOnly(t *testing.T, w *world, want idemwf.Decision, basis idemwf.Basis) idemwf.Decided {
	t.Helper()
	ds := w.decisions(t)
	if len(ds) != 1 {
		t.Fatalf("decisions = %+v, want one automatic decision", ds)
	}
	d := ds[0]
	if d.Via != idemwf.ViaAutomatic || d.Resolution.By != idemwf.Actor || d.Basis != basis || d.Resolution.Decision != want ||
		d.Resolution.Reason == "" || d.Resolution.Evidence == nil || d.Resolution.Evidence.Implies != want {
		t.Fatalf("decision = %+v, want %s by %s via %s on %s, with a reason and evidence", d, want, idemwf.Actor, idemwf.ViaAutomatic, basis)
	}
	if n := w.metrics.get("onceflow_recoveries_decided_automatically", "basis="+string(basis), "decision="+string(want)); n != 1 {
		t.Errorf("onceflow_recoveries_decided_automatically{basis=%s,decision=%s} = %d, want 1", basis, want, n)
	}
	if n := w.metrics.total("onceflow_recoveries_opened"); n != 0 {
		t.Errorf("onceflow_recoveries_opened = %d, want 0: an automatic decision opens no incident", n)
	}
	return d
}

// pendingAttribute is the pending search attribute as the workflow left
// it (-1: never upserted).
func pendingAttribute(t *testing.T, w *world) int64 {
	t.Helper()
	return query[int64](t, w, pendingAttributeQuery)
}

// TestAnIdempotentStepIsRetriedWithoutAnIncident: a step that declared
// IdempotentDownstream, whose completion write was indeterminate, is
// retried by the workflow itself: no incident, no pending attribute, the
// decision recorded with actor onceflow and counted. Before automatic
// decisions it waited for a person (the workflow never ended).
func TestAnIdempotentStepIsRetriedWithoutAnIncident(t *testing.T) {
	t.Parallel()
	a := incident("send-confirmation:d1:abc", 1)
	a.State, a.Recorded, a.IdempotentDownstream = "EXECUTING", false, true
	a.Reason = "the action succeeded but complete was indeterminate and inspect failed"
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	w.env.RegisterWorkflow(payWithPendingAttribute)
	w.env.ExecuteWorkflow(payWithPendingAttribute, "order-42", true)
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "charged order-42" || w.charges["order-42"] != 2 {
		t.Fatalf("out %q, err %v, runs %d; want the step run again by itself", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
	d := automaticOnly(t, w, idemwf.Retry, idemwf.BasisIdempotentDownstream)
	if d.Incident != (idemwf.Incident{RecordKey: a.RecordKey, Attempt: 1, Rev: 2}) || !strings.Contains(strings.Join(d.Resolution.Evidence.Facts, " "), "indeterminate") {
		t.Errorf("decision = %+v, want the incident and why it was unknown", d)
	}
	if n := pendingAttribute(t, w); n != -1 {
		t.Errorf("the pending attribute is %d, want never upserted", n)
	}
	// Recorded false: nothing to settle in Redis, the next claim takes over.
	if len(w.resolved) != 0 {
		t.Errorf("resolved = %+v, want nothing (the record was never confirmed ABANDONED)", w.resolved)
	}
}

// TestAReconcileProofCompletesAutomatically: the reconcile activity finds
// the effect: completed with its result, recorded in Redis and in the
// audit with what the downstream showed.
func TestAReconcileProofCompletesAutomatically(t *testing.T) {
	t.Parallel()
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}},
		func(context.Context, string) (idemwf.ReconcileResult, error) {
			return idemwf.ReconcileResult{Found: true, Result: json.RawMessage(`"ch_at_provider"`), Facts: []string{"gateway: ch_at_provider charged"}}, nil
		})
	w.env.RegisterWorkflow(settleWorkflow)
	w.env.ExecuteWorkflow(settleWorkflow, "order-42", "reconcile", time.Duration(0))
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "ch_at_provider" || w.charges["order-42"] != 1 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
	d := automaticOnly(t, w, idemwf.Completed, idemwf.BasisReconciled)
	if string(d.Resolution.Result) != `"ch_at_provider"` || len(d.Resolution.Evidence.Facts) != 1 {
		t.Errorf("decision = %+v, want the reconciled result and the downstream's facts", d)
	}
	if len(w.resolved) != 1 || w.resolved[0].Target != "COMPLETED" || string(w.resolved[0].Response) != `"ch_at_provider"` {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}

// TestASettledLookupRetriesAutomatically: with Settle declared, a reconcile
// that finds nothing is asked again once the settle time has passed, and
// "nothing there" then proves no effect: the workflow retries by itself.
// Before the settle rule it waited for a person.
func TestASettledLookupRetriesAutomatically(t *testing.T) {
	t.Parallel()
	const settle = 30 * time.Second
	var asked atomic.Int32
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}},
		func(context.Context, string) (idemwf.ReconcileResult, error) {
			asked.Add(1)
			return idemwf.ReconcileResult{Facts: []string{"gateway: no call under the key"}}, nil
		})
	w.env.RegisterWorkflow(settleWorkflow)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w.env.SetStartTime(start)
	w.env.ExecuteWorkflow(settleWorkflow, "order-42", "reconcile", settle)
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "charged order-42" || w.charges["order-42"] != 2 {
		t.Fatalf("out %q, err %v, charges %d; want the charge run again by itself", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("reconcile asked %d times, want 2 (at once, then after the settle time)", n)
	}
	if took := w.env.Now().Sub(start); took < settle {
		t.Errorf("the workflow decided after %v, before the settle time %v", took, settle)
	}
	automaticOnly(t, w, idemwf.Retry, idemwf.BasisSettledLookup)
	if len(w.resolved) != 1 || w.resolved[0].Target != "FAILED_RETRYABLE" {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}

// TestWithoutTheSettleDeclarationNothingThereWaitsForAPerson: the same
// lookup without Settle proves nothing (it may have been asked before the
// request landed): the incident waits for a person, as before.
func TestWithoutTheSettleDeclarationNothingThereWaitsForAPerson(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}},
		func(context.Context, string) (idemwf.ReconcileResult, error) {
			asked.Add(1)
			return idemwf.ReconcileResult{}, nil
		})
	w.env.RegisterWorkflow(settleWorkflow)
	waited := w.retryInAnHour(t, a)
	w.env.ExecuteWorkflow(settleWorkflow, "order-42", "reconcile", time.Duration(0))
	if err := w.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if *waited != 1 || asked.Load() != 1 {
		t.Fatalf("%d incidents waited and reconcile was asked %d times, want 1 and 1", *waited, asked.Load())
	}
	personOnly(t, w)
}

// TestANonIdempotentStepWithoutProofOpensAnIncident: no IdempotentDownstream
// and no reconcile: the incident waits for a person, is counted as opened,
// and sets the pending attribute; nothing is decided automatically.
func TestANonIdempotentStepWithoutProofOpensAnIncident(t *testing.T) {
	t.Parallel()
	w, waiting := decidedByAPerson(t, true)
	if waiting != 1 {
		t.Errorf("the pending attribute was %d while the incident waited, want 1", waiting)
	}
	personOnly(t, w)
}

// personOnly checks that the run's one decision came from a person, after
// one incident opened, and that nothing was decided automatically.
func personOnly(t *testing.T, w *world) {
	t.Helper()
	if ds := w.decisions(t); len(ds) != 1 || ds[0].Via != "signal" || ds[0].Basis != "" {
		t.Errorf("decisions = %+v, want one, a person's", ds)
	}
	if n := w.metrics.total("onceflow_recoveries_opened"); n != 1 {
		t.Errorf("onceflow_recoveries_opened = %d, want 1", n)
	}
	if n := w.metrics.total("onceflow_recoveries_decided_automatically"); n != 0 {
		t.Errorf("onceflow_recoveries_decided_automatically = %d, want 0", n)
	}
}

// TestAutomaticRetriesAreBounded: an idempotent step whose every attempt
// ends unknown is retried MaxAutomaticRetries times by itself, then waits
// for a person instead of looping.
func TestAutomaticRetriesAreBounded(t *testing.T) {
	t.Parallel()
	var unknowns []onceflow.EffectUnknownDetails
	for i := range int64(idemwf.MaxAutomaticRetries + 1) {
		d := incident("send-confirmation:d1:abc", i+1)
		d.IdempotentDownstream = true
		unknowns = append(unknowns, d)
	}
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": unknowns}, nil)
	waited := 0
	w.env.RegisterDelayedCallback(func() {
		waited = len(w.pending(t))
		w.env.SignalWorkflow(idemwf.ResolveSignal, decision(unknowns[len(unknowns)-1], idemwf.Retry))
	}, time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	if err := w.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if n := w.metrics.total("onceflow_recoveries_decided_automatically"); n != idemwf.MaxAutomaticRetries || waited != 1 {
		t.Fatalf("%d automatic decisions and %d incidents waiting, want %d and 1", n, waited, idemwf.MaxAutomaticRetries)
	}
}

// TestRunsBeforeAutomaticDecisionsStillWaitForAPerson: a run whose history
// predates automatic decisions (GetVersion answers DefaultVersion, as it
// does when replaying such a history) keeps the behaviour it was recorded
// with: an idempotent step waits for a person, so its history replays.
func TestRunsBeforeAutomaticDecisionsStillWaitForAPerson(t *testing.T) {
	t.Parallel()
	a := incident("send-confirmation:d1:abc", 1)
	a.IdempotentDownstream = true
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	w.env.OnGetVersion("onceflow.automatic-decisions", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	w.env.RegisterWorkflow(payWithPendingAttribute)
	waited := w.retryInAnHour(t, a)
	w.env.ExecuteWorkflow(payWithPendingAttribute, "order-42", true)
	if err := w.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if *waited != 1 {
		t.Fatalf("%d incidents waited, want the one the old behaviour opens", *waited)
	}
	personOnly(t, w)
}

// retryInAnHour has a person decide retry about a, an hour into the run;
// what it points to is then the number of incidents that waited.
func (w *world) retryInAnHour(t *testing.T, a onceflow.EffectUnknownDetails) *int {
	waited := new(int)
	w.env.RegisterDelayedCallback(func() {
		*waited = len(w.pending(t))
		w.env.SignalWorkflow(idemwf.ResolveSignal, decision(a, idemwf.Retry))
	}, time.Hour)
	return waited
}
