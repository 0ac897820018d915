package activity_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/handshake"
	"github.com/onceflow/onceflow/internal/logtest"
)

// TestMain runs the tests with the shared Redis up, then checks that no
// goroutine (a renewal, a heartbeat, a guarded call) outlived them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.MainM(m)) }

type chargeIn struct {
	Order  string
	Amount int
}

type chargeOut struct {
	ChargeID string
	Key      string
}

type fixture struct {
	store  *redisstore.Store
	exec   *idemstore.Executor
	dig    *onceflow.Digester
	logger *slog.Logger
	// wrapper is the last run's: each run registers the activity on a
	// Wrapper of its own over the same executor and secret, as another
	// worker process would.
	wrapper *onceactivity.Wrapper
	runs    atomic.Int32
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// newFixtureWith is newFixture with the wrapper's logger.
func newFixtureWith(t *testing.T, logger *slog.Logger) *fixture {
	t.Helper()
	store, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("test secret"), 1)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, exec: exec, dig: dig, logger: logger}
	f.wrapper = f.newWrapper(t)
	return f
}

// newWrapper is a Wrapper over the fixture's executor and secret.
func (f *fixture) newWrapper(t *testing.T) *onceactivity.Wrapper {
	t.Helper()
	w, err := onceactivity.New(onceactivity.Config{Executor: f.exec, Digester: f.dig, Logger: f.logger})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// chargeWorkflow runs the "charge" activity with the given options.
func chargeWorkflow(ctx workflow.Context, in chargeIn, heartbeat time.Duration, maxAttempts int32) (chargeOut, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Millisecond, MaximumAttempts: maxAttempts},
	})
	var out chargeOut
	err := workflow.ExecuteActivity(ctx, "charge", in).Get(ctx, &out)
	return out, err
}

// run registers fn as the "charge" activity, of code "charge-payment"
// unless opts give another, and runs chargeWorkflow on it in a workflow
// of its own.
func (f *fixture) run(t *testing.T, fn func(context.Context, chargeIn) (chargeOut, error),
	in chargeIn, heartbeat time.Duration, maxAttempts int32, opts ...onceactivity.Option,
) (chargeOut, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "wf-" + storetest.RandomHex(4)})
	env.RegisterWorkflow(chargeWorkflow)
	f.wrapper = f.newWrapper(t)
	onceactivity.Register(env, f.wrapper, fn, append([]onceactivity.Option{onceactivity.Name("charge"), onceactivity.Code("charge-payment")}, opts...)...)
	env.ExecuteWorkflow(chargeWorkflow, in, heartbeat, maxAttempts)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var out chargeOut
	err := env.GetWorkflowResult(&out)
	return out, err
}

func (f *fixture) charge(ctx context.Context, in chargeIn) (chargeOut, error) {
	f.runs.Add(1)
	return chargeOut{ChargeID: "ch_" + in.Order, Key: onceactivity.OperationKey(ctx)}, nil
}

func businessKey(in chargeIn) string { return in.Order + "/charge" }

// holdBusinessKey makes another workflow's attempt hold in's business key
// in EXECUTING for lease, as the wrapper would have.
func (f *fixture) holdBusinessKey(t *testing.T, in chargeIn, lease time.Duration) onceflow.Ref {
	t.Helper()
	ref, _, _ := f.holdBusinessKeyAs(t, in, lease)
	return ref
}

// holdBusinessKeyAs is holdBusinessKey, with the holder's ownership and
// nonce, so the test can complete the held operation.
func (f *fixture) holdBusinessKeyAs(t *testing.T, in chargeIn, lease time.Duration) (onceflow.Ref, driver.Ownership, onceflow.Nonce) {
	t.Helper()
	dig, _ := onceflow.NewDigester([]byte("test secret"), 1)
	held := storetest.NewFixture()
	held.Ref = onceflow.Ref{Code: "charge-payment", Digest: dig.Digest("business", "default-test-namespace", businessKey(in))}
	input, _ := json.Marshal(in)
	held.Fingerprint = onceflow.FingerprintOf(input)
	held.Lease = lease
	nonce := onceflow.NewNonce()
	out, err := f.store.ClaimStart(t.Context(), held.ClaimStart(onceflow.NewOwner(), nonce))
	if err != nil {
		t.Fatal(err)
	}
	return held.Ref, out.(driver.Acquired).Ownership, nonce
}

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an ApplicationError", err)
	}
	return ae
}

func TestBusinessKeyRunsOnceAcrossWorkflows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	opts := onceactivity.BusinessKey(businessKey)
	in := chargeIn{Order: "o-" + storetest.RandomHex(4), Amount: 1000}
	first, err := f.run(t, f.charge, in, 10*time.Second, 3, opts)
	if err != nil || first.ChargeID != "ch_"+in.Order || first.Key == "" {
		t.Fatalf("first = %+v, %v", first, err)
	}
	// Outside the activity, the same key is derived from what a reconcile
	// activity or an HTTP handler knows.
	if k := f.wrapper.BusinessOperationKey("default-test-namespace", "charge-payment", businessKey(in)); k != first.Key {
		t.Fatalf("BusinessOperationKey = %q, the activity's OperationKey %q", k, first.Key)
	}
	second, err := f.run(t, f.charge, in, 10*time.Second, 3, opts)
	if err != nil || second != first || f.runs.Load() != 1 {
		t.Fatalf("second = %+v, %v; ran %d times", second, err, f.runs.Load())
	}
	// The same key with another amount is refused, without retries.
	in.Amount = 999999
	_, err = f.run(t, f.charge, in, 10*time.Second, 3, opts)
	if ae := appError(t, err); ae.Type() != onceflow.OutcomeFingerprintMismatch.TemporalType() || !ae.NonRetryable() {
		t.Fatalf("reused key: %v (type %s)", err, ae.Type())
	}
}

func TestTheDefaultScopeDedupesOnlyWithinARun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := chargeIn{Order: "o-1", Amount: 1}
	for range 2 { // two workflow runs: two operations
		if _, err := f.run(t, f.charge, in, 10*time.Second, 3); err != nil {
			t.Fatal(err)
		}
	}
	if f.runs.Load() != 2 {
		t.Fatalf("ran %d times, want once per run", f.runs.Load())
	}
}

func TestMissingHeartbeatTimeoutIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.run(t, f.charge, chargeIn{Order: "x"}, 0, 3)
	ae := appError(t, err)
	if ae.Type() != onceflow.OutcomeMisconfigured.TemporalType() || !ae.NonRetryable() || f.runs.Load() != 0 {
		t.Fatalf("err = %v (type %s), runs %d", err, ae.Type(), f.runs.Load())
	}
}

func TestRetryableNoEffectIsRetriedAndTakenOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var attempts []int32
	fn := func(ctx context.Context, in chargeIn) (chargeOut, error) {
		attempts = append(attempts, sdkactivity.GetInfo(ctx).Attempt)
		if len(attempts) == 1 {
			return chargeOut{}, idemstore.RetryableNoEffect(errors.New("provider said 503 before charging"))
		}
		fence, _ := onceactivity.Fence(ctx)
		return chargeOut{ChargeID: fence.String()}, nil
	}
	out, err := f.run(t, fn, chargeIn{Order: "r"}, 10*time.Second, 3)
	if err != nil || len(attempts) != 2 || attempts[1] != 2 || !strings.HasPrefix(out.ChargeID, "2.3@") {
		// Fence 2.3: attempt 1 claimed (rev 1) and failed (rev 2); attempt 2 took over (rev 3).
		t.Fatalf("out %+v, err %v, attempts %v; want attempt 2 to take over (fence 2.3)", out, err, attempts)
	}
}

func TestUnknownEffectFailsWithDetails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fn := func(context.Context, chargeIn) (chargeOut, error) {
		f.runs.Add(1)
		return chargeOut{}, errors.New("read timeout after the request was sent")
	}
	_, err := f.run(t, fn, chargeIn{Order: "u"}, 10*time.Second, 5)
	ae := appError(t, err)
	if ae.Type() != onceflow.OutcomeEffectUnknown.TemporalType() || !ae.NonRetryable() || f.runs.Load() != 1 {
		t.Fatalf("err = %v (type %s), runs %d", err, ae.Type(), f.runs.Load())
	}
	var d onceflow.EffectUnknownDetails
	if err := ae.Details(&d); err != nil {
		t.Fatal(err)
	}
	if d.State != string(onceflow.StateAbandoned) || !d.Recorded || d.Attempt != 1 || d.RecordKey == "" || d.OperationCode != "charge-payment" {
		t.Fatalf("details = %+v", d)
	}
}

// An unknown effect carries the activity's IdempotentDownstream, so the
// workflow can retry by itself; without the declaration it says false.
func TestUnknownEffectCarriesTheIdempotentDeclaration(t *testing.T) {
	t.Parallel()
	for _, idempotent := range []bool{true, false} {
		f := newFixture(t)
		fn := func(context.Context, chargeIn) (chargeOut, error) {
			return chargeOut{}, errors.New("read timeout after the request was sent")
		}
		opts := []onceactivity.Option{onceactivity.Code("send-mail")}
		if idempotent {
			opts = append(opts, onceactivity.IdempotentDownstream())
		}
		_, err := f.run(t, fn, chargeIn{Order: "i-" + storetest.RandomHex(4)}, 10*time.Second, 1, opts...)
		var d onceflow.EffectUnknownDetails
		if ae := appError(t, err); ae.Type() != onceflow.OutcomeEffectUnknown.TemporalType() || ae.Details(&d) != nil {
			t.Fatalf("err = %v", err)
		}
		if d.IdempotentDownstream != idempotent {
			t.Errorf("declared %v: details say IdempotentDownstream %v", idempotent, d.IdempotentDownstream)
		}
	}
}

func TestInProgressIsRetryableWithTheLeaseLeft(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := chargeIn{Order: "p-" + storetest.RandomHex(4)}
	// Another workflow's attempt holds the business key right now.
	f.holdBusinessKey(t, in, time.Minute)
	_, err := f.run(t, f.charge, in, 10*time.Second, 1, onceactivity.BusinessKey(businessKey), onceactivity.WhenInProgress(onceactivity.InProgressRetry))
	ae := appError(t, err)
	if ae.Type() != onceflow.OutcomeInProgress.TemporalType() || ae.NonRetryable() || f.runs.Load() != 0 {
		t.Fatalf("err = %v (type %s), runs %d", err, ae.Type(), f.runs.Load())
	}
	if d := ae.NextRetryDelay(); d < 30*time.Second || d > time.Minute {
		t.Fatalf("NextRetryDelay = %v, want the holder's lease left (about 1m)", d)
	}
}

// A business-scoped attempt that finds another workflow's attempt running
// waits for it inside the activity, heartbeating, and replays its result:
// it does not use up its one attempt.
func TestInProgressWaitsAndReplaysByDefaultWithABusinessKey(t *testing.T) {
	t.Parallel()
	waiting := make(chan struct{})
	f := newFixtureWith(t, logtest.OnMessage("onceflow: in progress elsewhere; waiting", func() { close(waiting) }))
	in := chargeIn{Order: "w-" + storetest.RandomHex(4)}
	_, held, nonce := f.holdBusinessKeyAs(t, in, time.Minute)
	go func() {
		<-waiting // the other attempt finishes once this one waits on it
		theirs, _ := json.Marshal(chargeOut{ChargeID: "ch_theirs", Key: "k"})
		if _, err := f.store.Complete(context.Background(), driver.CompleteRequest{Ownership: held, Nonce: nonce, Response: theirs, TTL: time.Hour}); err != nil {
			t.Error(err)
		}
	}()
	out, err := f.run(t, f.charge, in, time.Second, 1, onceactivity.BusinessKey(businessKey))
	if err != nil || out.ChargeID != "ch_theirs" || f.runs.Load() != 0 {
		t.Fatalf("out %+v, err %v, runs %d; want the other attempt's result replayed", out, err, f.runs.Load())
	}
}

// textCodec stores results as "id|key" under another codec ID.
type textCodec struct{}

func (textCodec) ID() string { return "text-v1" }
func (textCodec) Marshal(v any) ([]byte, error) {
	o := v.(chargeOut)
	return []byte(o.ChargeID + "|" + o.Key), nil
}
func (textCodec) Unmarshal(b []byte, v any) error {
	id, key, _ := strings.Cut(string(b), "|")
	*v.(*chargeOut) = chargeOut{ChargeID: id, Key: key}
	return nil
}

func TestCodecIsPerActivityAndAMismatchIsNotReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := chargeIn{Order: "c-" + storetest.RandomHex(4)}
	text := []onceactivity.Option{onceactivity.BusinessKey(businessKey), onceactivity.WithCodec(textCodec{})}
	first, err := f.run(t, f.charge, in, 10*time.Second, 3, text...)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := f.run(t, f.charge, in, 10*time.Second, 3, text...); err != nil || again != first || f.runs.Load() != 1 {
		t.Fatalf("replay with the same codec: %+v, %v", again, err)
	}
	// Without WithCodec: JSONCodec, "json-v2".
	_, err = f.run(t, f.charge, in, 10*time.Second, 3, onceactivity.BusinessKey(businessKey))
	if ae := appError(t, err); ae.Type() != onceflow.OutcomeCodecMismatch.TemporalType() || !ae.NonRetryable() || f.runs.Load() != 1 {
		t.Fatalf("replay under another codec: %v (type %s)", err, ae.Type())
	}
}

// A completed decision about an activity with its own codec is stored
// under that codec: the next claim replays it. It was stored under the
// executor's codec (json-v2), and every later claim failed with
// CodecMismatch.
func TestResolvedResultReplaysUnderTheActivitysCodec(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := chargeIn{Order: "r-" + storetest.RandomHex(4)}
	text := []onceactivity.Option{onceactivity.BusinessKey(businessKey), onceactivity.WithCodec(textCodec{})}
	unknown := func(context.Context, chargeIn) (chargeOut, error) {
		f.runs.Add(1)
		return chargeOut{}, errors.New("read timeout after the request was sent")
	}
	_, err := f.run(t, unknown, in, 10*time.Second, 3, text...)
	var d onceflow.EffectUnknownDetails
	if ae := appError(t, err); ae.Type() != onceflow.OutcomeEffectUnknown.TemporalType() || ae.Details(&d) != nil {
		t.Fatalf("err = %v", err)
	}
	decided, _ := json.Marshal(chargeOut{ChargeID: "ch_decided", Key: "k"})
	if err := f.wrapper.ResolveRecord(t.Context(), handshake.ResolveRecordInput{Details: d, Target: "COMPLETED", Response: decided}); err != nil {
		t.Fatal(err)
	}
	out, err := f.run(t, f.charge, in, 10*time.Second, 3, text...)
	if err != nil || out != (chargeOut{ChargeID: "ch_decided", Key: "k"}) || f.runs.Load() != 1 {
		t.Fatalf("after the decision: %+v, %v, %d runs; want the decided result replayed", out, err, f.runs.Load())
	}
}

// A Reconcile slower than the HeartbeatTimeout keeps its attempt alive:
// the wrapper heartbeats before the action starts too.
func TestSlowReconcileKeepsHeartbeating(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := chargeIn{Order: "h-" + storetest.RandomHex(4)}
	// An attempt of another workflow died mid-charge.
	storetest.WaitLeaseExpired(t, f.store, f.holdBusinessKey(t, in, 10*time.Millisecond))
	reconcile := onceactivity.Reconcile(func(ctx context.Context, in chargeIn, _ onceflow.Record) (chargeOut, bool, error) {
		select { // three heartbeat timeouts
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
			return chargeOut{}, false, ctx.Err()
		}
		return chargeOut{ChargeID: "found"}, true, nil
	})
	out, err := f.run(t, f.charge, in, 500*time.Millisecond, 1, onceactivity.BusinessKey(businessKey), reconcile)
	if err != nil || out.ChargeID != "found" || f.runs.Load() != 0 {
		t.Fatalf("out %+v, err %v, runs %d", out, err, f.runs.Load())
	}
}

func TestWrapperConfigIsValidated(t *testing.T) {
	t.Parallel()
	if _, err := onceactivity.New(onceactivity.Config{}); err == nil {
		t.Fatal("accepted an empty config")
	}
}

// The record names no workflow (Hardening 5): its op field is a keyed
// digest of the operation ID, and no field but the stored result (which is
// the activity's own) holds the workflow ID, the run ID or the business
// key.
func TestStoredRecordHoldsNoWorkflowID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := chargeIn{Order: "o-" + storetest.RandomHex(4), Amount: 1000}
	var wfID, runID string
	fn := func(ctx context.Context, in chargeIn) (chargeOut, error) {
		info := sdkactivity.GetInfo(ctx)
		wfID, runID = info.WorkflowExecution.ID, info.WorkflowExecution.RunID
		return f.charge(ctx, in)
	}
	if _, err := f.run(t, fn, in, 10*time.Second, 3, onceactivity.BusinessKey(businessKey)); err != nil {
		t.Fatal(err)
	}
	dig, _ := onceflow.NewDigester([]byte("test secret"), 1)
	ref := onceflow.Ref{Code: "charge-payment", Digest: dig.Digest("business", "default-test-namespace", businessKey(in))}
	fields, err := redistest.Client(t).HGetAll(t.Context(), f.store.Key(ref)).Result()
	if err != nil || len(fields) == 0 {
		t.Fatalf("record: %v, %v", fields, err)
	}
	for k, v := range fields {
		if k == "resp" {
			continue
		}
		for _, raw := range []string{wfID, runID, in.Order} {
			if strings.Contains(v, raw) {
				t.Errorf("field %s = %q holds %q", k, v, raw)
			}
		}
	}
	if op := fields["op"]; len(op) != 32 || strings.Trim(op, "0123456789abcdef") != "" {
		t.Errorf("op = %q, want a 32-hex keyed digest", op)
	}
}
