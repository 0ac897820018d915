package activity_test

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
)

// TestAReferenceUnderASecondKeyIsRefused: the order's business reference
// (DownstreamKey) arrives first under one operation key, then under
// another (the workflow was started again under a new ID, so the run-scoped
// key is new: a new key per retry). With RefuseReusedReference the second
// operation fails with the non-retryable onceflow.ReferenceReused, naming both
// keys, and its action does not run; without it the second runs, flagged
// (TestCheckReferenceFlagsAndRefuses counts it). The same operation retried
// under its own key is no reuse. Without the guard the order is charged
// twice.
func TestAReferenceUnderASecondKeyIsRefused(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{true, false} {
		f := newFixture(t)
		opts := []onceactivity.Option{onceactivity.DownstreamKey(func(in chargeIn) string { return in.Order })}
		if refuse {
			opts = append(opts, onceactivity.RefuseReusedReference())
		}
		in := chargeIn{Order: "order-42", Amount: 100}
		first, err := f.run(t, f.charge, in, 10*time.Second, 3, opts...)
		if err != nil {
			t.Fatal(err)
		}
		second, err := f.run(t, f.charge, in, 10*time.Second, 3, opts...)
		if !refuse {
			if err != nil || f.runs.Load() != 2 || second.Key == first.Key {
				t.Fatalf("flag only: %+v, %v, %d runs; want the second run, under its own key", second, err, f.runs.Load())
			}
			continue
		}
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeReferenceReused.TemporalType() || !ae.NonRetryable() || f.runs.Load() != 1 {
			t.Fatalf("refuse: %v, %d runs; want a non-retryable %s and one run", err, f.runs.Load(), onceflow.OutcomeReferenceReused.TemporalType())
		}
		var d onceflow.ReferenceReusedDetails
		if err := ae.Details(&d); err != nil || d.Reference != "order-42" || d.Holder != first.Key || d.Key == first.Key || d.Key == "" {
			t.Fatalf("details %+v, %v; want the reference and both keys (first %s)", d, err, first.Key)
		}
	}
}
