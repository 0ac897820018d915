package e2e_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/worker"
)

// TestStandaloneActivityGetsTheSameGuarantees (issue 36): a wrapped
// activity started on its own (client.ExecuteActivity, a Temporal
// Standalone Activity, no workflow) on the dev server:
//   - its operation is named by its activity ID: the record is the
//     standalone scope of that ID, and starting it again under the same ID
//     replays the result without running the action;
//   - its heartbeats renew the lease: an action that outlasts the lease
//     twice keeps its record EXECUTING and finishes in its first attempt;
//   - an unknown outcome is held: the record ABANDONED, the activity
//     failed with the non-retryable onceflow.EffectUnknown after one
//     attempt (its retry policy allowed three), a new start under the same
//     ID refused the same way, and only an operator's reopen lets it run
//     again.
func TestStandaloneActivityGetsTheSameGuarantees(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	h := newHarness(t, lease)
	var runs atomic.Int32
	release := make(chan struct{})
	fail := atomic.Bool{}
	fail.Store(true)
	h.startWorker(func(r worker.Registry) error {
		onceactivity.Register(r.Worker, r.Activities,
			func(ctx context.Context, in string) (string, error) {
				runs.Add(1)
				switch in {
				case "long":
					select {
					case <-release:
					case <-ctx.Done():
						return "", ctx.Err()
					}
				case "unknown":
					if fail.Load() {
						return "", errors.New("read timeout after the charge was sent")
					}
				}
				return onceactivity.OperationKey(ctx), nil
			}, onceactivity.Name("standalone"), onceactivity.Code("standalone"))
		return nil
	})
	store, err := redisstore.New(redisstore.Config{Client: h.rdb, Namespace: h.keys})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte(e2eSecret), 1)
	if err != nil {
		t.Fatal(err)
	}
	// A standalone activity's record is named by its namespace and
	// activity ID, as the library spells its scope.
	refOf := func(id string) onceflow.Ref {
		return onceflow.Ref{Code: "standalone", Digest: dig.Digest("standalone", temporalServer.Namespace(), id)}
	}
	start := func(id, in string) client.ActivityHandle {
		t.Helper()
		handle, err := h.tc.ExecuteActivity(context.Background(), client.StartActivityOptions{
			ID: id, TaskQueue: h.queue, StartToCloseTimeout: time.Minute, HeartbeatTimeout: lease + time.Second,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 3},
		}, "standalone", in)
		if err != nil {
			t.Fatalf("start standalone activity %s: %v", id, err)
		}
		return handle
	}
	inspect := func(ref onceflow.Ref) onceflow.Record {
		t.Helper()
		obs, err := store.Inspect(context.Background(), ref)
		if err != nil || !obs.Found {
			t.Fatalf("inspect %s: %+v, %v", ref, obs, err)
		}
		return obs.Record
	}

	// The operation is the activity ID; heartbeats renew the lease.
	longID := "sa-long-" + h.keys
	handle := start(longID, "long")
	var firstLease time.Time
	h.waitFor("the long action to start", func() bool {
		obs, err := store.Inspect(context.Background(), refOf(longID))
		if err == nil && obs.Found && obs.Record.State == onceflow.StateExecuting && firstLease.IsZero() {
			firstLease = obs.Record.LeaseUntil
		}
		return !firstLease.IsZero()
	})
	h.waitFor("two renewals past the first lease", func() bool {
		r := inspect(refOf(longID))
		return r.State == onceflow.StateExecuting && r.LeaseUntil.Sub(firstLease) >= 2*lease
	})
	close(release)
	var key string
	if err := handle.Get(context.Background(), &key); err != nil || key != refOf(longID).String() {
		t.Fatalf("result %q, %v; want the operation key of the activity ID, %s", key, err, refOf(longID))
	}
	if d, err := handle.Describe(context.Background(), client.DescribeActivityOptions{}); err != nil || d.Attempt != 1 {
		t.Fatalf("describe: %+v, %v; want the first attempt to finish (the lease was kept)", d, err)
	}
	again := start(longID, "long")
	if err := again.Get(context.Background(), &key); err != nil || key != refOf(longID).String() || runs.Load() != 1 {
		t.Fatalf("a second start under the same ID: %q, %v, %d runs; want the result replayed", key, err, runs.Load())
	}

	// An unknown outcome is held for a person.
	unknownID := "sa-unknown-" + h.keys
	effectUnknown := func(handle client.ActivityHandle) {
		t.Helper()
		err := handle.Get(context.Background(), &key)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeEffectUnknown.TemporalType() || !ae.NonRetryable() {
			t.Fatalf("err = %v, want the non-retryable %s", err, onceflow.OutcomeEffectUnknown.TemporalType())
		}
		if d, err := handle.Describe(context.Background(), client.DescribeActivityOptions{}); err != nil || d.Attempt != 1 {
			t.Fatalf("describe: %+v, %v; want one attempt, not a blind retry", d, err)
		}
	}
	effectUnknown(start(unknownID, "unknown"))
	if r := inspect(refOf(unknownID)); r.State != onceflow.StateAbandoned {
		t.Fatalf("record %+v, want ABANDONED", r)
	}
	fail.Store(false)
	effectUnknown(start(unknownID, "unknown"))
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs; the held operation ran again without a decision", n)
	}
	if out, err := h.operator("reopen", "-record", refOf(unknownID).String(), "-reason", "the provider shows no charge"); err != nil || !strings.Contains(out, "reopened") {
		t.Fatalf("reopen: %q, %v", out, err)
	}
	if err := start(unknownID, "unknown").Get(context.Background(), &key); err != nil || runs.Load() != 3 {
		t.Fatalf("after the reopen: %v, %d runs; want one more run", err, runs.Load())
	}
}
