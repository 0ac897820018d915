package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/handshake"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// incident returns the details of the n-th unknown effect of record key.
func incident(key string, n int64) onceflow.EffectUnknownDetails {
	return onceflow.EffectUnknownDetails{RecordKey: key, OperationCode: "charge-payment", Attempt: n, Rev: 2 * n, State: "ABANDONED", Recorded: true}
}

func decision(d onceflow.EffectUnknownDetails, what idemwf.Decision) idemwf.Resolution {
	return idemwf.Resolution{RecordKey: d.RecordKey, Attempt: d.Attempt, Rev: d.Rev, Decision: what}
}

var activityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
}

func payWorkflow(ctx workflow.Context, in string, reconcile string) (string, error) {
	r, err := idemwf.NewRecovery(ctx)
	if err != nil {
		return "", err
	}
	return idemwf.Execute[string](ctx, r, idemwf.Options{Activity: activityOptions, Reconcile: reconcile}, "charge", in)
}

// world is a test workflow environment whose "charge" activity answers
// with an unknown effect for each incident in unknowns, in turn, then
// charges.
type world struct {
	env      *testsuite.TestWorkflowEnvironment
	mu       sync.Mutex
	charges  map[string]int
	resolved []handshake.ResolveRecordInput
	metrics  *counts
}

func newWorld(t *testing.T, unknowns map[string][]onceflow.EffectUnknownDetails, reconcile func(context.Context, string) (idemwf.ReconcileResult, error)) *world {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	m := &counts{n: map[string]int64{}}
	suite.SetMetricsHandler(m)
	w := &world{env: suite.NewTestWorkflowEnvironment(), charges: map[string]int{}, metrics: m}
	w.env.RegisterWorkflow(payWorkflow)
	w.env.RegisterActivityWithOptions(func(ctx context.Context, in string) (string, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := w.charges[in]
		w.charges[in]++
		if n < len(unknowns[in]) {
			return "", temporal.NewNonRetryableApplicationError("effect unknown", onceflow.OutcomeEffectUnknown.TemporalType(), nil, unknowns[in][n])
		}
		return "charged " + in, nil
	}, sdkactivity.RegisterOptions{Name: "charge"})
	w.env.RegisterActivityWithOptions(func(ctx context.Context, in handshake.ResolveRecordInput) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.resolved = append(w.resolved, in)
		return nil
	}, sdkactivity.RegisterOptions{Name: handshake.ResolveRecordActivity})
	if reconcile != nil {
		w.env.RegisterActivityWithOptions(reconcile, sdkactivity.RegisterOptions{Name: "reconcile"})
	}
	return w
}

func (w *world) pending(t *testing.T) []idemwf.PendingRecovery {
	return query[[]idemwf.PendingRecovery](t, w, idemwf.PendingQuery)
}

func (w *world) refusals(t *testing.T) idemwf.RefusalsReport {
	return query[idemwf.RefusalsReport](t, w, idemwf.RefusalsQuery)
}

// query answers the workflow's query name.
func query[T any](t *testing.T, w *world, name string) T {
	t.Helper()
	v, err := w.env.QueryWorkflow(name)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// answer is how an Update was answered; the test environment fills it in
// when the workflow has handled the Update.
type answer struct {
	done  bool
	reply idemwf.DecisionReply
	err   error
}

// update sends res as an Update.
func (w *world) update(res idemwf.Resolution) *answer {
	a := &answer{}
	w.env.UpdateWorkflow(idemwf.ResolveUpdate, fmt.Sprint(res.Incident(), res.Decision, string(res.Result)), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(e error) { a.done, a.err = true, e },
		OnComplete: func(v any, e error) {
			a.done, a.err = true, e
			if e == nil {
				a.reply = v.(idemwf.DecisionReply)
			}
		},
	}, res)
	return a
}

func refusedWith(t *testing.T, a *answer, want string) {
	t.Helper()
	if !a.done {
		t.Fatal("the update was never answered")
	}
	err := a.err
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != idemwf.TypeDecisionRefused || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want a %s saying %q", err, idemwf.TypeDecisionRefused, want)
	}
}

func TestRetryDecisionRunsTheActivityAgain(t *testing.T) {
	t.Parallel()
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	var answered *answer
	w.env.RegisterDelayedCallback(func() {
		p := w.pending(t)
		if len(p) != 1 || p[0].Incident != (idemwf.Incident{RecordKey: a.RecordKey, Attempt: 1, Rev: 2}) || p[0].Activity != "charge" || p[0].ResultType != "string" {
			t.Errorf("pending = %+v", p)
		}
		res := decision(a, idemwf.Retry)
		res.Reason = "provider has no charge"
		answered = w.update(res)
	}, time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	if !answered.done || answered.err != nil || answered.reply.Applied != (idemwf.Incident{RecordKey: a.RecordKey, Attempt: 1, Rev: 2}) {
		t.Fatalf("update answered %+v", answered)
	}
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "charged order-42" || w.charges["order-42"] != 2 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
	if len(w.resolved) != 1 || w.resolved[0].Target != "FAILED_RETRYABLE" || w.resolved[0].Details != a {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}

func TestCompletedDecisionReturnsTheGivenResult(t *testing.T) {
	t.Parallel()
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	w.env.RegisterDelayedCallback(func() {
		res := decision(a, idemwf.Completed)
		res.Result = json.RawMessage(`"ch_found"`)
		w.env.SignalWorkflow(idemwf.ResolveSignal, res)
	}, time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "ch_found" || w.charges["order-42"] != 1 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
	if len(w.resolved) != 1 || w.resolved[0].Target != "COMPLETED" || string(w.resolved[0].Response) != `"ch_found"` {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}

// Recovery defect 7: a fail decision is recorded (FAILED), so later
// attempts fail at once instead of waiting for an operator again.
func TestFailDecisionFailsTheWorkflowAndIsRecorded(t *testing.T) {
	t.Parallel()
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	w.env.RegisterDelayedCallback(func() {
		res := decision(a, idemwf.Fail)
		res.Reason = "refunded by hand"
		w.env.SignalWorkflow(idemwf.ResolveSignal, res)
	}, time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	var ae *temporal.ApplicationError
	if err := w.env.GetWorkflowError(); !errors.As(err, &ae) || ae.Type() != idemwf.TypeRecoveryFailed || w.charges["order-42"] != 1 {
		t.Fatalf("err %v, charges %d", err, w.charges["order-42"])
	}
	if len(w.resolved) != 1 || w.resolved[0].Target != "FAILED" || !strings.Contains(w.resolved[0].Reason, "refunded by hand") {
		t.Fatalf("resolved = %+v; the failure must be recorded", w.resolved)
	}
}

func TestReconcileActivityResolvesWithoutWaiting(t *testing.T) {
	t.Parallel()
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {incident("charge-payment:d1:abc", 1)}},
		func(context.Context, string) (idemwf.ReconcileResult, error) {
			return idemwf.ReconcileResult{Found: true, Result: json.RawMessage(`"ch_at_provider"`)}, nil
		})
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "reconcile")
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "ch_at_provider" || w.charges["order-42"] != 1 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
	if len(w.resolved) != 1 || w.resolved[0].Target != "COMPLETED" {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}

// Recovery defect 1: a decision applies to the incident it names. The same
// retry sent again (a resend, a double click) is refused, visibly, and is
// not taken for the next incident of the same record, which is listed.
func TestADecisionAppliesToItsIncidentOnly(t *testing.T) {
	t.Parallel()
	key := "charge-payment:d1:abc"
	a, b := incident(key, 1), incident(key, 2)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a, b}}, nil)
	var stale, empty *answer
	w.env.RegisterDelayedCallback(func() {
		retryA := decision(a, idemwf.Retry)
		w.env.SignalWorkflow(idemwf.ResolveSignal, retryA)
		w.env.SignalWorkflow(idemwf.ResolveSignal, retryA) // the resend
	}, time.Hour)
	w.env.RegisterDelayedCallback(func() {
		p := w.pending(t)
		if len(p) != 1 || p[0].Incident != (idemwf.Incident{RecordKey: key, Attempt: 2, Rev: 4}) {
			t.Errorf("pending after the resend = %+v; the second incident must be listed", p)
		}
		rep := w.refusals(t)
		if rep.Count != 1 || len(rep.Recent) != 1 || rep.Recent[0].Via != "signal" || !strings.Contains(rep.Recent[0].Why, "incident "+key+"@1.2 is already decided (retry)") {
			t.Errorf("refusals = %+v; the resend must be refused visibly", rep)
		}
		// The same decision as an Update is answered at once.
		stale = w.update(decision(a, idemwf.Retry))
		empty = w.update(decision(b, idemwf.Completed))
	}, 2*time.Hour)
	w.env.RegisterDelayedCallback(func() {
		refusedWith(t, stale, "incident "+key+"@1.2 is already decided (retry)")
		refusedWith(t, empty, "completed needs the activity's result")
		res := decision(b, idemwf.Completed)
		res.Result = json.RawMessage(`"ch_b"`)
		w.env.SignalWorkflow(idemwf.ResolveSignal, res)
	}, 3*time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "ch_b" || w.charges["order-42"] != 2 {
		t.Fatalf("out %q, err %v, charges %d; want two charges (one approved retry), not three", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
}

// twoWorkflow runs two idempotent activities at once on one Recovery.
func twoWorkflow(ctx workflow.Context) ([]string, error) {
	r, err := idemwf.NewRecovery(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 2)
	errs := make([]error, 2)
	wg := workflow.NewWaitGroup(ctx)
	for i, in := range []string{"a", "b"} {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			out[i], errs[i] = idemwf.Execute[string](ctx, r, idemwf.Options{Activity: activityOptions}, "charge", in)
		})
	}
	wg.Wait(ctx)
	return out, errors.Join(errs...)
}

// Recovery defect 2: any number of waits on one Recovery each get their own
// decision, in whatever order the decisions arrive.
func TestParallelRecoveriesGetTheirOwnDecisions(t *testing.T) {
	t.Parallel()
	a, b := incident("charge-payment:d1:aaa", 1), incident("charge-payment:d1:bbb", 1)
	for _, order := range [][2]onceflow.EffectUnknownDetails{{a, b}, {b, a}} {
		t.Run(order[0].RecordKey+" first", func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"a": {a}, "b": {b}}, nil)
			w.env.RegisterWorkflow(twoWorkflow)
			w.env.RegisterDelayedCallback(func() {
				if p := w.pending(t); len(p) != 2 {
					t.Errorf("pending = %+v, want both", p)
				}
				for _, d := range order {
					res := decision(d, idemwf.Completed)
					res.Result = json.RawMessage(`"decided ` + d.RecordKey + `"`)
					w.env.SignalWorkflow(idemwf.ResolveSignal, res)
				}
			}, time.Hour)
			w.env.ExecuteWorkflow(twoWorkflow)
			var out []string
			if err := w.env.GetWorkflowResult(&out); err != nil || len(out) != 2 || out[0] != `decided `+a.RecordKey || out[1] != `decided `+b.RecordKey {
				t.Fatalf("out %q, err %v", out, w.env.GetWorkflowError())
			}
		})
	}
}

func amountWorkflow(ctx workflow.Context) (int, error) {
	r, err := idemwf.NewRecovery(ctx)
	if err != nil {
		return 0, err
	}
	return idemwf.Execute[int](ctx, r, idemwf.Options{Activity: activityOptions}, "amount")
}

// Recovery defect 3: a completed result that does not decode into the
// activity's result type is refused (by the Update at once, and visibly
// for a signal); the incident stays pending and a good result is taken.
func TestAResultThatDoesNotDecodeIsRefused(t *testing.T) {
	t.Parallel()
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, nil, nil)
	w.env.RegisterWorkflow(amountWorkflow)
	w.env.RegisterActivityWithOptions(func(context.Context) (int, error) {
		return 0, temporal.NewNonRetryableApplicationError("effect unknown", onceflow.OutcomeEffectUnknown.TemporalType(), nil, a)
	}, sdkactivity.RegisterOptions{Name: "amount"})
	var rejected *answer
	w.env.RegisterDelayedCallback(func() {
		bad := decision(a, idemwf.Completed)
		bad.Result = json.RawMessage(`"not a number"`)
		rejected = w.update(bad)
		w.env.SignalWorkflow(idemwf.ResolveSignal, bad)
	}, time.Hour)
	w.env.RegisterDelayedCallback(func() {
		refusedWith(t, rejected, "result does not decode into int")
		if p := w.pending(t); len(p) != 1 || p[0].ResultType != "int" {
			t.Errorf("pending = %+v; the incident must stay", p)
		}
		if rep := w.refusals(t); rep.Count != 1 || !strings.Contains(rep.Recent[0].Why, "does not decode") {
			t.Errorf("refusals = %+v", rep)
		}
		good := decision(a, idemwf.Completed)
		good.Result = json.RawMessage(`1999`)
		w.env.SignalWorkflow(idemwf.ResolveSignal, good)
	}, 2*time.Hour)
	w.env.ExecuteWorkflow(amountWorkflow)
	var out int
	if err := w.env.GetWorkflowResult(&out); err != nil || out != 1999 {
		t.Fatalf("out %d, err %v", out, w.env.GetWorkflowError())
	}
}

// An unknown decision is refused the same way.
func TestAnUnknownDecisionIsRefused(t *testing.T) {
	t.Parallel()
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	var maybe *answer
	w.env.RegisterDelayedCallback(func() { maybe = w.update(decision(a, "maybe")) }, time.Hour)
	w.env.RegisterDelayedCallback(func() {
		refusedWith(t, maybe, `unknown decision "maybe"`)
		w.env.SignalWorkflow(idemwf.ResolveSignal, decision(a, idemwf.Retry))
	}, 2*time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	if err := w.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
}

// updateAs sends res as an Update with the given Update ID: a client's
// resend under a new Update ID, which Temporal's own dedupe by Update ID
// does not catch.
func (w *world) updateAs(id string, res idemwf.Resolution) *answer {
	a := &answer{}
	w.env.UpdateWorkflow(idemwf.ResolveUpdate, id, &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(e error) { a.done, a.err = true, e },
		OnComplete: func(v any, e error) {
			a.done, a.err = true, e
			if e == nil {
				a.reply = v.(idemwf.DecisionReply)
			}
		},
	}, res)
	return a
}

func (w *world) decisions(t *testing.T) []idemwf.Decided {
	return query[[]idemwf.Decided](t, w, idemwf.DecisionsQuery)
}

// A decision request sent again (same request ID), also concurrently
// (three deliveries in one workflow task: two Updates under different
// Update IDs and a signal), applies once: the activity runs again once,
// the record is settled once, the repeats are answered with the decision,
// and the audit lists one decision with who, why and when.
func TestARepeatedDecisionAppliesOnce(t *testing.T) {
	t.Parallel()
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	var first, again *answer
	var audit []idemwf.Decided
	requested := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	w.env.RegisterDelayedCallback(func() {
		res := decision(a, idemwf.Retry)
		res.RequestID, res.By, res.Reason, res.RequestedAt = "req-1", "alice", "gateway shows no call", requested
		first = w.updateAs("u1", res)
		again = w.updateAs("u2", res)
		w.env.SignalWorkflow(idemwf.ResolveSignal, res)
	}, time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	audit = w.decisions(t) // the test environment answers queries after the end too
	if !first.done || first.err != nil || first.reply.Repeated || first.reply.RequestID != "req-1" || first.reply.Decision != idemwf.Retry {
		t.Fatalf("first delivery answered %+v", first)
	}
	if !again.done || again.err != nil || !again.reply.Repeated || again.reply.Applied != first.reply.Applied {
		t.Fatalf("the repeat answered %+v; want the first decision, marked repeated", again)
	}
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || w.charges["order-42"] != 2 || len(w.resolved) != 1 {
		t.Fatalf("out %q, err %v, charges %d, resolved %d; want one retry applied", out, w.env.GetWorkflowError(), w.charges["order-42"], len(w.resolved))
	}
	if len(audit) != 1 || audit[0].Repeats != 2 || audit[0].Via != "update" || audit[0].Resolution.By != "alice" ||
		audit[0].Resolution.Reason != "gateway shows no call" || !audit[0].Resolution.RequestedAt.Equal(requested) || audit[0].AppliedAt.IsZero() {
		t.Fatalf("audit = %+v", audit)
	}
	if rep := w.refusals(t); rep.Count != 0 {
		t.Fatalf("refusals = %+v; a repeat is answered, not refused", rep)
	}
}

// A delayed request never undoes a newer decision: after retry (request A)
// and completed for the next incident (request B), a late copy of A is
// answered as the retry it was, an older request C about the first
// incident and a request D about the second are refused, and a request ID
// reused for another decision is refused. The workflow returns B's result.
func TestADelayedOlderRequestDoesNotUndoANewerDecision(t *testing.T) {
	t.Parallel()
	key := "charge-payment:d1:abc"
	a, b := incident(key, 1), incident(key, 2)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a, b}}, nil)
	retryA := decision(a, idemwf.Retry)
	retryA.RequestID = "req-A"
	var lateA, olderC, laterD, reused *answer
	w.env.RegisterDelayedCallback(func() { w.updateAs("A", retryA) }, time.Hour)
	w.env.RegisterDelayedCallback(func() {
		completeB := decision(b, idemwf.Completed)
		completeB.RequestID, completeB.Result = "req-B", json.RawMessage(`"ch_b"`)
		w.updateAs("B", completeB)
		lateA = w.updateAs("A-late", retryA)
		failA := decision(a, idemwf.Fail)
		failA.RequestID, failA.RequestedAt = "req-C", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		olderC = w.updateAs("C", failA)
		retryB := decision(b, idemwf.Retry)
		retryB.RequestID = "req-D"
		laterD = w.updateAs("D", retryB)
		retryB.RequestID = "req-A"
		reused = w.updateAs("A-reused", retryB)
		w.env.SignalWorkflow(idemwf.ResolveSignal, failA)
	}, 2*time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	if !lateA.done || lateA.err != nil || !lateA.reply.Repeated || lateA.reply.Decision != idemwf.Retry {
		t.Fatalf("late copy of A answered %+v", lateA)
	}
	refusedWith(t, olderC, "incident "+key+"@1.2 is already decided (retry by request req-A)")
	refusedWith(t, laterD, "incident "+key+"@2.4 is already decided (completed by request req-B)")
	refusedWith(t, reused, "request req-A already decided retry for "+key+"@1.2")
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "ch_b" || w.charges["order-42"] != 2 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
	if len(w.resolved) != 2 || w.resolved[0].Target != "FAILED_RETRYABLE" || w.resolved[1].Target != "COMPLETED" {
		t.Fatalf("resolved = %+v", w.resolved)
	}
}

// A decision that contradicts the evidence it carries (retry while the
// evidence shows a charge) is refused unless confirmed with a reason; the
// confirmed one is applied, and the audit keeps the evidence shown.
func TestADecisionAgainstTheEvidenceNeedsConfirmation(t *testing.T) {
	t.Parallel()
	a := incident("charge-payment:d1:abc", 1)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	ev := &idemwf.Evidence{Summary: "the gateway charged ch_1", Implies: idemwf.Completed, Result: json.RawMessage(`"ch_1"`)}
	var bare, noReason, confirmed *answer
	var audit []idemwf.Decided
	w.env.RegisterDelayedCallback(func() {
		res := decision(a, idemwf.Retry)
		res.Evidence, res.RequestID = ev, "r1"
		bare = w.updateAs("r1", res)
		res.Confirmed, res.RequestID = true, "r2"
		noReason = w.updateAs("r2", res)
	}, time.Hour)
	w.env.RegisterDelayedCallback(func() {
		refusedWith(t, bare, "retry contradicts the evidence, which implies completed (the gateway charged ch_1)")
		refusedWith(t, noReason, "confirm it, with a reason")
		res := decision(a, idemwf.Retry)
		res.Evidence, res.RequestID, res.Confirmed, res.Reason = ev, "r3", true, "the charge was voided at the gateway by hand"
		confirmed = w.updateAs("r3", res)
	}, 2*time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	audit = w.decisions(t)
	if !confirmed.done || confirmed.err != nil {
		t.Fatalf("confirmed answered %+v", confirmed)
	}
	if len(audit) != 1 || audit[0].Resolution.Evidence == nil || audit[0].Resolution.Evidence.Summary != ev.Summary || !audit[0].Resolution.Confirmed {
		t.Fatalf("audit = %+v", audit)
	}
	if err := w.env.GetWorkflowError(); err != nil || w.charges["order-42"] != 2 {
		t.Fatalf("err %v, charges %d", err, w.charges["order-42"])
	}
}
