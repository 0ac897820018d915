package workflow_test

import (
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// TestRetryPastTheDownstreamsRetentionNeedsAnOverride: an idempotent
// step whose first attempt reached the downstream 25 hours ago, with a
// 24-hour DownstreamRetention, is not retried automatically (the
// downstream may have forgotten the key): the incident waits for a
// person, with the end of the window listed. An operator's Retry without
// an override is refused; one with OverrideRetention is applied, and the
// override stays with the decision. Both refusals are counted. Without
// the guard the workflow retries at once by itself.
func TestRetryPastTheDownstreamsRetentionNeedsAnOverride(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	a := incident("charge-payment:d1:abc", 1)
	a.IdempotentDownstream, a.DownstreamRetention, a.ReachedAt = true, 24*time.Hour, start.Add(-25*time.Hour)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	w.env.SetStartTime(start)
	var plain, overridden *answer
	w.env.RegisterDelayedCallback(func() {
		p := w.pending(t)
		if len(p) != 1 || !p[0].RetentionEnds.Equal(start.Add(-time.Hour)) {
			t.Errorf("pending = %+v, want the incident, its window ended an hour before the start", p)
		}
		plain = w.updateAs("r1", decision(a, idemwf.Retry))
	}, time.Hour)
	w.env.RegisterDelayedCallback(func() {
		res := decision(a, idemwf.Retry)
		res.OverrideRetention = "the provider's dashboard shows no charge for order-42"
		overridden = w.updateAs("r2", res)
	}, 2*time.Hour)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	refusedWith(t, plain, "retention")
	if !overridden.done || overridden.err != nil {
		t.Fatalf("the overridden retry was answered %+v", overridden)
	}
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "charged order-42" || w.charges["order-42"] != 2 {
		t.Fatalf("out %q, err %v, charges %d", out, w.env.GetWorkflowError(), w.charges["order-42"])
	}
	ds := w.decisions(t)
	if len(ds) != 1 || ds[0].Via == idemwf.ViaAutomatic || !strings.Contains(ds[0].Resolution.OverrideRetention, "no charge") {
		t.Fatalf("decisions = %+v, want the operator's retry with its override", ds)
	}
	if n := w.metrics.get("onceflow_recovery_retention_refusals", "by=automatic"); n != 1 {
		t.Errorf("onceflow_recovery_retention_refusals{by=automatic} = %d, want 1", n)
	}
	if n := w.metrics.get("onceflow_recovery_retention_refusals", "by=operator"); n != 1 {
		t.Errorf("onceflow_recovery_retention_refusals{by=operator} = %d, want 1", n)
	}
}

// TestRetryWithinTheDownstreamsRetentionIsAutomatic: the same step whose
// first attempt reached the downstream an hour ago is retried by the
// workflow itself, as without a retention.
func TestRetryWithinTheDownstreamsRetentionIsAutomatic(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	a := incident("charge-payment:d1:abc", 1)
	a.IdempotentDownstream, a.DownstreamRetention, a.ReachedAt = true, 24*time.Hour, start.Add(-time.Hour)
	w := newWorld(t, map[string][]onceflow.EffectUnknownDetails{"order-42": {a}}, nil)
	w.env.SetStartTime(start)
	w.env.ExecuteWorkflow(payWorkflow, "order-42", "")
	var out string
	if err := w.env.GetWorkflowResult(&out); err != nil || out != "charged order-42" {
		t.Fatalf("out %q, err %v", out, w.env.GetWorkflowError())
	}
	automaticOnly(t, w, idemwf.Retry, idemwf.BasisIdempotentDownstream)
	if n := w.metrics.total("onceflow_recovery_retention_refusals"); n != 0 {
		t.Errorf("onceflow_recovery_retention_refusals = %d, want 0", n)
	}
}
