package workflow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/onceflowtest"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// ledgerBank is a downstream that can be asked: its charge happens, and
// the call then fails; its Reconcile finds the charge.
type ledgerBank struct{ charges atomic.Int32 }

func (b *ledgerBank) Book(_ context.Context, ref string) (string, error) {
	b.charges.Add(1)
	return "", errors.New("read tcp: connection reset")
}

func bookWorkflow(ctx workflow.Context, ref string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var b *ledgerBank
	var id string
	err := workflow.ExecuteActivity(ctx, b.Book, ref).Get(ctx, &id)
	return id, err
}

// TestTheActivitysReconcileIsTheOperatorsEvidence: for any service, an
// incident of an activity that declares a Reconcile can be asked about
// now (idemwf.EvidenceUpdate): the activity's own Reconcile runs, on its
// task queue, and its answer is the evidence, shown with the incident in
// the pending list and pre-filling the decision. An incident of an
// activity without one is refused with the reason.
func TestTheActivitysReconcileIsTheOperatorsEvidence(t *testing.T) {
	t.Parallel()
	env := (&testsuite.WorkflowTestSuite{}).NewTestWorkflowEnvironment()
	once := onceflowtest.Attach(t, env)
	b := &ledgerBank{}
	onceactivity.Register(env, once.Activities, b.Book,
		onceactivity.Reconcile(func(_ context.Context, ref string, _ onceflow.Record) (string, bool, error) {
			return "B-" + ref, b.charges.Load() > 0, nil
		}))
	env.RegisterWorkflow(bookWorkflow)
	w := &world{env: env}
	var (
		ev     idemwf.Evidence
		askErr error
		listed []idemwf.PendingRecovery
	)
	env.RegisterDelayedCallback(func() {
		pending := w.pending(t)
		if len(pending) != 1 || !pending[0].Reconcile {
			t.Errorf("pending %+v; want one incident whose activity declares a Reconcile", pending)
			return
		}
		env.UpdateWorkflow(idemwf.EvidenceUpdate, "ask", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(e error) { askErr = e },
			OnComplete: func(v any, e error) {
				askErr = e
				if e == nil {
					ev = v.(idemwf.Evidence)
				}
			},
		}, pending[0].Incident)
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		listed = w.pending(t)
		p := listed[0]
		w.update(idemwf.Resolution{RecordKey: p.Incident.RecordKey, Attempt: p.Incident.Attempt, Rev: p.Incident.Rev,
			Decision: idemwf.Completed, Result: p.Evidence.Result, Evidence: p.Evidence, Reason: "the ledger shows it"})
	}, 2*time.Hour)
	env.ExecuteWorkflow(bookWorkflow, "r1")
	if askErr != nil || ev.Implies != idemwf.Completed || string(ev.Result) != `"B-r1"` {
		t.Fatalf("evidence %+v, err %v; want the Reconcile's completed B-r1", ev, askErr)
	}
	if len(listed) != 1 || listed[0].Evidence == nil || listed[0].Evidence.Implies != idemwf.Completed || listed[0].EvidenceAt.IsZero() {
		t.Fatalf("pending %+v; want the evidence shown with the incident", listed)
	}
	var id string
	if err := env.GetWorkflowResult(&id); err != nil || id != "B-r1" || b.charges.Load() != 1 {
		t.Fatalf("result %q, err %v, charges %d; want B-r1 from the decision, one charge", id, err, b.charges.Load())
	}
}

// TestAskingWithoutAReconcileIsRefused: the evidence Update of an
// activity that declares no Reconcile is refused, saying why.
func TestAskingWithoutAReconcileIsRefused(t *testing.T) {
	t.Parallel()
	env := (&testsuite.WorkflowTestSuite{}).NewTestWorkflowEnvironment()
	once := onceflowtest.Attach(t, env)
	b := &ledgerBank{}
	onceactivity.Register(env, once.Activities, b.Book)
	env.RegisterWorkflow(bookWorkflow)
	onceflowtest.Decide(env, onceflowtest.Fail("charged by mistake; refunded by hand"))
	w := &world{env: env}
	var askErr error
	env.RegisterDelayedCallback(func() {
		pending := w.pending(t)
		if len(pending) != 1 || pending[0].Reconcile {
			t.Errorf("pending %+v; want one incident, of an activity without a Reconcile", pending)
			return
		}
		env.UpdateWorkflow(idemwf.EvidenceUpdate, "ask", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(e error) { askErr = e }, OnComplete: func(_ any, e error) { askErr = e },
		}, pending[0].Incident)
	}, 500*time.Millisecond)
	env.ExecuteWorkflow(bookWorkflow, "r1")
	if askErr == nil || !strings.Contains(askErr.Error(), "declares no Reconcile") {
		t.Fatalf("asking = %v; want a refusal that says the activity declares no Reconcile", askErr)
	}
}
