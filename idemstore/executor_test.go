package idemstore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"

	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestMain runs the tests with the shared Redis up, then checks that no
// goroutine (a renewal, a heartbeat, a guarded call) outlived them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.MainM(m)) }

type env struct {
	store  *redisstore.Store
	faulty *storetest.FaultyStore
	exec   *idemstore.Executor
}

func newEnv(t *testing.T, cfg idemstore.ExecutorConfig) env {
	t.Helper()
	// A generous command timeout, but well under the lease's safety margin.
	timeout := 2 * time.Second
	if cfg.Lease > 0 {
		timeout = min(timeout, cfg.Lease/6)
	}
	rs, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t), CommandTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	faulty := storetest.NewFaultyStore(rs)
	cfg.Store = faulty
	exec, err := idemstore.NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return env{store: rs, faulty: faulty, exec: exec}
}

// isolated returns an executor over a FaultyStore of its own on the same
// Redis, so a test's injected faults hit only its own calls.
func (e env) isolated(t *testing.T) (*storetest.FaultyStore, *idemstore.Executor) {
	t.Helper()
	return e.isolatedWith(t, idemstore.ExecutorConfig{})
}

// isolatedWith is isolated with an executor configuration of its own.
func (e env) isolatedWith(t *testing.T, cfg idemstore.ExecutorConfig) (*storetest.FaultyStore, *idemstore.Executor) {
	t.Helper()
	local := storetest.NewFaultyStore(e.store)
	cfg.Store = local
	exec, err := idemstore.NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return local, exec
}

func request(f storetest.Fixture) idemstore.Request {
	return idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint}
}

func (e env) inspect(t *testing.T, ref onceflow.Ref) driver.Observation {
	t.Helper()
	obs, err := e.store.Inspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

func (e env) wantState(t *testing.T, ref onceflow.Ref, want onceflow.State) onceflow.Record {
	t.Helper()
	obs := e.inspect(t, ref)
	if !obs.Found || obs.Record.State != want {
		t.Fatalf("record %+v (found %v), want %s", obs.Record, obs.Found, want)
	}
	return obs.Record
}

// counted returns an action that counts its runs and answers resp, err.
func counted(runs *atomic.Int32, resp string, err error) idemstore.Action {
	return func(context.Context) ([]byte, error) {
		runs.Add(1)
		if err != nil {
			return nil, err
		}
		return []byte(resp), nil
	}
}

// expiredExecuting leaves a record whose owner's lease ran out in EXECUTING:
// a worker that died in the middle of the action.
func (e env) expiredExecuting(t *testing.T, f storetest.Fixture) onceflow.Record {
	t.Helper()
	req := f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())
	req.Lease = 10 * time.Millisecond
	if _, err := e.store.ClaimStart(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	storetest.WaitLeaseExpired(t, e.store, f.Ref)
	return e.wantState(t, f.Ref, onceflow.StateExecuting)
}

func TestExecuteRunsOnceThenReplays(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	var runs atomic.Int32
	res, err := e.exec.Execute(t.Context(), request(f), counted(&runs, "ch_1", nil))
	if err != nil || res.Outcome != onceflow.OutcomeRan || string(res.Response) != "ch_1" {
		t.Fatalf("first: %+v, %v", res, err)
	}
	res, err = e.exec.Execute(t.Context(), request(f), counted(&runs, "ch_2", nil))
	if err != nil || res.Outcome != onceflow.OutcomeReplayed || string(res.Response) != "ch_1" {
		t.Fatalf("second: %+v, %v", res, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("action ran %d times", runs.Load())
	}
	// The fast path: claim+start and complete, two round trips; a replay is one.
	if c, cs, s := e.faulty.Calls(storetest.MethodComplete), e.faulty.Calls(storetest.MethodClaimStart), e.faulty.Calls(storetest.MethodStart); c != 1 || cs != 2 || s != 0 {
		t.Fatalf("calls: complete %d, claim+start %d, start %d", c, cs, s)
	}
	other := request(f)
	other.Fingerprint = onceflow.FingerprintOf([]byte("another payload"))
	if _, err := e.exec.Execute(t.Context(), other, counted(&runs, "x", nil)); !errors.Is(err, onceflow.OutcomeFingerprintMismatch) {
		t.Fatalf("other payload: %v, want onceflow.OutcomeFingerprintMismatch", err)
	}
}

func TestRetryableNoEffectLetsTheNextAttemptTakeOverAtOnce(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	var runs atomic.Int32
	_, err := e.exec.Execute(t.Context(), request(f), counted(&runs, "", idemstore.RetryableNoEffect(errors.New("card declined"))))
	var re *onceflow.Error
	if !errors.As(err, &re) || !re.Recorded || !errors.Is(err, onceflow.OutcomeRetryable) {
		t.Fatalf("err = %v, want a recorded onceflow.Error", err)
	}
	e.wantState(t, f.Ref, onceflow.StateFailedRetryable)
	res, err := e.exec.Execute(t.Context(), request(f), counted(&runs, "ok", nil))
	if err != nil || res.TookOver != onceflow.StateFailedRetryable || res.Fence.Attempt != 2 {
		t.Fatalf("second attempt: %+v, %v", res, err)
	}
}

func TestUnclassifiedErrorsAndPanicsAbandon(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	actions := map[string]idemstore.Action{
		"plain error": func(context.Context) ([]byte, error) { return nil, errors.New("timeout after send") },
		"marked":      func(context.Context) ([]byte, error) { return nil, idemstore.EffectUnknown(errors.New("502")) },
		"panic":       func(context.Context) ([]byte, error) { panic("boom") },
	}
	for name, action := range actions {
		f := storetest.NewFixture()
		_, err := e.exec.Execute(t.Context(), request(f), action)
		var eu *onceflow.Error
		if !errors.As(err, &eu) || !eu.Recorded || errors.Is(err, onceflow.OutcomeAwaitingDecision) {
			t.Fatalf("%s: err = %v, want a recorded onceflow.Error", name, err)
		}
		r := e.wantState(t, f.Ref, onceflow.StateAbandoned)
		if eu.Attempt != r.Attempt || eu.Rev != r.Rev {
			t.Fatalf("%s: error says attempt %d rev %d, record %d %d", name, eu.Attempt, eu.Rev, r.Attempt, r.Rev)
		}
		// Every later attempt is told recovery is required, and runs nothing.
		_, err = e.exec.Execute(t.Context(), request(f), func(context.Context) ([]byte, error) {
			t.Fatal("ran after abandonment")
			return nil, nil
		})
		if !errors.Is(err, onceflow.OutcomeAwaitingDecision) {
			t.Fatalf("%s: later attempt: %v, want onceflow.OutcomeAwaitingDecision", name, err)
		}
	}
}

// Seed flaw 1: the same retained attempt, invoked twice while the first
// invocation's action runs, must not run the action again. The seed's
// REPLAYED_ACQUIRE → START → ALREADY path ran it twice.
func TestSeedFlaw1SameAttemptTwiceRunsTheActionOnce(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	req := request(f)
	req.Owner = onceflow.NewOwner() // both invocations are one attempt
	var runs atomic.Int32
	running, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := e.exec.Execute(context.Background(), req, func(context.Context) ([]byte, error) {
			runs.Add(1)
			close(running)
			<-release
			return []byte("once"), nil
		})
		first <- err
	}()
	<-running
	for _, split := range []bool{false, true} {
		r := req
		if split { // the two-step path reaches START and gets ALREADY
			r.BeforeStart = func(context.Context, driver.Ownership) error { return nil }
		}
		_, err := e.exec.Execute(t.Context(), r, counted(&runs, "twice", nil))
		var ip *onceflow.Error
		if !errors.As(err, &ip) || !ip.SameOwner || ip.RetryAfter <= 0 {
			t.Fatalf("second invocation (split %v): %v, want onceflow.Error from the same owner", split, err)
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 {
		t.Fatalf("the action ran %d times", runs.Load())
	}
}

// Seed flaw 2 (DESIGN.md's flaws 2 and 5): a long action keeps its record. Renewal really
// extends the lease, so a competing attempt sees in-progress for three
// whole leases, and then the replay.
func TestSeedFlaw2RenewalKeepsALongActionsRecord(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	e, f := newEnv(t, idemstore.ExecutorConfig{Lease: lease}), storetest.NewFixture()
	var runs, competitorRuns atomic.Int32
	competitor := func() error {
		_, err := e.exec.Execute(context.Background(), request(f), counted(&competitorRuns, "stolen", nil))
		return err
	}
	res, err := e.exec.Execute(t.Context(), request(f), func(ctx context.Context) ([]byte, error) {
		runs.Add(1)
		start := time.Now()
		poll := time.NewTicker(lease / 6)
		defer poll.Stop()
		checks := 0
		for time.Since(start) < 3*lease {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("cancelled after %v: %w", time.Since(start), context.Cause(ctx))
			case <-poll.C:
			}
			if err := competitor(); !errors.Is(err, onceflow.OutcomeInProgress) {
				return nil, fmt.Errorf("competitor after %v: %v, want in progress", time.Since(start), err)
			}
			checks++
		}
		return []byte(fmt.Sprint(checks)), nil
	})
	if err != nil || res.Outcome != onceflow.OutcomeRan {
		t.Fatalf("long action: %+v, %v", res, err)
	}
	if n := e.faulty.Calls(storetest.MethodRenew); n < 6 {
		t.Fatalf("%d renewals over 3 leases, want at least 6", n)
	}
	res, err = e.exec.Execute(t.Context(), request(f), counted(&competitorRuns, "stolen", nil))
	if err != nil || res.Outcome != onceflow.OutcomeReplayed || competitorRuns.Load() != 0 || runs.Load() != 1 {
		t.Fatalf("after: %+v, %v; competitor ran %d times", res, err, competitorRuns.Load())
	}
}

// Seed flaw 3: after an indeterminate claim+start, INSPECT showing
// EXECUTING for this owner and operation is not permission to run: only
// this invocation's nonce is.
func TestSeedFlaw3InspectShowingExecutingIsNotPermissionToRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})

	t.Run("another invocation's nonce", func(t *testing.T) {
		f := storetest.NewFixture()
		owner := onceflow.NewOwner()
		// Invocation B of this attempt started and is running.
		if _, err := e.store.ClaimStart(t.Context(), f.ClaimStart(owner, onceflow.NewNonce())); err != nil {
			t.Fatal(err)
		}
		// Invocation A's claim+start gets no reply; INSPECT shows EXECUTING.
		e.faulty.Inject(storetest.MethodClaimStart, storetest.ErrorBeforeApply)
		req := request(f)
		req.Owner = owner
		var runs atomic.Int32
		_, err := e.exec.Execute(t.Context(), req, counted(&runs, "dup", nil))
		var ip *onceflow.Error
		if !errors.As(err, &ip) || !ip.SameOwner || runs.Load() != 0 {
			t.Fatalf("err = %v, action ran %d times; want in progress and no run", err, runs.Load())
		}
	})
	t.Run("its own nonce", func(t *testing.T) {
		f := storetest.NewFixture()
		e.faulty.Inject(storetest.MethodClaimStart, storetest.LoseReplyAfterApply)
		var runs atomic.Int32
		res, err := e.exec.Execute(t.Context(), request(f), counted(&runs, "ok", nil))
		if err != nil || res.Outcome != onceflow.OutcomeRan || runs.Load() != 1 {
			t.Fatalf("%+v, %v, %d runs", res, err, runs.Load())
		}
	})
}

// Seed flaw 4: a takeover of an expired EXECUTING record never re-runs the
// action blindly.
func TestSeedFlaw4TakeoverOfExpiredExecutingNeverRerunsBlindly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	never := func(t *testing.T) idemstore.Action {
		return func(context.Context) ([]byte, error) { t.Error("the action ran"); return nil, nil }
	}

	t.Run("no hook: abandoned, effect unknown", func(t *testing.T) {
		f := storetest.NewFixture()
		e.expiredExecuting(t, f)
		_, err := e.exec.Execute(t.Context(), request(f), never(t))
		var eu *onceflow.Error
		if !errors.As(err, &eu) || !eu.Recorded {
			t.Fatalf("err = %v, want a recorded onceflow.Error", err)
		}
		e.wantState(t, f.Ref, onceflow.StateAbandoned)
	})
	t.Run("reconcile finds the effect", func(t *testing.T) {
		f := storetest.NewFixture()
		prev := e.expiredExecuting(t, f)
		req := request(f)
		req.Reconcile = func(ctx context.Context, r onceflow.Record) ([]byte, bool, error) {
			if x, _ := idemstore.ExecutionFrom(ctx); r.Attempt != prev.Attempt+1 || x.Key() != f.Ref.String() {
				t.Errorf("reconcile saw attempt %d key %q", r.Attempt, x.Key())
			}
			return []byte("ch_found"), true, nil
		}
		res, err := e.exec.Execute(t.Context(), req, never(t))
		if err != nil || res.Outcome != onceflow.OutcomeReconciled || string(res.Response) != "ch_found" || res.TookOver != onceflow.StateExecuting {
			t.Fatalf("%+v, %v", res, err)
		}
		res, err = e.exec.Execute(t.Context(), request(f), never(t))
		if err != nil || res.Outcome != onceflow.OutcomeReplayed || string(res.Response) != "ch_found" {
			t.Fatalf("replay after reconcile: %+v, %v", res, err)
		}
	})
	t.Run("reconcile finds nothing: runs", func(t *testing.T) {
		f := storetest.NewFixture()
		e.expiredExecuting(t, f)
		req := request(f)
		req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) { return nil, false, nil }
		var runs atomic.Int32
		res, err := e.exec.Execute(t.Context(), req, counted(&runs, "ok", nil))
		if err != nil || res.Outcome != onceflow.OutcomeRan || runs.Load() != 1 {
			t.Fatalf("%+v, %v", res, err)
		}
	})
	t.Run("reconcile fails: abandoned", func(t *testing.T) {
		f := storetest.NewFixture()
		e.expiredExecuting(t, f)
		req := request(f)
		req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) {
			return nil, false, errors.New("provider down")
		}
		if _, err := e.exec.Execute(t.Context(), req, never(t)); !errors.Is(err, onceflow.OutcomeEffectUnknown) {
			t.Fatalf("err = %v", err)
		}
		e.wantState(t, f.Ref, onceflow.StateAbandoned)
	})
	t.Run("idempotent downstream: runs", func(t *testing.T) {
		f := storetest.NewFixture()
		e.expiredExecuting(t, f)
		req := request(f)
		req.IdempotentDownstream = true
		var runs atomic.Int32
		if res, err := e.exec.Execute(t.Context(), req, counted(&runs, "ok", nil)); err != nil || runs.Load() != 1 || res.TookOver != onceflow.StateExecuting {
			t.Fatalf("%+v, %v", res, err)
		}
	})
}

// A Reconcile that outlasts the lease must not let two attempts run side
// by side: the lease is confirmed again before the action runs.
func TestSlowReconcileDoesNotRunAfterLosingTheLease(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{Lease: 300 * time.Millisecond}), storetest.NewFixture()
	e.expiredExecuting(t, f)
	req := request(f)
	req.Reconcile = func(ctx context.Context, _ onceflow.Record) ([]byte, bool, error) {
		// Slow: meanwhile our lease runs out and another attempt takes over.
		storetest.WaitLeaseExpired(t, e.store, f.Ref)
		if _, err := e.store.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())); err != nil {
			t.Error(err)
		}
		return nil, false, nil
	}
	var runs atomic.Int32
	_, err := e.exec.Execute(t.Context(), req, counted(&runs, "late", nil))
	if !errors.Is(err, onceflow.OutcomeInProgress) || runs.Load() != 0 {
		t.Fatalf("err = %v, %d runs; want in progress and no run", err, runs.Load())
	}
}

// Seed flaw 5 (DESIGN.md's flaw 6): an indeterminate ABANDONED or
// FAILED_RETRYABLE write is verified with INSPECT before Execute returns,
// and the error says whether it was recorded.
func TestSeedFlaw5IndeterminateFailureWritesAreVerified(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	cases := []struct {
		name     string
		actErr   error
		state    onceflow.State
		faults   []storetest.Fault
		recorded bool
	}{
		{"abandon, reply lost", errors.New("x"), onceflow.StateAbandoned, []storetest.Fault{storetest.LoseReplyAfterApply}, true},
		{"abandon, not applied", errors.New("x"), onceflow.StateAbandoned, []storetest.Fault{storetest.ErrorBeforeApply}, true},
		{"abandon, never applied", errors.New("x"), onceflow.StateExecuting, []storetest.Fault{storetest.ErrorBeforeApply, storetest.ErrorBeforeApply}, false},
		{"retryable, reply lost", idemstore.RetryableNoEffect(errors.New("x")), onceflow.StateFailedRetryable, []storetest.Fault{storetest.LoseReplyAfterApply}, true},
		{"retryable, never applied", idemstore.RetryableNoEffect(errors.New("x")), onceflow.StateExecuting, []storetest.Fault{storetest.ErrorBeforeApply, storetest.ErrorBeforeApply}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := storetest.NewFixture()
			req := request(f)
			req.Owner = onceflow.NewOwner()
			local, exec := e.isolated(t)
			local.Inject(storetest.MethodFail, c.faults...)
			var runs atomic.Int32
			_, err := exec.Execute(t.Context(), req, counted(&runs, "", c.actErr))
			if local.Calls(storetest.MethodInspect) == 0 {
				t.Fatal("the indeterminate write was not verified with INSPECT")
			}
			var recorded bool
			var eu *onceflow.Error
			var re *onceflow.Error
			switch {
			case errors.As(err, &eu):
				recorded = eu.Recorded
			case errors.As(err, &re):
				recorded = re.Recorded
			default:
				t.Fatalf("err = %v", err)
			}
			if recorded != c.recorded {
				t.Fatalf("recorded = %v, want %v (err %v)", recorded, c.recorded, err)
			}
			e.wantState(t, f.Ref, c.state)
		})
	}
}

// Seed flaw 6 (DESIGN.md's flaw 7): a replay whose stored codec or policy
// differs from the executor's is an error, not bytes the caller cannot
// decode.
func TestSeedFlaw6ReplayWithAnotherCodecIsAnError(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	var runs atomic.Int32
	if _, err := e.exec.Execute(t.Context(), request(f), counted(&runs, `{"v":1}`, nil)); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []idemstore.ExecutorConfig{{Store: e.store, Codec: "proto-v1"}, {Store: e.store, PolicyRevision: 3}} {
		other, err := idemstore.NewExecutor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.Execute(t.Context(), request(f), counted(&runs, "x", nil))
		var ce *onceflow.Error
		if !errors.Is(err, onceflow.OutcomeCodecMismatch) || !errors.As(err, &ce) {
			t.Fatalf("err = %v, want onceflow.OutcomeCodecMismatch", err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("ran %d times", runs.Load())
	}
}

// Seed flaw 7 (DESIGN.md's rule 3): lost ownership cancels the running
// action's context within one renewal (fencing): a zombie must not keep
// going.
func TestSeedFlaw7LostOwnershipCancelsTheAction(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	client := redistest.Client(t)
	ticks := make(chan time.Time)
	req := request(f)
	req.RenewTicks = ticks
	running := make(chan struct{})
	cause := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		_, err := e.exec.Execute(context.Background(), req, func(ctx context.Context) ([]byte, error) {
			close(running)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		done <- err
	}()
	<-running
	ticks <- time.Now() // a renewal, still ours
	// Another worker takes the record over (as after a long GC pause):
	// another owner in the record's o, the 32 raw bytes of its hex.
	other, _ := hex.DecodeString(string(onceflow.NewOwner()))
	if err := client.HSet(t.Context(), e.store.Key(f.Ref), "o", other).Err(); err != nil {
		t.Fatal(err)
	}
	// The first renewal that starts after the takeover proves the loss.
	// (The one in flight may already see it, then nothing reads ticks.)
	sent := 1
	var got error
	for got == nil {
		select {
		case ticks <- time.Now():
			sent++
		case got = <-cause:
		}
	}
	if !errors.Is(got, idemstore.ErrLeaseLost) {
		t.Fatalf("cause = %v, want ErrLeaseLost", got)
	}
	if sent > 2 {
		t.Fatalf("the loss took %d renewals to notice, want at most 2", sent)
	}
	err := <-done
	var eu *onceflow.Error
	if !errors.As(err, &eu) || eu.Recorded || !errors.Is(err, idemstore.ErrLeaseLost) {
		t.Fatalf("err = %v, want an unrecorded onceflow.Error caused by the lost lease", err)
	}
}

// A lease whose renewal cannot be confirmed cancels the action before it
// runs out, so the action stops before another owner may take over.
func TestUnconfirmedLeaseCancelsBeforeItRunsOut(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	e, f := newEnv(t, idemstore.ExecutorConfig{Lease: lease}), storetest.NewFixture()
	e.faulty.InjectAlways(storetest.MethodRenew, storetest.ErrorBeforeApply)
	var left time.Duration
	_, err := e.exec.Execute(t.Context(), request(f), func(ctx context.Context) ([]byte, error) {
		<-ctx.Done()
		left = e.inspect(t, f.Ref).Record.LeaseRemaining()
		return nil, context.Cause(ctx)
	})
	if !errors.Is(err, idemstore.ErrLeaseUnconfirmed) {
		t.Fatalf("err = %v, want ErrLeaseUnconfirmed", err)
	}
	if left <= 0 {
		t.Fatal("the action was cancelled only after its lease ran out")
	}
	if e.faulty.Calls(storetest.MethodRenew) < 2 {
		t.Fatalf("renewal was tried %d times", e.faulty.Calls(storetest.MethodRenew))
	}
}

func TestCancellingTheCallerCancelsTheAction(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	ctx, cancel := context.WithCancel(t.Context())
	_, err := e.exec.Execute(ctx, request(f), func(actx context.Context) ([]byte, error) {
		cancel()
		<-actx.Done()
		return nil, idemstore.RetryableNoEffect(actx.Err())
	})
	if !errors.Is(err, onceflow.OutcomeRetryable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	// The outcome is recorded even though the caller gave up.
	e.wantState(t, f.Ref, onceflow.StateFailedRetryable)
}

func TestActionContextCarriesKeyAndFence(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	var seen []idemstore.Execution
	action := func(ctx context.Context) ([]byte, error) {
		x, ok := idemstore.ExecutionFrom(ctx)
		if !ok {
			t.Error("no execution in the action's context")
		}
		seen = append(seen, x)
		return nil, idemstore.RetryableNoEffect(errors.New("again"))
	}
	for range 2 {
		_, _ = e.exec.Execute(t.Context(), request(f), action)
	}
	if len(seen) != 2 || seen[0].Key() != seen[1].Key() || seen[0].Key() == "" || !seen[0].Fence.Less(seen[1].Fence) {
		t.Fatalf("executions %+v: the key must be stable and the fence must grow", seen)
	}
}

func TestExecutorConfigValidation(t *testing.T) {
	t.Parallel()
	store := storetest.NewFaultyStore(nil)
	bounded := storetest.NewFaultyStore(timeBounded{timeout: 200 * time.Millisecond})
	cases := map[string]idemstore.ExecutorConfig{
		"no store":                           {},
		"lease under 3 renewals":             {Store: store, Lease: time.Second, RenewInterval: 400 * time.Millisecond},
		"lease over replay TTL":              {Store: store, Lease: 2 * time.Hour, ReplayTTL: time.Hour},
		"retention under lease":              {Store: store, Lease: time.Minute, FailureRetention: time.Second},
		"bad codec":                          {Store: store, Codec: "JSON V2"},
		"margin over a third of the lease":   {Store: store, Lease: time.Second, SafetyMargin: 400 * time.Millisecond},
		"margin not above the store timeout": {Store: bounded, Lease: 10 * time.Second, SafetyMargin: 300 * time.Millisecond},
		"lease too short for the store":      {Store: bounded, Lease: time.Second},
		"one renewal before the deadline":    {Store: store, Lease: 3 * time.Second, SafetyMargin: time.Second, RenewInterval: time.Second},
	}
	for name, cfg := range cases {
		if _, err := idemstore.NewExecutor(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Config()
	if c.Lease != 30*time.Second || c.ReplayTTL != 24*time.Hour || c.FailureRetention != 24*time.Hour ||
		c.Codec != "json-v2" || c.PolicyRevision != 2 || c.SafetyMargin != 3*time.Second || c.RenewInterval != 9*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
	// The store's command timeout raises the default margin.
	exec, err = idemstore.NewExecutor(idemstore.ExecutorConfig{Store: bounded, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if c := exec.Config(); c.SafetyMargin != 400*time.Millisecond {
		t.Fatalf("margin = %v, want twice the store's 200ms", c.SafetyMargin)
	}
}

// timeBounded is a store that only reports a command timeout.
type timeBounded struct {
	driver.Store
	timeout time.Duration
}

func (s timeBounded) CommandTimeout() time.Duration { return s.timeout }
