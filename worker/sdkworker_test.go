package worker_test

import (
	"slices"
	"testing"

	sdkactivity "go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/onceflow/onceflow/internal/handshake"
	"github.com/onceflow/onceflow/onceflowtest"
	"github.com/onceflow/onceflow/worker"
)

// recordingWorker is an SDK worker that records the names of the
// activities registered on it.
type recordingWorker struct {
	sdkworker.Worker
	names []string
}

func (r *recordingWorker) RegisterActivityWithOptions(_ any, o sdkactivity.RegisterOptions) {
	r.names = append(r.names, o.Name)
}

// TestSDKWorkerRegistersUnderTheSDKsNames: the SDKWorker's
// RegisterActivity wraps a struct's methods under their names, and
// RegisterActivityWithOptions under the name it is given, each through
// onceflow (in its catalog); onceflow's own activities come once.
func TestSDKWorkerRegistersUnderTheSDKsNames(t *testing.T) {
	t.Parallel()
	once := onceflowtest.New(t)
	rec := &recordingWorker{}
	w := &worker.SDKWorker{Worker: rec, Once: &worker.Attached{Activities: once.Activities}}
	w.RegisterActivity(&Bank{})
	w.RegisterActivityWithOptions(Withdraw, sdkactivity.RegisterOptions{Name: "withdraw-v2"})
	want := []string{handshake.ResolveRecordActivity, handshake.SettleActivity, handshake.ReconcileActivity, "Deposit", "Withdraw", "withdraw-v2"}
	slices.Sort(rec.names)
	slices.Sort(want)
	if !slices.Equal(rec.names, want) {
		t.Fatalf("registered %q; want %q", rec.names, want)
	}
	for _, name := range []string{"Deposit", "Withdraw", "withdraw-v2"} {
		if _, ok := once.Activities.WrappedActivity(name); !ok {
			t.Errorf("%s is not wrapped", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("SkipInvalidStructFunctions was taken; onceflow registers every method")
		}
	}()
	w.RegisterActivityWithOptions(&Bank{}, sdkactivity.RegisterOptions{Name: "Other", SkipInvalidStructFunctions: true})
}
