package handshake

import (
	"context"
	"encoding/json"
	"time"

	"github.com/onceflow/onceflow"
)

// Activity describes an activity registered through onceflow, for the
// workflow side: the workflow package's Interceptor schedules it with
// HeartbeatTimeout when the workflow set none, and checks a decided
// result with Decodes before accepting the decision.
type Activity struct {
	// Name is the activity type name, as the SDK names the function.
	Name string
	// Code is its operation code.
	Code onceflow.OperationCode
	// HeartbeatTimeout is the heartbeat timeout it is scheduled with when
	// the workflow's ActivityOptions leave it zero.
	HeartbeatTimeout time.Duration
	// ResultType is the Go type of its result, for the operator; "" when
	// it returns only an error (NoResult).
	ResultType string
	// NoResult: the activity returns only an error; a completed decision
	// needs no result.
	NoResult bool
	// Reconcile: the activity declares a Reconcile, which the workflow's
	// recovery and the operator's tools ask for evidence.
	Reconcile bool
	// Decodes reports whether a result, as JSON, decodes into the result
	// type.
	Decodes func(json []byte) error
}

// Catalog finds the wrapped activities by name: the activity package's
// Wrapper is one.
type Catalog interface {
	// WrappedActivity returns the wrapped activity registered under name.
	WrappedActivity(name string) (Activity, bool)
}

// NonRetryableTypesHeader is the Temporal header in which the workflow
// package's Interceptor passes an activity the NonRetryableErrorTypes of
// the RetryPolicy it is scheduled with (a JSON list of strings), for the
// activity package to recognize a business error Temporal will not retry
// where the activity's info does not carry the policy (the SDK testsuite).
const NonRetryableTypesHeader = "onceflow-non-retryable-types"

// nonRetryableTypesKey is the context key of WithNonRetryableTypes.
type nonRetryableTypesKey struct{}

// WithNonRetryableTypes returns ctx carrying the NonRetryableErrorTypes
// of the running activity's retry policy, as NonRetryableTypesHeader
// brought them: the workflow package's Interceptor sets them on the
// activity's context, where the activity package reads them.
func WithNonRetryableTypes(ctx context.Context, types []string) context.Context {
	return context.WithValue(ctx, nonRetryableTypesKey{}, types)
}

// NonRetryableTypes returns what WithNonRetryableTypes put on ctx.
func NonRetryableTypes(ctx context.Context) []string {
	t, _ := ctx.Value(nonRetryableTypesKey{}).([]string)
	return t
}

// ResolveRecordActivity is the registered name of the activity package's
// Wrapper.ResolveRecord, which settles an ABANDONED record as a decision
// says: the workflow package's recovery runs it.
const ResolveRecordActivity = "onceflow.ResolveRecord"

// RetryDetails are the details of the retryable errors a wrapped activity
// returns (onceflow.InProgress, onceflow.RetryableNoEffect, onceflow.StoreUnavailable,
// onceflow.Canceled, onceflow.Internal): what the attempt knew of an effect of the
// attempts so far. Should it be the last attempt its retry policy allows,
// the workflow side settles the call (SettleActivity) with them as
// evidence.
type RetryDetails struct {
	// Checkpoint is the attempt's own checkpoint once it reached the
	// action, else the one the previous attempt heartbeated; nil when
	// none did.
	Checkpoint *onceflow.Checkpoint `json:"checkpoint,omitempty"`
	// EffectUnknown says why an earlier attempt may have reached the
	// action where no checkpoint says so; "" when nothing does.
	EffectUnknown string `json:"effectUnknown,omitempty"`
}

// SettleActivity is the registered name of the activity package's
// Wrapper.Settle, which the workflow package runs when a wrapped
// activity's call ended in a failure its retry policy gave up on (its
// attempts were used up, or its ScheduleToCloseTimeout passed) and an
// attempt may have had the effect: it settles the call's record the way
// one more attempt would, without running the action.
const SettleActivity = "onceflow.Settle"

// SettleInput is what SettleActivity settles: a call of a wrapped
// activity, in the workflow run that runs SettleActivity.
type SettleInput struct {
	// Activity is the wrapped activity's registered name.
	Activity string `json:"activity"`
	// ActivityID is the call's activity ID: its operation.
	ActivityID string `json:"activityId"`
	// Args are the call's arguments, each as JSON.
	Args []json.RawMessage `json:"args"`
	// Checkpoint is the last checkpoint the call's attempts left (the
	// heartbeat details of a timeout, or RetryDetails.Checkpoint).
	Checkpoint *onceflow.Checkpoint `json:"checkpoint,omitempty"`
	// EffectUnknown says why an attempt of this call, or of an earlier
	// call of the same step retried after its effect was unknown, may
	// have had the effect where no checkpoint says so.
	EffectUnknown string `json:"effectUnknown,omitempty"`
	// TimedOut: the call's last attempt timed out (it may have died
	// before its checkpoint reached Temporal, where the worker does not
	// confirm checkpoints).
	TimedOut bool `json:"timedOut,omitempty"`
}

// SettleResult is what SettleActivity found, when no effect is unknown
// (an unknown effect is its onceflow.EffectUnknown error, with
// onceflow.EffectUnknownDetails, for the workflow to recover).
type SettleResult struct {
	// Completed: an attempt completed the operation (its reply to
	// Temporal was lost); Result is its result, as JSON.
	Completed bool            `json:"completed"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// ReconcileActivity is the registered name of the activity package's
// Wrapper.Reconcile: it asks a wrapped activity's own Reconcile about an
// incident, for the operator's evidence (the workflow package's
// EvidenceUpdate runs it).
const ReconcileActivity = "onceflow.Reconcile"

// ReconcileInput is an incident of a wrapped activity to ask its
// Reconcile about.
type ReconcileInput struct {
	// Activity is the wrapped activity's registered name.
	Activity string `json:"activity"`
	// Args are the call's arguments, each as JSON.
	Args []json.RawMessage `json:"args"`
	// Details are the incident's.
	Details onceflow.EffectUnknownDetails `json:"details"`
}

// ReconcileAnswer is what a wrapped activity's Reconcile said.
type ReconcileAnswer struct {
	// Found: the effect happened; Result is the activity's result, as
	// JSON ("null" for an activity that returns only an error).
	Found  bool            `json:"found"`
	Result json.RawMessage `json:"result,omitempty"`
}

// ResolveRecordInput settles an ABANDONED record.
type ResolveRecordInput struct {
	// Details identify the record and the attempt and rev the decision
	// was taken on.
	Details onceflow.EffectUnknownDetails `json:"details"`
	// Target is "COMPLETED" (Response is replayed from now on),
	// "FAILED_RETRYABLE" (the next claim takes over) or "FAILED" (later
	// attempts fail with onceflow.OperationFailed and Reason).
	Target   string `json:"target"`
	Response []byte `json:"response,omitempty"`
	Reason   string `json:"reason,omitempty"`
}
