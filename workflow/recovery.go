package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	onceactivity "github.com/onceflow/onceflow/activity"
)

// Names on the wire. They are stable: operators' tools depend on them.
const (
	// ResolveSignal carries a Resolution to a workflow waiting in Execute.
	ResolveSignal = "onceflow.resolve"
	// PendingQuery answers the []PendingRecovery a workflow waits on.
	PendingQuery = "onceflow.pendingRecoveries"
	// TypeRecoveryFailed is the error type Execute returns when the
	// operator decided the operation failed. Non-retryable.
	TypeRecoveryFailed = "onceflow.RecoveryFailed"
)

// Decision is what an operator (or a program) decided about an operation
// whose effect was unknown.
type Decision string

// The decisions.
const (
	// Completed: the effect happened; Resolution.Result is its result.
	Completed Decision = "completed"
	// Retry: the effect did not happen; run the activity again.
	Retry Decision = "retry"
	// Fail: give up; Execute returns a TypeRecoveryFailed error.
	Fail Decision = "fail"
)

// Resolution is the payload of ResolveSignal.
type Resolution struct {
	// RecordKey is EffectUnknownDetails.RecordKey of the operation.
	RecordKey string   `json:"recordKey"`
	Decision  Decision `json:"decision"`
	// Result is the activity's result as JSON, for Completed.
	Result json.RawMessage `json:"result,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// PendingRecovery is one operation a workflow waits on a decision for.
type PendingRecovery struct {
	RecordKey string                            `json:"recordKey"`
	Activity  string                            `json:"activity"`
	Details   onceactivity.EffectUnknownDetails `json:"details"`
	Since     time.Time                         `json:"since"`
}

// ReconcileResult is what a reconcile activity returns: whether the effect
// happened, and its result as JSON.
type ReconcileResult struct {
	Found  bool            `json:"found"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Recovery holds a workflow's pending recoveries and answers PendingQuery.
// Create one per workflow run, before the first Execute.
type Recovery struct {
	pending map[string]PendingRecovery
	signals workflow.ReceiveChannel
	early   map[string]Resolution // decisions that arrived before their wait
}

// NewRecovery registers PendingQuery and listens on ResolveSignal.
func NewRecovery(ctx workflow.Context) (*Recovery, error) {
	r := &Recovery{
		pending: map[string]PendingRecovery{},
		signals: workflow.GetSignalChannel(ctx, ResolveSignal),
		early:   map[string]Resolution{},
	}
	err := workflow.SetQueryHandler(ctx, PendingQuery, func() ([]PendingRecovery, error) {
		out := make([]PendingRecovery, 0, len(r.pending))
		for _, p := range r.pending {
			out = append(out, p)
		}
		return out, nil
	})
	if err != nil {
		return nil, fmt.Errorf("onceflow: register the %s query: %w", PendingQuery, err)
	}
	return r, nil
}

// Options configure Execute.
type Options struct {
	// Activity are the options of the idempotent activity (it needs a
	// HeartbeatTimeout) and of the reconcile and resolve activities.
	Activity workflow.ActivityOptions
	// Reconcile optionally names an activity that takes the same arguments
	// and returns a ReconcileResult. It is asked once before waiting for a
	// decision.
	Reconcile string
}

// Execute runs an idempotent activity and, when it fails with
// TypeEffectUnknown, recovers from the workflow's own history: it asks
// opts.Reconcile if set, and otherwise lists the operation in PendingQuery
// and waits for a ResolveSignal. Completed returns the given result (and
// records it in Redis, so later replays get it); Retry makes the record
// FAILED_RETRYABLE and runs the activity again; Fail returns a
// TypeRecoveryFailed error. Every decision is a history event, so once
// taken it survives the loss of the Redis record.
//
// The result of Completed is decoded from JSON: use it with activities
// whose results are JSON (the default codec).
func Execute[T any](ctx workflow.Context, r *Recovery, opts Options, activity string, args ...any) (T, error) {
	var zero T
	ctx = workflow.WithActivityOptions(ctx, opts.Activity)
	reconciled := false
	for {
		var out T
		err := workflow.ExecuteActivity(ctx, activity, args...).Get(ctx, &out)
		if err == nil {
			return out, nil
		}
		d, ok := EffectUnknown(err)
		if !ok {
			return zero, err
		}
		logger := workflow.GetLogger(ctx)
		if opts.Reconcile != "" && !reconciled {
			reconciled = true
			var rr ReconcileResult
			if rerr := workflow.ExecuteActivity(ctx, opts.Reconcile, args...).Get(ctx, &rr); rerr != nil {
				logger.Warn("onceflow: reconcile activity failed; waiting for a decision", "record", d.RecordKey, "error", rerr)
			} else if rr.Found {
				return complete[T](ctx, d, rr.Result, "reconciled by "+opts.Reconcile)
			}
		}
		res := r.wait(ctx, d, activity)
		logger.Info("onceflow: recovery decided", "record", d.RecordKey, "decision", res.Decision, "reason", res.Reason)
		switch res.Decision {
		case Completed:
			return complete[T](ctx, d, res.Result, res.Reason)
		case Retry:
			if err := resolveRecord(ctx, d, onceactivity.ResolveRecordInput{Details: d, Target: "FAILED_RETRYABLE", Reason: res.Reason}); err != nil {
				return zero, err
			}
			continue
		default:
			return zero, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("onceflow: the operation %s was failed by decision: %s", d.RecordKey, res.Reason), TypeRecoveryFailed, err)
		}
	}
}

func complete[T any](ctx workflow.Context, d onceactivity.EffectUnknownDetails, result json.RawMessage, reason string) (T, error) {
	var out T
	if err := json.Unmarshal(result, &out); err != nil {
		return out, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("onceflow: the completed result for %s does not decode into %T: %v", d.RecordKey, out, err), TypeRecoveryFailed, err)
	}
	in := onceactivity.ResolveRecordInput{Details: d, Target: "COMPLETED", Response: result, Reason: reason}
	if err := resolveRecord(ctx, d, in); err != nil {
		return out, err
	}
	return out, nil
}

// resolveRecord settles the Redis record. When the store could not confirm
// the abandonment (Details.Recorded false) there is nothing safe to CAS
// against; the decision still stands in history.
func resolveRecord(ctx workflow.Context, d onceactivity.EffectUnknownDetails, in onceactivity.ResolveRecordInput) error {
	if !d.Recorded {
		workflow.GetLogger(ctx).Warn("onceflow: the record was never confirmed ABANDONED; leaving Redis as it is", "record", d.RecordKey)
		return nil
	}
	return workflow.ExecuteActivity(ctx, onceactivity.ResolveRecordActivity, in).Get(ctx, nil)
}

// wait lists the operation as pending and blocks until a Resolution for it
// arrives. Resolutions for other operations are kept for their own wait.
func (r *Recovery) wait(ctx workflow.Context, d onceactivity.EffectUnknownDetails, activity string) Resolution {
	if res, ok := r.early[d.RecordKey]; ok {
		delete(r.early, d.RecordKey)
		return res
	}
	r.pending[d.RecordKey] = PendingRecovery{RecordKey: d.RecordKey, Activity: activity, Details: d, Since: workflow.Now(ctx)}
	defer delete(r.pending, d.RecordKey)
	workflow.GetLogger(ctx).Warn("onceflow: effect unknown; waiting for a "+ResolveSignal+" signal", "record", d.RecordKey, "activity", activity)
	for {
		var res Resolution
		r.signals.Receive(ctx, &res)
		switch {
		case res.Decision != Completed && res.Decision != Retry && res.Decision != Fail:
			workflow.GetLogger(ctx).Warn("onceflow: ignoring a resolution with an unknown decision", "decision", res.Decision)
		case res.RecordKey == d.RecordKey:
			return res
		default:
			r.early[res.RecordKey] = res
		}
	}
}
