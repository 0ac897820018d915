package activity_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestOnlyARecordedNoEffectSettlesTheCheckpoint: an attempt that reached
// the action heartbeats the checkpoint PhaseExecuting, and only a failure
// recorded as having had no effect may replace it with PhaseSettled. An
// unknown effect whose abandonment was recorded is no such failure: were
// it settled, the next attempt and the workflow's settle would read "no
// attempt reached the action" and run it again. Every failure is one
// *onceflow.Error now, so this pins that the wrapper asks its outcome,
// not only whether it was recorded.
func TestOnlyARecordedNoEffectSettlesTheCheckpoint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		err         error
		wantSettled bool
	}{
		{"unknown effect", errors.New("read timeout after the request was sent"), false},
		{"no effect", idemstore.RetryableNoEffect(errors.New("declined before charging")), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "wf-" + storetest.RandomHex(4)})
			var (
				mu     sync.Mutex
				phases []string
			)
			env.SetOnActivityHeartbeatListener(func(_ *sdkactivity.Info, details converter.EncodedValues) {
				var cp onceflow.Checkpoint
				if details.HasValues() && details.Get(&cp) == nil {
					mu.Lock()
					phases = append(phases, cp.Phase)
					mu.Unlock()
				}
			})
			env.RegisterWorkflow(chargeWorkflow)
			onceactivity.Register(env, f.newWrapper(t), func(context.Context, chargeIn) (chargeOut, error) {
				return chargeOut{}, c.err
			}, onceactivity.Name("charge"), onceactivity.Code("charge-payment"))
			env.ExecuteWorkflow(chargeWorkflow, chargeIn{Order: "s"}, 10*time.Second, int32(1))
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() == nil {
				t.Fatalf("the workflow did not fail: %v", env.GetWorkflowError())
			}
			mu.Lock()
			defer mu.Unlock()
			executing, settled := false, false
			for _, p := range phases {
				executing = executing || p == onceflow.PhaseExecuting
				settled = settled || p == onceflow.PhaseSettled
			}
			if !executing || settled != c.wantSettled {
				t.Fatalf("checkpoints %v: want %s, then settled %v", phases, onceflow.PhaseExecuting, c.wantSettled)
			}
		})
	}
}
