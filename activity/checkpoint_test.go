package activity_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// confirmingClient is the worker's Temporal client as far as the
// wrapper uses it: it records the checkpoints the wrapper has the server
// confirm, and answers each with err.
type confirmingClient struct {
	client.Client // nil: the wrapper calls RecordActivityHeartbeat only
	err           error

	mu        sync.Mutex
	confirmed []onceflow.Checkpoint
}

func (c *confirmingClient) RecordActivityHeartbeat(_ context.Context, _ []byte, details ...any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range details {
		if cp, ok := d.(onceflow.Checkpoint); ok {
			c.confirmed = append(c.confirmed, cp)
		}
	}
	return c.err
}

func (c *confirmingClient) checkpoints() []onceflow.Checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.confirmed)
}

// beats records the heartbeats the SDK sent for the activity.
type beats struct {
	mu  sync.Mutex
	sdk []onceflow.Checkpoint // a zero Checkpoint for one without details
}

func (b *beats) listen(_ *sdkactivity.Info, details converter.EncodedValues) {
	var cp onceflow.Checkpoint
	if details.HasValues() {
		_ = details.Get(&cp)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sdk = append(b.sdk, cp)
}

func (b *beats) sent() []onceflow.Checkpoint {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sdk)
}

// runConfirmed runs one attempt of the "charge" activity on a wrapper
// whose checkpoints c confirms. The lease and the heartbeat timeout are
// an hour, so no heartbeat tick falls within the attempt: what the SDK
// sends is the checkpoint's alone.
func runConfirmed(t *testing.T, c *confirmingClient, fn func(context.Context, chargeIn) (chargeOut, error)) (*beats, error) {
	t.Helper()
	store, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("test secret"), 1)
	if err != nil {
		t.Fatal(err)
	}
	w, err := onceactivity.New(onceactivity.Config{Executor: exec, Digester: dig, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	b := &beats{}
	env.SetOnActivityHeartbeatListener(b.listen)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "wf-" + storetest.RandomHex(4)})
	env.RegisterWorkflow(chargeWorkflow)
	onceactivity.Register(env, w, fn, onceactivity.Name("charge"), onceactivity.Code("charge-payment"))
	env.ExecuteWorkflow(chargeWorkflow, chargeIn{Order: "o-1", Amount: 1}, time.Hour, int32(1))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var out chargeOut
	return b, env.GetWorkflowResult(&out)
}

// The checkpoint before the action is one heartbeat, the one the server
// confirms: the SDK, which has sent nothing in the attempt, sends no
// heartbeat of its own beside it (an RPC it would wait for too).
func TestTheCheckpointIsOneConfirmedHeartbeat(t *testing.T) {
	t.Parallel()
	f := &fixture{}
	c := &confirmingClient{}
	b, err := runConfirmed(t, c, f.charge)
	if err != nil || f.runs.Load() != 1 {
		t.Fatalf("err %v, ran %d times", err, f.runs.Load())
	}
	if cps := c.checkpoints(); len(cps) != 1 || cps[0].Phase != onceflow.PhaseExecuting || cps[0].TemporalAttempt != 1 {
		t.Fatalf("confirmed %+v; want one checkpoint of attempt 1, executing", cps)
	}
	if sent := b.sent(); len(sent) != 0 {
		t.Fatalf("the SDK sent %+v besides the confirmed checkpoint", sent)
	}
}

// A checkpoint the server refuses (the activity was cancelled, paused or
// reset) runs nothing, and the SDK's heartbeat follows it, so the SDK
// hands the server's answer to the activity's context as before.
func TestARefusedCheckpointRunsNothingAndTheSDKHeartbeats(t *testing.T) {
	t.Parallel()
	f := &fixture{}
	c := &confirmingClient{err: errors.New("the server refuses the heartbeat")}
	b, err := runConfirmed(t, c, f.charge)
	if err == nil || f.runs.Load() != 0 {
		t.Fatalf("err %v, ran %d times; want an error and no run", err, f.runs.Load())
	}
	// The attempt recorded no effect, so it tries to settle its
	// checkpoint too: both through the SDK as well, once it has beaten.
	cps := c.checkpoints()
	if len(cps) != 2 || cps[0].Phase != onceflow.PhaseExecuting || cps[1].Phase != onceflow.PhaseSettled {
		t.Fatalf("confirmed %+v; want the checkpoint tried, then settled", cps)
	}
	if sent := b.sent(); !slices.Equal(sent, cps) {
		t.Fatalf("the SDK sent %+v; want %+v", sent, cps)
	}
}
