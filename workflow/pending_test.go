package workflow_test

import (
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// pendingAttributeQuery answers the workflow's PendingSearchAttribute as
// it upserted it (-1: never set).
const pendingAttributeQuery = "test.pendingAttribute"

func payWithPendingAttribute(ctx workflow.Context, in string, upsert bool) (string, error) {
	r, err := idemwf.NewRecoveryWithOptions(ctx, idemwf.RecoveryOptions{PendingSearchAttribute: upsert})
	if err != nil {
		return "", err
	}
	if err := workflow.SetQueryHandler(ctx, pendingAttributeQuery, func() (int64, error) {
		v, ok := workflow.GetTypedSearchAttributes(ctx).GetInt64(idemwf.PendingKey)
		if !ok {
			return -1, nil
		}
		return v, nil
	}); err != nil {
		return "", err
	}
	return idemwf.Execute[string](ctx, r, idemwf.Options{Activity: activityOptions}, "charge", in)
}

// TestPendingSearchAttributeFollowsTheIncidents: with the option, the
// attribute is the number of incidents waiting (1 while the charge waits,
// 0 once it is decided); without it, nothing is upserted.
func TestPendingSearchAttributeFollowsTheIncidents(t *testing.T) {
	t.Parallel()
	for _, upsert := range []bool{true, false} {
		a := incident("charge-payment:d1:abc", 1)
		w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
		w.env.RegisterWorkflow(payWithPendingAttribute)
		attribute := func() int64 {
			v, err := w.env.QueryWorkflow(pendingAttributeQuery)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			if err := v.Get(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		var waiting int64
		w.env.RegisterDelayedCallback(func() {
			waiting = attribute()
			w.env.SignalWorkflow(idemwf.ResolveSignal, decision(a, idemwf.Retry))
		}, time.Hour)
		w.env.ExecuteWorkflow(payWithPendingAttribute, "order-42", upsert)
		if err := w.env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		want, wantAfter := int64(1), int64(0)
		if !upsert {
			want, wantAfter = -1, -1
		}
		if after := attribute(); waiting != want || after != wantAfter {
			t.Errorf("upsert %v: the attribute was %d while waiting and %d after, want %d and %d", upsert, waiting, after, want, wantAfter)
		}
	}
}
