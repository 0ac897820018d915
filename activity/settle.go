package activity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/internal/handshake"
)

// maxSettleBackoff bounds the wait between two of Settle's tries while
// the store cannot be reached.
const maxSettleBackoff = 30 * time.Second

// Settle is onceflow's own activity, registered as "onceflow.Settle": it
// settles a call of an activity Register registered, after the call's retry
// policy gave up on it (its attempts used up, its ScheduleToCloseTimeout
// passed) with a failure that does not say whether an attempt had the
// effect: a dead worker's timeout, onceflow's in-progress or
// store-unavailable error, the activity's own retryable error. The
// workflow package runs it, on the activity's task queue, and Register
// registers it.
//
// It does what one more attempt would, without running the action: it
// waits out a live lease, replays a completed result (SettleResult), takes
// over an attempt that died (asking the activity's Reconcile first) and
// abandons the record when an effect may have happened: then it fails
// with onceflow.EffectUnknown and its details, for the workflow to recover.
// When nothing may have happened it records that and answers an empty
// SettleResult: the call's own failure stands. in's checkpoint and
// reasons are the call's evidence that an attempt reached the action. A
// store that cannot be reached is tried again, with a backoff up to 30 s,
// until Settle's StartToCloseTimeout nears; then the effect is unknown and
// the call waits for a decision.
func (w *Wrapper) Settle(ctx context.Context, in handshake.SettleInput) (handshake.SettleResult, error) {
	v, ok := w.bindings.Load(in.Activity)
	if !ok {
		return handshake.SettleResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"onceflow: no activity named %s was registered through onceflow (activity.Register) on this worker, so its call cannot be settled",
			in.Activity), onceflow.OutcomeInvalid.TemporalType(), nil)
	}
	bd := v.(*bound)
	args, err := bd.decodeArgs(in.Args)
	if err != nil {
		return handshake.SettleResult{}, temporal.NewNonRetryableApplicationError("onceflow: settle "+in.Activity+": "+err.Error(), onceflow.OutcomeInvalid.TemporalType(), err)
	}
	st := &settling{activityID: in.ActivityID, evidence: w.settleEvidence(ctx, in)}
	backoff := time.Second
	for {
		r := run(ctx, w, bd.b, args, st)
		var re *onceflow.Error
		switch {
		case r.err == nil:
			out, err := bd.result(r)
			if err != nil {
				return handshake.SettleResult{}, err
			}
			raw := noResultJSON
			if bd.sh.out != nil {
				if raw, err = json.Marshal(out.Interface()); err != nil {
					return handshake.SettleResult{}, temporal.NewNonRetryableApplicationError(
						"onceflow: the completed result does not encode as JSON: "+err.Error(), onceflow.OutcomeCodecMismatch.TemporalType(), err)
				}
			}
			return handshake.SettleResult{Completed: true, Result: raw}, nil
		case errors.Is(r.exec, errSettleNoAction), errors.As(r.exec, &re) && re.Outcome == onceflow.OutcomeRetryable && re.Recorded:
			return handshake.SettleResult{}, nil // nothing may have happened: the call's failure stands
		}
		switch outcomeOf(r.exec) {
		case onceflow.OutcomeStoreUnavailable, onceflow.OutcomeIndeterminate, onceflow.OutcomeError, onceflow.OutcomeInProgress, onceflow.OutcomeRetryable, onceflow.OutcomeNotStored, onceflow.OutcomeCanceled:
		default:
			return handshake.SettleResult{}, r.err // an unknown effect, for the workflow to recover; a conflict; a failed operation
		}
		deadline, ok := ctx.Deadline()
		if ctx.Err() != nil || !ok || time.Until(deadline) < 2*backoff+5*time.Second {
			return handshake.SettleResult{}, unsettled(r, in, bd.b, fmt.Sprintf(
				"the call's retries ended and its record could not be settled before onceflow.Settle's timeout (%v)", r.exec))
		}
		w.logger.WarnContext(ctx, "onceflow: settling a call whose retries ended; trying again", "activity", in.Activity, "err", r.exec, "backoff", backoff)
		sdkactivity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxSettleBackoff)
	}
}

// settleEvidence is the evidence that an attempt of the settled call
// reached the action: its checkpoint, a reason the workflow knows, or,
// where this worker's checkpoints are not confirmed, a timeout.
func (w *Wrapper) settleEvidence(ctx context.Context, in handshake.SettleInput) *idemstore.ReachedAction {
	switch cp := in.Checkpoint; {
	case cp != nil && cp.Phase == onceflow.PhaseExecuting:
		return &idemstore.ReachedAction{Fence: cp.Fence(), Reason: fmt.Sprintf(
			"activity attempt %d reached the action at fence %s, and the call's retries ended before it settled (its heartbeat checkpoint)",
			cp.TemporalAttempt, cp.Fence())}
	case in.EffectUnknown != "":
		return &idemstore.ReachedAction{Reason: in.EffectUnknown}
	case in.TimedOut && !newHeart(ctx, w, sdkactivity.GetInfo(ctx)).confirms:
		return &idemstore.ReachedAction{Reason: "the call's last attempt timed out, and this worker's checkpoints are not confirmed by Temporal, so it may have reached the action"}
	}
	return nil
}

// unsettled is the unknown effect of a call Settle could not settle: the
// record's identity, not confirmed (Recorded false).
func unsettled(r ran, in handshake.SettleInput, b *binding, reason string) error {
	d := onceflow.EffectUnknownDetails{
		RecordKey: r.ref.String(), OperationCode: string(r.ref.Code), ScopeDigest: r.ref.Digest.Hex, DigestVersion: r.ref.Digest.Version,
		Operation: r.rawOp, Reason: reason, Checkpoint: in.Checkpoint, IdempotentDownstream: b.idempotent, DownstreamRetention: b.retention,
	}
	return temporal.NewNonRetryableApplicationError("onceflow: effect unknown: "+reason, onceflow.OutcomeEffectUnknown.TemporalType(), r.exec, d)
}

// Reconcile is onceflow's own activity, registered as
// "onceflow.Reconcile": it asks a wrapped activity's own Reconcile (the Reconcile option) about an
// incident, for the operator: the workflow package's EvidenceUpdate runs
// it on the activity's task queue when an operator asks the downstream
// now (the console's button, `worker pending -ask`). It changes nothing:
// the record is read, not written, and the Reconcile is given the
// context a Reconcile gets inside an attempt (OperationKey,
// KeyForDownstream, Fence of the record as it is). Register registers it.
func (w *Wrapper) Reconcile(ctx context.Context, in handshake.ReconcileInput) (handshake.ReconcileAnswer, error) {
	v, ok := w.bindings.Load(in.Activity)
	if !ok {
		return handshake.ReconcileAnswer{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"onceflow: no activity named %s was registered through onceflow (activity.Register) on this worker", in.Activity), onceflow.OutcomeInvalid.TemporalType(), nil)
	}
	bd := v.(*bound)
	if bd.b.reconcile == nil {
		return handshake.ReconcileAnswer{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"onceflow: activity %s declares no Reconcile: nothing can ask its downstream, and the decision is the operator's alone", in.Activity),
			onceflow.OutcomeInvalid.TemporalType(), nil)
	}
	args, err := bd.decodeArgs(in.Args)
	if err != nil {
		return handshake.ReconcileAnswer{}, temporal.NewNonRetryableApplicationError("onceflow: reconcile "+in.Activity+": "+err.Error(), onceflow.OutcomeInvalid.TemporalType(), err)
	}
	d := in.Details
	ref := onceflow.Ref{Code: onceflow.OperationCode(d.OperationCode), Digest: onceflow.Digest{Version: d.DigestVersion, Hex: d.ScopeDigest}}
	var rec onceflow.Record
	if obs, err := w.exec.Inspect(ctx, ref); err != nil {
		return handshake.ReconcileAnswer{}, toTemporal(err, ref, d.Operation, d.Checkpoint, handshake.RetryDetails{}, downstream{})
	} else if obs.Found {
		rec = obs.Record
	}
	ctx = idemstore.WithExecution(ctx, idemstore.Execution{Ref: ref, Operation: rec.Operation, Owner: rec.Owner, Fence: rec.Fence(),
		EffectUnknown: "an operator asks the downstream about incident " + d.RecordKey})
	if bd.b.downstream != nil {
		if key := bd.b.downstream(args); key != "" {
			ctx = context.WithValue(ctx, downstreamKeyKey{}, key)
		}
	}
	out, found, err := bd.b.reconcile(ctx, args, rec)
	if err != nil {
		return handshake.ReconcileAnswer{}, fmt.Errorf("onceflow: %s's Reconcile: %w", in.Activity, err)
	}
	if !found {
		return handshake.ReconcileAnswer{}, nil
	}
	raw := noResultJSON
	if bd.sh.out != nil {
		if raw, err = json.Marshal(out); err != nil {
			return handshake.ReconcileAnswer{}, temporal.NewNonRetryableApplicationError(
				"onceflow: the reconciled result does not encode as JSON: "+err.Error(), onceflow.OutcomeCodecMismatch.TemporalType(), err)
		}
	}
	return handshake.ReconcileAnswer{Found: true, Result: raw}, nil
}
