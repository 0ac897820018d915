package activity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/internal/handshake"
	"github.com/onceflow/onceflow/internal/scope"
)

// binding is one wrapped activity as the core runs it: its options, with
// the parts that depend on the activity's types given as functions of its
// arguments. args is the input as those functions take it: the arguments
// (a []reflect.Value) of the function Register wraps.
type binding struct {
	code       onceflow.OperationCode
	scope      scopeKind
	idempotent bool
	noEffect   func(error) bool
	codec      Codec
	inProgress InProgressPolicy
	retention  time.Duration
	refuseRef  bool
	// input is the JSON the input is fingerprinted by.
	input func(args any) ([]byte, error)
	// key and downstream are nil unless the activity declares them.
	key        func(args any) string
	downstream func(args any) string
	// reconcile is nil unless the activity declares one; out is the
	// activity's result, to encode with codec.
	reconcile func(ctx context.Context, args any, rec onceflow.Record) (out any, found bool, err error)
	// call runs the activity function; out is nil when noResult.
	call func(ctx context.Context, args any) (out any, err error)
	// noResult: the function returns only an error. Its stored result is
	// noResultJSON.
	noResult bool
}

// noResultJSON is the stored result of an activity that returns only an
// error, and the result a decision completes it with.
var noResultJSON = []byte("null")

// settling is what run needs to settle a call whose retries ended
// (Wrapper.Settle) instead of running its action.
type settling struct {
	// activityID is the settled call's: its operation, not Settle's own.
	activityID string
	// evidence is what the call's attempts left of an effect.
	evidence *idemstore.ReachedAction
}

// errSettleNoAction is the error of Settle's action, which never runs the
// activity: it records that nothing ran.
var errSettleNoAction = errors.New("onceflow: settled after the call's retries ended; the action did not run")

// ran is one run of the core: the executor's result and error, and the
// error to hand Temporal.
type ran struct {
	res idemstore.Result
	// exec is the executor's error, before it was mapped for Temporal.
	exec error
	// err is what the activity returns to Temporal: the activity's own
	// error unchanged when it recorded no effect, else exec as an
	// ApplicationError of a stable type.
	err error
	// ref and rawOp name the record and the operation, once known.
	ref   onceflow.Ref
	rawOp string
}

// run runs one attempt of the activity b binds (or, with st, settles a
// call of it) through the executor.
func run(ctx context.Context, w *Wrapper, b *binding, args any, st *settling) ran {
	w.enter()
	defer w.leave()
	a := &attempt{w: w, b: b, args: args, st: st, info: sdkactivity.GetInfo(ctx)}
	if err := runnable(a.info); err != nil {
		return ran{err: err}
	}
	ctx, err := a.prepare(ctx)
	if err != nil {
		return ran{err: err}
	}
	return a.execute(ctx)
}

// attempt is one run of the core: the activity, its Temporal attempt and
// the executor's request for it.
type attempt struct {
	w    *Wrapper
	b    *binding
	args any
	st   *settling
	info sdkactivity.Info
	// rawOp is the operation's raw identity; req the executor's request.
	rawOp string
	req   idemstore.Request
	// h is the attempt's heartbeat and checkpoint; log its logger.
	h   *heart
	log *slog.Logger
	// downstreamKey is the activity's DownstreamKey ("" without one);
	// nonRetryable its retry policy's NonRetryableErrorTypes.
	downstreamKey string
	nonRetryable  []string
	// reran: the action ran although an earlier attempt's effect is
	// unknown (IdempotentDownstream, or a Reconcile that found nothing);
	// actionFailed: the action returned an error that may follow its
	// effect. The action sets them; execute reads them after it returned.
	reran, actionFailed bool
}

// prepare builds the attempt's identity and request from the activity's
// info and input, or returns the ApplicationError that refuses them.
func (a *attempt) prepare(ctx context.Context) (context.Context, error) {
	w, b, info := a.w, a.b, &a.info
	input, err := b.input(a.args)
	if err != nil {
		return ctx, temporal.NewNonRetryableApplicationError("onceflow: encode the activity input: "+err.Error(), onceflow.OutcomeInvalid.TemporalType(), err)
	}
	if a.st != nil {
		info.ActivityID = a.st.activityID
	}
	digest, err := scopeDigest(w.digester, b, *info, a.args)
	if err != nil {
		return ctx, err
	}
	a.rawOp = info.Namespace + "/" + info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
	if Standalone(*info) {
		// No workflow: the activity ID, which the caller chose, is the
		// operation's identity.
		a.rawOp = info.Namespace + "/activity/" + info.ActivityID
	}
	opID := w.digester.Operation(a.rawOp)
	a.log = w.logger.With("activity", info.ActivityType.Name, "workflow_id", info.WorkflowExecution.ID, "attempt", info.Attempt)
	a.h = newHeart(ctx, w, *info)
	if p := a.h.prev; p != nil {
		a.log.InfoContext(ctx, "onceflow: previous attempt's checkpoint", "checkpoint_attempt", p.Attempt, "checkpoint_rev", p.Rev, "phase", p.Phase)
	}
	a.nonRetryable = nonRetryableTypes(ctx, info.RetryPolicy)
	if b.downstream != nil {
		if a.downstreamKey = b.downstream(a.args); a.downstreamKey == "" {
			return ctx, temporal.NewNonRetryableApplicationError("onceflow: DownstreamKey returned an empty key", onceflow.OutcomeInvalid.TemporalType(), nil)
		}
		ctx = context.WithValue(ctx, downstreamKeyKey{}, a.downstreamKey)
	}
	a.req = idemstore.Request{
		Codec:                b.codec.ID(),
		Ref:                  onceflow.Ref{Code: b.code, Digest: digest},
		Operation:            opID,
		Fingerprint:          onceflow.FingerprintOf(input),
		Owner:                w.digester.Owner(opID, int(info.Attempt)),
		Reconcile:            reconcileOf(b, a.args),
		IdempotentDownstream: b.idempotent,
		ReachedAction:        evidence(*info, a.h.prev, a.h.confirms),
		DownstreamRetention:  b.retention,
	}
	if a.st != nil {
		// Never a Temporal attempt's owner; an earlier effect is for a
		// decision, not for running again; the evidence is the call's.
		a.req.Owner = w.digester.Owner(opID, 0)
		a.req.IdempotentDownstream = false
		a.req.ReachedAction = a.st.evidence
	}
	return ctx, nil
}

// action is the executor's action: the checkpoint, then the activity
// function, its result encoded (Settle's never runs the function).
func (a *attempt) action(actx context.Context) ([]byte, error) {
	if a.st != nil {
		return nil, idemstore.RetryableNoEffect(&passthrough{err: errSettleNoAction})
	}
	if x, ok := idemstore.ExecutionFrom(actx); ok {
		a.reran = x.EffectUnknown != ""
		// Evidence first, then the effect: Temporal holds the checkpoint
		// before the action can start, so an attempt that finds the
		// record lost knows this one may have acted.
		c := onceflow.Checkpoint{Owner: string(x.Owner), Attempt: x.Fence.Attempt, Rev: x.Fence.Rev, Epoch: x.Fence.Epoch,
			Phase: onceflow.PhaseExecuting, TemporalAttempt: a.info.Attempt}
		// Under the action's context: the lease bounds the wait.
		if err := a.h.checkpoint(actx, c); err != nil {
			return nil, idemstore.RetryableNoEffect(fmt.Errorf("record the checkpoint in Temporal before the action (nothing ran): %w", err))
		}
	}
	out, err := a.b.call(actx, a.args)
	if err != nil {
		if own, ok := noEffect(err, a.b, a.nonRetryable); ok {
			return nil, idemstore.RetryableNoEffect(&passthrough{err: own})
		}
		a.actionFailed = true
		return nil, err
	}
	if a.b.noResult {
		return noResultJSON, nil
	}
	enc, err := a.b.codec.Marshal(out)
	if err != nil {
		// The effect happened but its result cannot be stored.
		return nil, idemstore.EffectUnknown(fmt.Errorf("encode the activity result: %w", err))
	}
	return enc, nil
}

// execute runs the request through the executor, heartbeating, and maps
// its outcome.
func (a *attempt) execute(ctx context.Context) ran {
	w, b := a.w, a.b
	if a.downstreamKey != "" && a.st == nil {
		if err := checkReference(ctx, w, b, a.info.Namespace, a.downstreamKey, a.req.Ref); err != nil {
			return ran{err: err}
		}
	}
	// Heartbeats drive renewal: each tick records a heartbeat (which also
	// delivers cancellation) and then renews the lease.
	interval := min(w.exec.Config().RenewInterval, a.info.HeartbeatTimeout/2)
	ticks := make(chan time.Time)
	a.req.RenewTicks = ticks
	stopHeartbeats := a.h.beat(interval, ticks)
	var (
		res idemstore.Result
		err error
	)
	if a.st != nil || b.inProgress != InProgressRetry {
		// Another attempt holds the operation (a dead attempt's lease, a
		// zombie, another workflow): wait for it here, beating the heart,
		// instead of using up one of the retry policy's attempts.
		res, _, err = w.exec.ExecuteWaiting(ctx, a.req, a.action, idemstore.Waiting{
			MinDelay: 50 * time.Millisecond, MaxDelay: interval,
			OnWait: func(ip *onceflow.Error) {
				a.log.InfoContext(ctx, "onceflow: in progress elsewhere; waiting", "retry_after", ip.RetryAfter)
			},
		})
	} else {
		res, err = w.exec.Execute(ctx, a.req, a.action)
	}
	stopHeartbeats()
	var re *onceflow.Error
	if errors.As(err, &re) && re.Outcome == onceflow.OutcomeRetryable && re.Recorded && !a.reran {
		// A re-run's no effect does not settle the earlier attempt's
		// unknown one: its checkpoint stays, for the next attempt and the
		// workflow's settle to doubt.
		a.h.settled(ctx, a.log)
	}
	r := ran{res: res, exec: err, ref: a.req.Ref, rawOp: a.rawOp}
	var own *passthrough
	switch {
	case errors.As(err, &own):
		r.err = own.err // the activity's own error, as Temporal knew it before onceflow
	case err != nil:
		r.err = toTemporal(err, a.req.Ref, a.rawOp, a.h.prev, a.h.latest(a.req.ReachedAction),
			downstream{idempotent: b.idempotent, key: a.downstreamKey, retention: b.retention, actionFailed: a.actionFailed})
	case res.Outcome != onceflow.OutcomeRan:
		a.log.InfoContext(ctx, "onceflow: activity result "+string(res.Outcome), "fence", res.Fence.String())
	}
	return r
}

// runnable refuses what onceflow cannot run: a local activity, and an
// activity without a heartbeat timeout.
func runnable(info sdkactivity.Info) error {
	switch {
	case info.IsLocalActivity:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"onceflow: activity %s was started as a local activity; onceflow wraps only activities scheduled with "+
				"workflow.ExecuteActivity: a local activity has no heartbeat to renew its lease and carry its checkpoint, "+
				"and no retry state Temporal keeps outside the worker", info.ActivityType.Name),
			onceflow.OutcomeMisconfigured.TemporalType(), nil)
	case info.HeartbeatTimeout <= 0 && Standalone(info):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"onceflow: standalone activity %s was started without a HeartbeatTimeout; set StartActivityOptions.HeartbeatTimeout "+
				"(for example 10s) so Temporal detects a dead worker and onceflow can renew its lease", info.ActivityType.Name),
			onceflow.OutcomeMisconfigured.TemporalType(), nil)
	case info.HeartbeatTimeout <= 0:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"onceflow: activity %s was scheduled without a HeartbeatTimeout; install onceflow's interceptor on the workflow's worker "+
				"(sdkworker.Options{Interceptors: ...}, see worker.Attach), which sets one, or set ActivityOptions.HeartbeatTimeout "+
				"(for example 10s) so Temporal detects a dead worker and onceflow can renew its lease", info.ActivityType.Name),
			onceflow.OutcomeMisconfigured.TemporalType(), nil)
	}
	return nil
}

// Standalone reports whether the activity runs on its own, started by a
// client (a Temporal Standalone Activity, client.ExecuteActivity) rather
// than scheduled by a workflow. Its operation is then named by its
// activity ID, and an unknown effect waits in its record (ABANDONED) for
// an operator, since no workflow holds a Recovery: see
// docs/guards.md#standalone-activities.
func Standalone(info sdkactivity.Info) bool {
	return info.WorkflowExecution.ID == "" && !info.IsLocalActivity && info.ActivityID != ""
}

// checkReference flags, or with RefuseReusedReference refuses, a business
// reference (the DownstreamKey) that arrived under another operation key
// first (idemstore.Executor.CheckReference). The reference is digested
// with the worker's secret: Redis never holds it.
func checkReference(ctx context.Context, w *Wrapper, b *binding, namespace, reference string, ref onceflow.Ref) error {
	window := b.retention
	if window <= 0 {
		window = defaultReferenceWindow
	}
	c := idemstore.ReferenceCheck{
		Reference: onceflow.Ref{Code: b.code, Digest: w.digester.Digest("reference", namespace, reference)},
		Key:       ref.String(), Window: window, Refuse: b.refuseRef,
	}
	_, err := w.exec.CheckReference(ctx, c)
	var reused *onceflow.Error
	switch {
	case errors.As(err, &reused) && reused.Outcome == onceflow.OutcomeReferenceReused:
		return temporal.NewNonRetryableApplicationError("onceflow: "+err.Error(), onceflow.OutcomeReferenceReused.TemporalType(), err,
			onceflow.ReferenceReusedDetails{OperationCode: string(b.code), Reference: reference, Holder: reused.Holder, Key: reused.Key})
	case err != nil:
		return toTemporal(err, ref, "", nil, handshake.RetryDetails{}, downstream{})
	}
	return nil
}

// scopeDigest is the digest of the activity's record (its scope: the
// run, WorkflowScope's workflow, BusinessKey's key), or an
// ApplicationError when the scope cannot be made.
func scopeDigest(dig *onceflow.Digester, b *binding, info sdkactivity.Info, args any) (onceflow.Digest, error) {
	if b.scope != businessScoped && Standalone(info) {
		return dig.Digest(scope.Standalone(info.Namespace, info.ActivityID)...), nil
	}
	switch b.scope {
	case runScoped:
		return dig.Digest(scope.Run(info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID)...), nil
	case workflowScoped:
		return dig.Digest(scope.Workflow(info.Namespace, info.WorkflowExecution.ID, info.ActivityID)...), nil
	case businessScoped:
		if b.key == nil {
			return onceflow.Digest{}, temporal.NewNonRetryableApplicationError("onceflow: business-keyed activity without BusinessKey's function", onceflow.OutcomeInvalid.TemporalType(), nil)
		}
		key := b.key(args)
		if key == "" {
			return onceflow.Digest{}, temporal.NewNonRetryableApplicationError("onceflow: BusinessKey returned an empty business key", onceflow.OutcomeInvalid.TemporalType(), nil)
		}
		return dig.Digest(scope.Business(info.Namespace, key)...), nil
	}
	return onceflow.Digest{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("onceflow: unknown scope %d", b.scope), onceflow.OutcomeInvalid.TemporalType(), nil)
}

// reconcileOf is b's Reconcile as the executor calls it, its result
// encoded with b's codec; nil without one.
func reconcileOf(b *binding, args any) idemstore.ReconcileFunc {
	if b.reconcile == nil {
		return nil
	}
	return func(ctx context.Context, rec onceflow.Record) ([]byte, bool, error) {
		out, found, err := b.reconcile(ctx, args, rec)
		if err != nil || !found {
			return nil, found, err
		}
		if b.noResult {
			return noResultJSON, true, nil
		}
		enc, err := b.codec.Marshal(out)
		return enc, err == nil, err
	}
}
