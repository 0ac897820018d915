package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/handshake"
)

// settleChange is the workflow.GetVersion change ID of settling a call
// whose retries ended: a history recorded before it replays as it ran
// (the call's failure returned as it was).
const settleChange = "onceflow.settle"

// SettleTimeout bounds onceflow's own activity "onceflow.Settle", which
// settles a call of a wrapped activity after its retry policy gave up:
// it waits out a dead attempt's lease (the executor's Lease, 30 s by
// default) and retries a store that cannot be reached. A store unreachable for that long leaves
// the effect unknown, and the call waits for a decision.
const SettleTimeout = 10 * time.Minute

// onceflowRetryable are the retryable error types of a wrapped activity:
// the call's last attempt ended with one when its retry policy gave up on
// onceflow's own wait or on the store, not on the activity.
var onceflowRetryable = []string{
	onceflow.OutcomeInProgress.TemporalType(), onceflow.OutcomeRetryable.TemporalType(), onceflow.OutcomeStoreUnavailable.TemporalType(), onceflow.OutcomeCanceled.TemporalType(), onceflow.OutcomeError.TemporalType(),
}

// ended is how a call's last attempt ended, when its retry policy gave up
// on a failure that does not say whether an attempt had the effect.
type ended struct {
	activityID string
	checkpoint *onceflow.Checkpoint
	reason     string
	timedOut   bool
}

// retriesEnded reports whether err, the failure a call of a wrapped
// activity ended with, came from a retry policy that gave up (its
// attempts used up, its ScheduleToCloseTimeout passed) rather than from a
// decision: a timeout (a dead or hung worker), one of onceflow's
// retryable errors, or the activity's own retryable error. Such a failure
// does not say that no attempt had the effect, so the call is settled
// before it is returned. A non-retryable error, the workflow's own
// cancellation and an unknown effect (recovered) are not.
func retriesEnded(err error, policy *temporal.RetryPolicy) (ended, bool) {
	var act *temporal.ActivityError
	if !errors.As(err, &act) {
		return ended{}, false
	}
	e := ended{activityID: act.ActivityID()}
	var (
		te *temporal.TimeoutError
		ae *temporal.ApplicationError
		pe *temporal.PanicError
		ce *temporal.CanceledError
	)
	if errors.As(err, &ce) {
		return ended{}, false
	}
	if errors.As(err, &te) {
		e.timedOut = true
		if te.HasLastHeartbeatDetails() {
			var cp onceflow.Checkpoint
			if te.LastHeartbeatDetails(&cp) == nil && cp.Phase != "" {
				e.checkpoint = &cp
			}
		}
	}
	if errors.As(err, &ae) {
		switch {
		case ae.Type() == onceflow.OutcomeEffectUnknown.TemporalType():
			return ended{}, false
		case slices.Contains(onceflowRetryable, ae.Type()):
			var d handshake.RetryDetails
			if ae.HasDetails() && ae.Details(&d) == nil {
				if e.checkpoint == nil {
					e.checkpoint = d.Checkpoint
				}
				e.reason = d.EffectUnknown
			}
			return e, true
		case e.timedOut:
		case ae.NonRetryable(), act.RetryState() == enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE,
			policy != nil && slices.Contains(policy.NonRetryableErrorTypes, ae.Type()):
			return ended{}, false // the activity's own answer, which Temporal does not retry
		}
		return e, true
	}
	return e, e.timedOut || errors.As(err, &pe)
}

// settles reports whether this run settles calls whose retries ended
// (every run that reaches one since settleChange).
func (r *Recovery) settles(ctx workflow.Context) bool {
	if r.settleVersion == nil {
		v := workflow.GetVersion(ctx, settleChange, workflow.DefaultVersion, 1)
		r.settleVersion = &v
	}
	return *r.settleVersion >= 1
}

// settle runs handshake.SettleActivity for the call c, whose last attempt
// ended as e, with unsettled the reason an earlier attempt's effect is
// still unknown. It returns the call's completed result, or the unknown
// effect to recover, or neither when nothing may have happened (the
// call's failure stands). An error: the settle could not run.
func settle(ctx workflow.Context, c call, e ended, unsettled string) (result json.RawMessage, unknown *onceflow.EffectUnknownDetails, err error) {
	in := handshake.SettleInput{Activity: c.activity, ActivityID: e.activityID, Checkpoint: e.checkpoint, EffectUnknown: e.reason, TimedOut: e.timedOut}
	if unsettled != "" {
		in.EffectUnknown = unsettled
	}
	for _, a := range c.args {
		raw, err := json.Marshal(a)
		if err != nil {
			return nil, nil, fmt.Errorf("onceflow: encode the arguments of %s to settle it: %w", c.activity, err)
		}
		in.Args = append(in.Args, raw)
	}
	opts := workflow.GetActivityOptions(ctx)
	opts.ActivityID = ""
	opts.ScheduleToCloseTimeout, opts.ScheduleToStartTimeout = 2*SettleTimeout, 0
	opts.StartToCloseTimeout, opts.HeartbeatTimeout = SettleTimeout, 30*time.Second
	opts.RetryPolicy = &temporal.RetryPolicy{
		InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
		NonRetryableErrorTypes: []string{onceflow.OutcomeEffectUnknown.TemporalType(), onceflow.OutcomeInvalid.TemporalType()},
	}
	workflow.GetLogger(ctx).Info("onceflow: the call's retries ended; settling it", "activity", c.activity, "activity_id", e.activityID)
	var res handshake.SettleResult
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), handshake.SettleActivity, in).Get(ctx, &res)
	if d, ok := MayHaveActed(err); ok {
		return nil, &d, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if res.Completed {
		return res.Result, nil, nil
	}
	return nil, nil, nil
}

// failedByDecision is the error a call that failed with failure ends
// with after a Fail decision about the incident d: the failure as Temporal
// delivered it (the same *temporal.ActivityError), with the activity's
// own error as its cause where there is one (the error the action
// returned when its effect became unknown, with its type, message and
// details; or the activity's own error its retry policy gave up on), so
// the workflow's own error handling (a refund, a compensation) runs as it
// would have without onceflow. At the end of that chain is a
// TypeRecoveryFailed ApplicationError with the incident's details, by
// which EffectUnknown tells that the step may have acted.
func failedByDecision(failure error, d onceflow.EffectUnknownDetails, res Resolution) error {
	fc := temporal.GetDefaultFailureConverter()
	msg := fmt.Sprintf("onceflow: the operation %s, whose effect was unknown, was failed by decision", d.RecordKey)
	if res.Reason != "" {
		msg += ": " + res.Reason
	}
	marker := fc.ErrorToFailure(temporal.NewNonRetryableApplicationError(msg, TypeRecoveryFailed, nil, d))
	var act *temporal.ActivityError
	if !errors.As(failure, &act) {
		return fc.FailureToError(marker)
	}
	f, ok := proto.Clone(fc.ErrorToFailure(act)).(*failurepb.Failure)
	if !ok {
		return fc.FailureToError(marker)
	}
	own := f.GetCause()
	var ae *temporal.ApplicationError
	var te *temporal.TimeoutError
	switch {
	case errors.As(failure, &ae) && ae.Type() == onceflow.OutcomeEffectUnknown.TemporalType() && d.ActionFailed:
		own = own.GetCause() // the error the action returned
	case ae != nil && ae.Type() == onceflow.OutcomeEffectUnknown.TemporalType():
		own = nil // a dead worker's, a lost lease, a completion not recorded: none of the activity's
	case errors.As(failure, &te), ae == nil, strings.HasPrefix(ae.Type(), "onceflow."):
		own = nil // onceflow's, or a dead worker's: none of the activity's
	}
	if own == nil {
		f.Cause = marker
		return fc.FailureToError(f)
	}
	last := own
	for last.GetCause() != nil {
		last = last.GetCause()
	}
	last.Cause = marker
	f.Cause = own
	return fc.FailureToError(f)
}

// asker is the EvidenceUpdate's question about incident d of call c: its
// activity's own Reconcile, run on the activity's task queue.
func asker(callCtx workflow.Context, c call, d onceflow.EffectUnknownDetails) func(ctx workflow.Context) (Evidence, error) {
	opts := workflow.GetActivityOptions(callCtx)
	opts.ActivityID, opts.HeartbeatTimeout, opts.ScheduleToStartTimeout = "", 0, 0
	opts.StartToCloseTimeout, opts.ScheduleToCloseTimeout = time.Minute, 2*time.Minute
	opts.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{onceflow.OutcomeInvalid.TemporalType()}}
	return func(ctx workflow.Context) (Evidence, error) {
		in := handshake.ReconcileInput{Activity: c.activity, Details: d}
		for _, a := range c.args {
			raw, err := json.Marshal(a)
			if err != nil {
				return Evidence{}, fmt.Errorf("onceflow: encode the arguments of %s to ask its Reconcile: %w", c.activity, err)
			}
			in.Args = append(in.Args, raw)
		}
		var ans handshake.ReconcileAnswer
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), handshake.ReconcileActivity, in).Get(ctx, &ans); err != nil {
			return Evidence{}, err
		}
		if !ans.Found {
			return Evidence{Summary: c.activity + "'s Reconcile found no effect (proof of none only where the downstream's lookup is authoritative)"}, nil
		}
		return Evidence{Summary: c.activity + "'s Reconcile found the effect", Implies: Completed, Result: ans.Result}, nil
	}
}

// ActionError is the error an action returned when its effect became
// unknown: what the downstream said, for the operator.
type ActionError struct {
	// Type is its type as Temporal reports it (an ApplicationError's
	// type, or the Go type's name; "" for errors.New's).
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
}

// actionErrorOf is err's action error for the operator; nil when none.
func actionErrorOf(err error, d onceflow.EffectUnknownDetails) *ActionError {
	var ae *temporal.ApplicationError
	if !d.ActionFailed || !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeEffectUnknown.TemporalType() {
		return nil
	}
	var cause *temporal.ApplicationError
	if !errors.As(errors.Unwrap(ae), &cause) {
		return nil
	}
	return &ActionError{Type: cause.Type(), Message: cause.Message()}
}
