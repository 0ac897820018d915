package idemstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// Executor runs actions at most once per operation whenever the store can
// know, and makes the uncertainty visible when it cannot. It is safe for
// concurrent use.
type Executor struct {
	cfg ExecutorConfig
	// tracer is cfg.TracerProvider's; nil when none was given.
	tracer trace.Tracer
	// metrics is cfg.MeterProvider's instruments; nil when none was given.
	metrics *telemetry
	// store is cfg.Store as the state machine calls it: observed, so
	// that every call is a traced and measured phase.
	store driver.Store
	// background counts what an Execute that returned left running: a
	// renewal whose Store ignored its cancellation (lease.stop).
	background sync.WaitGroup
	// ids draws the owners and nonces of Execute (identity.go).
	ids identities
}

// Drain waits until nothing an Execute started is still running, or until
// ctx is done (then it returns ctx's error). Execute itself waits for the
// renewal it cancels when its action returns, but no longer than half the
// safety margin: a Store whose Renew ignores its context would otherwise
// hold the outcome back. Call Drain when shutting down, after the last
// Execute returned, so that such a renewal does not outlive its owner.
func (e *Executor) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		e.background.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("idemstore: Drain: renewals still running: %w", context.Cause(ctx))
	}
}

// NewExecutor validates cfg and returns an Executor.
func NewExecutor(cfg ExecutorConfig) (*Executor, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	e := &Executor{cfg: cfg}
	e.store = observed{Store: cfg.Store, e: e}
	if cfg.TracerProvider != nil {
		e.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	m, err := newTelemetry(cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("idemstore: ExecutorConfig.MeterProvider: %w", err)
	}
	e.metrics = m
	return e, nil
}

// Config returns the executor's configuration with defaults filled in.
func (e *Executor) Config() ExecutorConfig { return e.cfg }

// Execute claims the operation, runs action if and only if this invocation
// confirmed the start, and records the outcome:
//
//   - a completed operation is replayed (onceflow.OutcomeReplayed);
//   - an operation running elsewhere fails with OutcomeInProgress;
//   - a fingerprint, owner/operation or codec conflict with
//     OutcomeFingerprintMismatch, OutcomeOwnerConflict or
//     OutcomeCodecMismatch;
//   - a takeover of an expired EXECUTING record, and any claim that
//     req.ReachedAction leaves the effect unknown of (a record created or
//     safely taken over although an earlier attempt may have reached the
//     action), consults req.Reconcile, runs only if
//     req.IdempotentDownstream, and otherwise abandons the record and
//     fails with OutcomeEffectUnknown without running;
//   - the action's success is completed (onceflow.OutcomeRan); a
//     RetryableNoEffect error fails with OutcomeRetryable; any other error
//     or a panic with OutcomeEffectUnknown;
//   - a store that cannot be reached fails with OutcomeIndeterminate or
//     OutcomeStoreUnavailable.
//
// Every failure is an *onceflow.Error: match it with errors.Is on its
// onceflow.Outcome, read its details with errors.As.
//
// Every write whose reply is lost, or does not decode, is verified with
// Inspect; a success that could not be recorded is never reported as one.
func (e *Executor) Execute(ctx context.Context, req Request, action Action) (res Result, err error) {
	if err := req.Validate(); err != nil {
		return Result{}, err
	}
	var nonce onceflow.Nonce
	if req.Owner == "" {
		req.Owner, nonce = e.ids.ownerAndNonce()
	} else {
		nonce = e.ids.nonce()
	}
	ctx, tel := e.startExecute(ctx, req.Ref)
	defer func() {
		err = failure(err)
		tel.end(res, err)
	}()
	inv := invocation{e: e, req: req, nonce: nonce}
	return inv.execute(ctx, action)
}

// log writes one line about this invocation, naming its record.
func (v *invocation) log(ctx context.Context, level slog.Level, msg string, args ...any) {
	v.e.log(ctx, v.req.Ref, v.req.Operation, level, msg, args...)
}

// log writes one line about a record when the logger takes the level: the
// attributes are built only then.
func (e *Executor) log(ctx context.Context, ref onceflow.Ref, op onceflow.OperationID, level slog.Level, msg string, args ...any) {
	l := e.cfg.Logger
	if !l.Enabled(ctx, level) {
		return
	}
	l.With("ref", ref.String(), "op", string(op)).Log(ctx, level, msg, args...)
}

// invocation is one Execute call.
type invocation struct {
	e     *Executor
	req   Request
	nonce onceflow.Nonce
	// sent is when the request that last confirmed the lease was sent:
	// the lease a reply reports is measured from no later than that.
	sent time.Time
	// leaseEnd is the local time by which the lease confirmed at sent runs
	// out, at the earliest.
	leaseEnd time.Time
	// epoch is the record's Fence.Epoch, once it started.
	epoch int64
	// since is when an attempt may first have reached the action, once
	// it started (see reachedSince).
	since time.Time
	// rec is the record as the start confirmed it, once it started: the
	// renewals send it (driver.RenewRequest.Started).
	rec onceflow.Record
}

// fence is own's fencing token with the record's epoch.
func (v *invocation) fence(own driver.Ownership) onceflow.Fence {
	f := own.Fence()
	f.Epoch = v.epoch
	return f
}

func (v *invocation) store() driver.Store { return v.e.store }

func (v *invocation) claimRequest() driver.ClaimRequest {
	c := v.e.cfg
	codec := c.Codec
	if v.req.Codec != "" {
		codec = v.req.Codec
	}
	return driver.ClaimRequest{
		Ref: v.req.Ref, Operation: v.req.Operation, Fingerprint: v.req.Fingerprint, Owner: v.req.Owner,
		Codec: codec, Policy: c.PolicyRevision, Lease: c.Lease, Retention: c.FailureRetention, Nonce: v.nonce,
	}
}

func (v *invocation) fused() bool { return v.req.BeforeStart == nil }

func (v *invocation) claim(ctx context.Context) (driver.ClaimOutcome, error) {
	v.sent = time.Now()
	if v.fused() {
		return v.store().ClaimStart(ctx, v.claimRequest())
	}
	return v.store().Claim(ctx, v.claimRequest())
}

func (v *invocation) execute(ctx context.Context, action Action) (Result, error) {
	out, err := v.claim(ctx)
	if errors.Is(err, onceflow.OutcomeIndeterminate) {
		out, err = v.reclaim(ctx, err)
	}
	if err != nil {
		return Result{}, err
	}
	return v.onClaim(ctx, out, action)
}

// reclaim learns what an indeterminate claim did. INSPECT showing the
// record as ours is not permission to run: onClaim still requires this
// invocation's nonce. Only when the record shows the claim cannot have
// applied is the claim sent again.
func (v *invocation) reclaim(ctx context.Context, claimErr error) (driver.ClaimOutcome, error) {
	obs, err := v.e.Inspect(ctx, v.req.Ref)
	if err != nil {
		return nil, errors.Join(claimErr, err)
	}
	if obs.Found {
		r := obs.Record
		mine := r.Owner == v.req.Owner && r.Operation == v.req.Operation
		if mine && (r.State == onceflow.StateClaimed || r.State == onceflow.StateExecuting || r.State == onceflow.StateFailedRetryable) {
			return driver.ReplayedAcquire{Ownership: ownership(v.req.Ref, r), Record: r}, nil
		}
		if live := r.State == onceflow.StateClaimed || r.State == onceflow.StateExecuting; live && r.LeaseRemaining() > 0 {
			if r.Owner == v.req.Owner {
				return driver.OwnerOperationConflict{Record: r}, nil
			}
			return driver.InProgress{Record: r}, nil
		}
	}
	// driver.Missing, a record the claim would have taken over had it run, or one
	// that moved on (COMPLETED, ABANDONED): sending the claim again is safe
	// and gives the script's own answer.
	return v.claim(ctx)
}

func ownership(ref onceflow.Ref, r onceflow.Record) driver.Ownership {
	return driver.Ownership{Ref: ref, Operation: r.Operation, Owner: r.Owner, Attempt: r.Attempt, Rev: r.Rev}
}

func (v *invocation) onClaim(ctx context.Context, out driver.ClaimOutcome, action Action) (Result, error) {
	ref := v.req.Ref
	switch o := out.(type) {
	case driver.Acquired:
		return v.acquired(ctx, o.Ownership, o.Record, "", action)
	case driver.TakenOver:
		v.log(ctx, slog.LevelInfo, "onceflow: took over", "from", o.From, "attempt", o.Record.Attempt, "effect_unknown", o.EffectUnknown)
		return v.acquired(ctx, o.Ownership, o.Record, o.From, action)
	case driver.ReplayedAcquire:
		r := o.Record
		switch r.State {
		case onceflow.StateExecuting:
			if r.Nonce == v.nonce { // our own start whose reply was lost
				return v.started(ctx, o.Ownership, r, "", action)
			}
			// The same attempt is running in another invocation: evidence
			// of work in flight, not permission to run (seed flaw 1).
			return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeInProgress, Ref: ref, RetryAfter: r.LeaseRemaining(), SameOwner: true}
		case onceflow.StateClaimed:
			return v.acquired(ctx, o.Ownership, r, "", action)
		case onceflow.StateFailedRetryable:
			return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeRetryable, Ref: ref, Recorded: true, Err: fmt.Errorf("this attempt already failed with no effect: %s", r.Reason)}
		}
		return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Op: "claim", Ref: ref, Reason: fmt.Sprintf("replayed acquire in state %s", r.State)}
	case driver.CompletedReplay:
		v.log(ctx, slog.LevelDebug, "onceflow: replayed")
		return Result{Outcome: onceflow.OutcomeReplayed, Response: o.Record.Response, Fence: o.Record.Fence()}, nil
	case driver.InProgress:
		return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeInProgress, Ref: ref, RetryAfter: o.Record.LeaseRemaining()}
	case driver.FingerprintMismatch:
		return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeFingerprintMismatch, Ref: ref, Reason: "the key was used for another request; use a new key for a new request"}
	case driver.OwnerOperationConflict:
		return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeOwnerConflict, Ref: ref, Reason: fmt.Sprintf("the owner holds it for operation %q", o.Record.Operation)}
	case driver.CodecMismatch:
		return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeCodecMismatch, Ref: ref, Reason: fmt.Sprintf(
			"stored with codec %q policy %d, this caller uses %q policy %d; deploy a reader for it or wait for the record to expire",
			o.Record.Codec, o.Record.Policy, v.claimRequest().Codec, v.e.cfg.PolicyRevision)}
	case driver.OperationFailed:
		return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeFailed, Ref: ref, Reason: o.Record.Reason}
	case driver.AwaitingDecision:
		r := o.Record
		return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeAwaitingDecision, Ref: ref, Operation: r.Operation, Attempt: r.Attempt, Rev: r.Rev, State: r.State,
			Recorded: true, Reason: "the record is ABANDONED: " + r.Reason, Since: v.reachedSince(r)}
	}
	return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Op: "claim", Ref: ref, Reason: fmt.Sprintf("claim outcome %T", out)}
}

// acquired holds a claim (CLAIMED, or EXECUTING after the fused path) and
// brings it to a confirmed start.
func (v *invocation) acquired(ctx context.Context, own driver.Ownership, r onceflow.Record, from onceflow.State, action Action) (Result, error) {
	if r.State == onceflow.StateExecuting && r.Nonce == v.nonce {
		return v.started(ctx, own, r, from, action)
	}
	if v.req.BeforeStart != nil {
		if err := v.req.BeforeStart(ctx, own); err != nil {
			if _, rerr := v.store().Release(context.WithoutCancel(ctx), driver.ReleaseRequest{Ownership: own}); rerr != nil {
				v.log(ctx, slog.LevelWarn, "onceflow: release after a failed BeforeStart", "err", rerr)
			}
			return Result{}, fmt.Errorf("idemstore: before start (the claim was released, nothing ran): %w", err)
		}
	}
	own, r, err := v.start(ctx, own)
	if err != nil {
		return Result{}, err
	}
	return v.started(ctx, own, r, from, action)
}

// start confirms EXECUTING for this invocation's nonce.
func (v *invocation) start(ctx context.Context, own driver.Ownership) (driver.Ownership, onceflow.Record, error) {
	c := v.e.cfg
	req := driver.StartRequest{Ownership: own, Nonce: v.nonce, Lease: c.Lease, Retention: c.FailureRetention}
	for try := 0; ; try++ {
		v.sent = time.Now()
		out, err := v.store().Start(ctx, req)
		if err != nil {
			if !errors.Is(err, onceflow.OutcomeIndeterminate) || try > 0 {
				return driver.Ownership{}, onceflow.Record{}, err
			}
			obs, ierr := v.e.Inspect(ctx, v.req.Ref)
			if ierr != nil {
				return driver.Ownership{}, onceflow.Record{}, errors.Join(err, ierr)
			}
			r := obs.Record
			mine := obs.Found && r.Owner == own.Owner && r.Operation == own.Operation
			switch {
			case mine && r.State == onceflow.StateExecuting && r.Nonce == v.nonce:
				return ownership(own.Ref, r), r, nil
			case mine && r.State == onceflow.StateClaimed:
				continue // the start did not apply: send it again
			case obs.Found:
				return driver.Ownership{}, onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeInProgress, Ref: own.Ref, RetryAfter: r.LeaseRemaining(), SameOwner: r.Owner == own.Owner}
			}
			return driver.Ownership{}, onceflow.Record{}, fmt.Errorf("idemstore: %s vanished before it started; retry: %w", own.Ref, err)
		}
		switch o := out.(type) {
		case driver.Transitioned:
			return o.Ownership, o.Record, nil
		case driver.AlreadyTransitioned:
			if o.Record.Nonce == v.nonce {
				return ownership(own.Ref, o.Record), o.Record, nil
			}
			return driver.Ownership{}, onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeInProgress, Ref: own.Ref, RetryAfter: o.Record.LeaseRemaining(), SameOwner: true}
		case driver.Refused:
			return driver.Ownership{}, onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeInProgress, Ref: own.Ref, RetryAfter: o.Record.LeaseRemaining(), SameOwner: o.Record.Owner == own.Owner}
		case driver.Missing:
			return driver.Ownership{}, onceflow.Record{}, fmt.Errorf("idemstore: %s vanished before it started; retry", own.Ref)
		}
		return driver.Ownership{}, onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Op: "start", Ref: own.Ref, Reason: fmt.Sprintf("start outcome %T", out)}
	}
}

// effectUnknown says why the action may not simply run on record r, taken over
// from state from ("" for a claim that created it): the record itself says
// an earlier attempt's effect is unsettled, or the request brings evidence
// of one that r does not settle. "" when nothing may have run.
func (v *invocation) effectUnknown(r onceflow.Record, from onceflow.State) string {
	switch {
	case r.EffectUnknown:
		return "taken over from an expired EXECUTING record"
	case v.req.ReachedAction == nil || v.req.ReachedAction.settledBy(r, from):
		return ""
	case from == "":
		return "the store had no record of the operation, but " + v.req.ReachedAction.Reason
	}
	return "taken over from " + string(from) + ", but " + v.req.ReachedAction.Reason
}

// started runs with EXECUTING confirmed for this invocation: r is the
// record as the request sent at v.sent confirmed it. A record that may carry
// an earlier attempt's effect is settled first.
func (v *invocation) started(ctx context.Context, own driver.Ownership, r onceflow.Record, from onceflow.State, action Action) (Result, error) {
	v.leaseEnd = v.sent.Add(r.LeaseRemaining())
	v.epoch = r.Fence().Epoch
	v.since = v.reachedSince(r)
	v.rec = r
	unknown := v.effectUnknown(r, from)
	if err := v.runnable(ctx); err != nil {
		if unknown != "" {
			// An earlier attempt's effect is unsettled: leave the record
			// as it is, for the next takeover to settle.
			return Result{}, fmt.Errorf("idemstore: %s: %w", own.Ref, err)
		}
		// EXECUTING is ours and nothing happened, so the next attempt
		// may take over at once.
		return v.failRetryable(ctx, own, err)
	}
	x := Execution{Ref: own.Ref, Operation: own.Operation, Owner: own.Owner, Nonce: v.nonce, Fence: v.fence(own), EffectUnknown: unknown}
	xctx := context.WithValue(ctx, executionKey{}, x)
	if unknown != "" {
		if !r.EffectUnknown {
			v.log(ctx, slog.LevelInfo, "onceflow: settling an earlier attempt's unknown effect before the action", "effect_unknown", unknown, "attempt", r.Attempt)
		}
		switch {
		case v.req.Reconcile != nil:
			rctx, ph := v.e.phase(xctx, own.Ref.Code, "reconcile")
			resp, found, err := v.reconcile(rctx, r)
			if ph != nil {
				ph.end(err, attrFound.Bool(found), attrAttempt.Int64(r.Attempt))
			}
			if err != nil {
				return v.abandon(ctx, own, "reconcile failed ("+unknown+")", err)
			}
			if found {
				v.log(ctx, slog.LevelInfo, "onceflow: reconciled a previous attempt's effect", "attempt", r.Attempt)
				res, err := v.complete(ctx, own, resp)
				if err != nil {
					return Result{}, err
				}
				res.Outcome, res.TookOver = onceflow.OutcomeReconciled, from
				return res, nil
			}
			v.log(ctx, slog.LevelInfo, "onceflow: reconcile found no effect; running", "attempt", r.Attempt)
		case v.req.IdempotentDownstream:
			v.log(ctx, slog.LevelInfo, "onceflow: re-running although an earlier effect is unknown: downstream is idempotent", "attempt", r.Attempt)
		default:
			return v.abandon(ctx, own, unknown+": the earlier attempt's effect may have happened, and there is no Reconcile hook", nil)
		}
		if why := v.pastRetention(r); why != "" {
			return v.refuseRerun(ctx, own, unknown, why)
		}
		// Reconcile may have outlasted the lease: confirm it is still ours
		// before running, so two attempts never run side by side.
		if err := v.confirmLease(ctx, own); err != nil {
			return Result{}, err
		}
		if err := v.runnable(ctx); err != nil {
			return Result{}, fmt.Errorf("idemstore: %s: %w", own.Ref, err)
		}
	}
	resp, err := v.run(xctx, own, action)
	if err == nil {
		res, err := v.complete(ctx, own, resp)
		if err != nil {
			return Result{}, err
		}
		res.TookOver = from
		return res, nil
	}
	var noEffect *noEffectError
	if errors.As(err, &noEffect) {
		res, err := v.failRetryable(ctx, own, noEffect.err)
		var re *onceflow.Error
		if noEffect.notStored && errors.As(err, &re) && re.Outcome == onceflow.OutcomeRetryable {
			re.Outcome = onceflow.OutcomeNotStored
		}
		return res, err
	}
	var marked *effectUnknownError
	if errors.As(err, &marked) {
		err = marked.err
	}
	return v.abandon(ctx, own, "the action failed and its effect may have happened", err)
}

// runnable says whether the action may still start: the caller has not
// given up, and the lease has more than the safety margin left.
func (v *invocation) runnable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cancelled before the action ran: %w", context.Cause(ctx))
	}
	if left := time.Until(v.leaseEnd) - v.e.cfg.SafetyMargin; left <= 0 {
		return fmt.Errorf("%w: the lease had %v left, less than the safety margin, before the action ran", ErrLeaseUnconfirmed, left+v.e.cfg.SafetyMargin)
	}
	return nil
}

// renewRequest is the RENEW of this invocation's lease.
func (v *invocation) renewRequest(own driver.Ownership) driver.RenewRequest {
	c := v.e.cfg
	return driver.RenewRequest{Ref: own.Ref, Operation: own.Operation, Owner: own.Owner, Nonce: v.nonce, Lease: c.Lease, Retention: c.FailureRetention, Started: v.rec}
}

// confirmLease renews the lease once, synchronously, before the action
// runs, and refuses to go on unless the store confirms it. While the lease
// lasts, the renewal must come back before it ends; once it has run out
// (a slow Reconcile), the store still renews it if nobody took the record
// over, and refuses if somebody did.
func (v *invocation) confirmLease(ctx context.Context, own driver.Ownership) error {
	sent := time.Now()
	if sent.Before(v.leaseEnd) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, v.leaseEnd)
		defer cancel()
	}
	out, err := v.store().Renew(ctx, v.renewRequest(own))
	if err != nil {
		return fmt.Errorf("idemstore: confirm the lease of %s before running: %w", own.Ref, err)
	}
	switch o := out.(type) {
	case driver.Renewed:
		v.sent, v.leaseEnd = sent, sent.Add(o.Record.LeaseRemaining())
		return nil
	case driver.Refused:
		return &onceflow.Error{Outcome: onceflow.OutcomeInProgress, Ref: own.Ref, RetryAfter: o.Record.LeaseRemaining(), SameOwner: o.Record.Owner == own.Owner}
	}
	return fmt.Errorf("idemstore: %s vanished before it ran; retry", own.Ref)
}

func (v *invocation) reconcile(ctx context.Context, r onceflow.Record) (resp []byte, found bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reconcile panicked: %v", p)
		}
	}()
	return v.req.Reconcile(ctx, r)
}

// run calls the action under a kept lease (see lease). The action's
// context is cancelled with ErrLeaseLost or ErrLeaseUnconfirmed when the
// lease cannot be kept.
func (v *invocation) run(ctx context.Context, own driver.Ownership, action Action) (resp []byte, err error) {
	ctx, ph := v.e.phase(ctx, own.Ref.Code, "action")
	if ph != nil {
		defer func() { ph.end(err, attrAttempt.Int64(own.Attempt), attrRev.Int64(own.Rev)) }()
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l := v.keepLease(actx, cancel, own)
	defer func() {
		l.stop()
		if p := recover(); p != nil {
			v.log(ctx, slog.LevelError, "onceflow: action panicked", "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, EffectUnknown(fmt.Errorf("action panicked: %v", p))
		}
		if cause := context.Cause(actx); isLeaseError(cause) {
			if err != nil {
				err = fmt.Errorf("%w (the action was cancelled: %w)", err, cause)
			} else {
				// The action ignored the cancellation and returned a
				// result after the lease was gone: completing it will
				// tell whether it can still be recorded.
				v.log(ctx, slog.LevelWarn, "onceflow: the action finished after its lease was lost", "cause", cause)
			}
		}
	}()
	return action(actx)
}

func isLeaseError(err error) bool {
	return errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrLeaseUnconfirmed)
}
