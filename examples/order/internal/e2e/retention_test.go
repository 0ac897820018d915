package e2e_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// TestRetryPastTheRetentionWaitsForAnOverride (issue 36, the
// provider-retention guard, on a real server): an activity that declares
// its downstream idempotent, with a one-second DownstreamRetention, ends
// with its effect unknown more than a second after its record was made.
// The workflow does not retry it by itself (without the guard it would, at
// once, and the downstream, having forgotten the key, would act twice): the
// incident waits, listed with the end of the window. The operator's retry
// is refused until it says why (-override-retention); then the activity
// runs again, once, and the override stays with the decision.
func TestRetryPastTheRetentionWaitsForAnOverride(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 0)
	in := h.keys + "/order"
	var calls atomic.Int32
	h.startWorker(func(r worker.Registry) error {
		r.Worker.RegisterWorkflow(recoverWorkflow)
		onceactivity.Register(r.Worker, r.Activities, func(ctx context.Context, in string) (string, error) {
			if calls.Add(1) > 1 {
				return "charged: " + in, nil
			}
			// The first attempt reaches the downstream and hears nothing
			// back until the retention has passed, by Redis's clock (the
			// one the record's creation is measured by).
			start, err := h.rdb.Time(ctx).Result()
			if err != nil {
				return "", err
			}
			for {
				now, err := h.rdb.Time(ctx).Result()
				if err != nil {
					return "", err
				}
				if now.Sub(start) > 1500*time.Millisecond {
					return "", errors.New("read timeout after the charge was sent")
				}
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		}, onceactivity.Name("retained"), onceactivity.Code("retained"), onceactivity.BusinessKey(func(in string) string { return in }),
			onceactivity.IdempotentDownstream(), onceactivity.DownstreamRetention(time.Second))
		return nil
	})
	run := h.start(recoverWorkflow, "retention-"+h.keys, "retained", in)

	p := h.pendingOf(run.GetID(), 1).Pending[0]
	if p.RetentionEnds.IsZero() || !p.RetentionEnds.Before(time.Now()) || p.Details.DownstreamRetention != time.Second || p.Details.ReachedAt.IsZero() {
		t.Fatalf("pending = %+v, want the window (1s), already over", p)
	}
	out, err := h.operator("resolve", incidentArgs(run.GetID(), p.Incident, "retry")...)
	if err == nil || !strings.Contains(out+err.Error(), "retention") {
		t.Fatalf("a retry past the retention: %q, %v; want it refused", out, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the activity ran %d times before the override, want 1", n)
	}
	out, err = h.operator("resolve", append(incidentArgs(run.GetID(), p.Incident, "retry"),
		"-override-retention", "the provider shows no charge for the order")...)
	if err != nil || !strings.HasPrefix(out, "applied: retry") {
		t.Fatalf("the overridden retry: %q, %v", out, err)
	}
	var res string
	if err := run.Get(context.Background(), &res); err != nil || res != "charged: "+in || calls.Load() != 2 {
		t.Fatalf("result %q, %v, %d calls; want one re-run", res, err, calls.Load())
	}
	v, err := h.tc.QueryWorkflow(context.Background(), run.GetID(), "", idemwf.DecisionsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var ds []idemwf.Decided
	if err := v.Get(&ds); err != nil || len(ds) != 1 || ds[0].Via == idemwf.ViaAutomatic || !strings.Contains(ds[0].Resolution.OverrideRetention, "no charge") {
		t.Fatalf("decisions = %+v, %v; want the operator's retry with its override", ds, err)
	}
}
