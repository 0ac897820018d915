package onceflow

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// Stable ApplicationError type strings. Workflows match on them
// (temporal.ApplicationError.Type()) and may list the non-retryable ones in
// RetryPolicy.NonRetryableErrorTypes. The activity package raises them.
const (
	// TypeInProgress: another attempt holds the lease. Retryable, with
	// NextRetryDelay set to the lease it has left.
	TypeInProgress = "onceflow.InProgress"
	// TypeFingerprintMismatch: the scope was used with another input.
	// Non-retryable.
	TypeFingerprintMismatch = "onceflow.FingerprintMismatch"
	// TypeOwnerOperationConflict: the owner holds the record for another
	// operation. Non-retryable.
	TypeOwnerOperationConflict = "onceflow.OwnerOperationConflict"
	// TypeCodecMismatch: the stored result was encoded with another codec
	// or policy revision. Non-retryable.
	TypeCodecMismatch = "onceflow.CodecMismatch"
	// TypeEffectUnknown: the effect's fate is unknown (or the record is
	// ABANDONED). Non-retryable; the details are an EffectUnknownDetails.
	TypeEffectUnknown = "onceflow.EffectUnknown"
	// TypeRetryableNoEffect: the activity failed with no effect. Retryable;
	// the next attempt takes over at once.
	TypeRetryableNoEffect = "onceflow.RetryableNoEffect"
	// TypeStoreUnavailable: Redis could not be reached. Retryable.
	TypeStoreUnavailable = "onceflow.StoreUnavailable"
	// TypeHeartbeatTimeoutRequired: the activity was scheduled without a
	// HeartbeatTimeout. Non-retryable: fix the ActivityOptions.
	TypeHeartbeatTimeoutRequired = "onceflow.HeartbeatTimeoutRequired"
	// TypeInvalidInput: the input could not be encoded or made an invalid
	// scope. Non-retryable.
	TypeInvalidInput = "onceflow.InvalidInput"
	// TypeCorruptRecord: the Redis record does not decode; an operator
	// must repair or delete it. Non-retryable.
	TypeCorruptRecord = "onceflow.CorruptRecord"
	// TypeOperationFailed: a decision failed the operation for good (the
	// record is FAILED, for instance after an operator's fail). Not
	// retryable; the message carries the decision's reason.
	TypeOperationFailed = "onceflow.OperationFailed"
	// TypeResolveRefused: the record moved on since the decision was
	// taken (another resolver, or a new attempt). Non-retryable.
	TypeResolveRefused = "onceflow.ResolveRefused"
	// TypeCanceled: the attempt's context ended before the store answered
	// (the activity was cancelled or timed out). Retryable; nothing was
	// decided.
	TypeCanceled = "onceflow.Canceled"
	// TypeInternal: the executor returned an error it does not classify,
	// a bug in onceflow or in a Store: report it. Retryable, since the
	// record, not this answer, decides what the next attempt does.
	TypeInternal = "onceflow.Internal"
	// TypeReferenceReused: the activity's declared business reference
	// (its DownstreamKey) arrived under a second operation key within its
	// window, and the activity refuses that (the activity package's
	// RefuseReusedReference): a key derived from a volatile field, or a
	// new key per retry. Non-retryable: the same input derives the same
	// key again. See docs/guards.md#the-business-reference.
	TypeReferenceReused = "onceflow.ReferenceReused"
	// TypeLocalActivity: a wrapped activity was started as a local
	// activity (workflow.ExecuteLocalActivity), which has no heartbeat to
	// renew its lease and carry its checkpoint. Non-retryable: schedule it
	// with workflow.ExecuteActivity.
	TypeLocalActivity = "onceflow.LocalActivity"
)

// Outcome is the class of an executor's result: the one classification
// the adapters map through their tables (the activity wrapper to an
// ApplicationError type, the HTTP middleware to a status and problem,
// telemetry to the "onceflow.outcome" attribute, whose values these
// are). idemstore.OutcomeOf computes it.
type Outcome string

// The outcomes.
const (
	// OutcomeRan: the action ran and its result was recorded.
	OutcomeRan Outcome = "ran"
	// OutcomeReplayed: a recorded result was returned; nothing ran.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeReconciled: a takeover found the earlier attempt's effect.
	OutcomeReconciled Outcome = "reconciled"
	// OutcomeInProgress: another attempt holds the lease.
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeFingerprintMismatch: the scope was used with another input.
	OutcomeFingerprintMismatch Outcome = "fingerprint_mismatch"
	// OutcomeOwnerConflict: the owner holds the record for another
	// operation.
	OutcomeOwnerConflict Outcome = "owner_conflict"
	// OutcomeCodecMismatch: the stored result was encoded with another
	// codec or policy revision.
	OutcomeCodecMismatch Outcome = "codec_mismatch"
	// OutcomeRetryable: the action failed with no effect.
	OutcomeRetryable Outcome = "retryable"
	// OutcomeNotStored: the action answered, with a response its caller
	// chose not to keep (idemhttp: a 202 Accepted, or another 2xx or 3xx
	// status its Config.Store does not store), so the record is released
	// like a retryable one and the next request runs the action again. It
	// is no failure, but no result either: nothing is replayed.
	OutcomeNotStored Outcome = "not_stored"
	// OutcomeEffectUnknown: the effect's fate is unknown.
	OutcomeEffectUnknown Outcome = "effect_unknown"
	// OutcomeAwaitingDecision: the record is ABANDONED; a decision must
	// resolve it.
	OutcomeAwaitingDecision Outcome = "awaiting_decision"
	// OutcomeFailed: a decision failed the operation for good.
	OutcomeFailed Outcome = "failed"
	// OutcomeInvalid: the request was invalid (an input that cannot be
	// encoded, a bad scope); nothing was written.
	OutcomeInvalid Outcome = "invalid"
	// OutcomeCorrupt: the record, or a reply about it, does not decode.
	OutcomeCorrupt Outcome = "corrupt"
	// OutcomeCanceled: the caller's context ended before the store
	// answered.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeStoreUnavailable: the store could not be reached or did not
	// answer.
	OutcomeStoreUnavailable Outcome = "store_unavailable"
	// OutcomeResolveRefused: a resolution changed nothing: the record
	// moved on since the decision was taken, is in a state the
	// resolution does not apply to, or is gone.
	OutcomeResolveRefused Outcome = "resolve_refused"
	// OutcomeError: an error the executor does not classify (a bug).
	OutcomeError Outcome = "error"
)

// Outcomes returns every outcome, the successful ones first, so an
// adapter's test can check that its table maps each error outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeRan, OutcomeReplayed, OutcomeReconciled,
		OutcomeInProgress, OutcomeFingerprintMismatch, OutcomeOwnerConflict, OutcomeCodecMismatch,
		OutcomeRetryable, OutcomeNotStored, OutcomeEffectUnknown, OutcomeAwaitingDecision, OutcomeFailed, OutcomeInvalid,
		OutcomeCorrupt, OutcomeCanceled, OutcomeStoreUnavailable, OutcomeResolveRefused, OutcomeError}
}

// Succeeded reports whether o is a result rather than an error.
func (o Outcome) Succeeded() bool {
	return o == OutcomeRan || o == OutcomeReplayed || o == OutcomeReconciled
}

// Checkpoint is what the wrapper heartbeats, so the next attempt and the
// workflow's history know what the last attempt that reached the action
// confirmed. Temporal keeps the last heartbeat's details across the
// attempts of an activity, so they are evidence that outlives the Redis
// record: an attempt that finds the record gone (or FAILED_RETRYABLE)
// while the checkpoint says PhaseExecuting does not run the action
// blindly (see the activity package's Options.Reconcile).
type Checkpoint struct {
	Owner   string `json:"owner"`
	Attempt int64  `json:"attempt"` // the record's claim attempt
	Rev     int64  `json:"rev"`
	// Epoch is the record's creation time (Fence.Epoch).
	Epoch int64 `json:"epoch,omitempty"`
	// Phase is PhaseExecuting or PhaseSettled.
	Phase string `json:"phase"`
	// TemporalAttempt is the activity attempt that wrote the checkpoint.
	TemporalAttempt int32 `json:"temporalAttempt"`
}

// Checkpoint phases.
const (
	// PhaseExecuting: the attempt reached the action. The wrapper has the
	// Temporal server confirm this checkpoint before the action starts.
	PhaseExecuting = "executing"
	// PhaseSettled: the attempt that reached the action ended with no
	// effect, recorded as FAILED_RETRYABLE.
	PhaseSettled = "settled"
)

// Fence is the fence the checkpointed attempt held.
func (c Checkpoint) Fence() Fence {
	return Fence{Epoch: c.Epoch, Attempt: c.Attempt, Rev: c.Rev}
}

// EffectUnknownDetails are the details of a TypeEffectUnknown error.
type EffectUnknownDetails struct {
	// RecordKey names the record ("<code>:d<version>:<digest>"); the
	// operator command and the resolve signal take it.
	RecordKey     string `json:"recordKey"`
	OperationCode string `json:"operationCode"`
	ScopeDigest   string `json:"scopeDigest"`
	DigestVersion int    `json:"digestVersion"`
	// Operation is the raw operation identity: namespace/workflow ID/run
	// ID/activity ID (Redis holds only a keyed digest of it).
	Operation string `json:"operation"`
	Attempt   int64  `json:"attempt"`
	Rev       int64  `json:"rev"`
	State     string `json:"state"`
	// Recorded is true when the store confirmed the record is ABANDONED.
	Recorded bool   `json:"recorded"`
	Reason   string `json:"reason"`
	// Checkpoint is the last checkpoint a previous attempt heartbeated, if
	// any.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// IdempotentDownstream is the activity's declaration (the activity
	// package's Options.IdempotentDownstream): running the action again
	// cannot repeat its effect. The workflow package's Execute then
	// retries by itself instead of waiting for a person.
	IdempotentDownstream bool `json:"idempotentDownstream,omitempty"`
	// DownstreamKey is the reference the downstream knows the operation
	// by (the activity package's DownstreamKey option, such as a
	// transfer's reference ID), when the activity declares one: what an
	// operator looks the effect up by.
	DownstreamKey string `json:"downstreamKey,omitempty"`
	// ReachedAt is the earliest time an attempt may have reached the
	// downstream, by the store's clock (the record's creation; see
	// docs/guards.md#the-downstreams-retention). Zero when unknown.
	ReachedAt time.Time `json:"reachedAt,omitzero"`
	// DownstreamRetention is how long the downstream remembers the
	// operation's key (the activity package's DownstreamRetention
	// option); zero when the activity declares none. A retry decision
	// later than ReachedAt plus DownstreamRetention is refused unless
	// overridden with a reason.
	DownstreamRetention time.Duration `json:"downstreamRetention,omitempty"`
	// RetentionPassed: the activity refused to run again because the
	// retention had passed.
	RetentionPassed bool `json:"retentionPassed,omitempty"`
	// ActionFailed: the action returned an error, the failure's cause
	// (the downstream's own words), which a Fail decision delivers to the
	// workflow. False when the effect became unknown otherwise (a dead
	// worker, a lost lease, a completion the store did not record).
	ActionFailed bool `json:"actionFailed,omitempty"`
}

// ReferenceReusedDetails are the details of a TypeReferenceReused error:
// the business reference, which is the activity's own input (it stays in
// Temporal's history, as the input does, never in Redis), and the two
// operation keys it arrived with.
type ReferenceReusedDetails struct {
	OperationCode string `json:"operationCode"`
	// Reference is the activity's DownstreamKey.
	Reference string `json:"reference"`
	// Holder is the operation key that arrived first with it; Key this
	// operation's.
	Holder string `json:"holder"`
	Key    string `json:"key"`
}

// RetentionEnds is when the downstream's retention of the operation's key
// ends (ReachedAt plus DownstreamRetention); zero when either is unknown.
func (d EffectUnknownDetails) RetentionEnds() time.Time {
	if d.DownstreamRetention <= 0 || d.ReachedAt.IsZero() {
		return time.Time{}
	}
	return d.ReachedAt.Add(d.DownstreamRetention)
}

// WrappedActivity describes an activity registered through onceflow, for
// the workflow side: the workflow package's Interceptor schedules it with
// HeartbeatTimeout when the workflow set none, and checks a decided
// result with Decodes before accepting the decision.
type WrappedActivity struct {
	// Name is the activity type name, as the SDK names the function.
	Name string
	// Code is its operation code.
	Code OperationCode
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

// ActivityCatalog finds the wrapped activities by name: the activity
// package's Wrapper is one.
type ActivityCatalog interface {
	// WrappedActivity returns the wrapped activity registered under name.
	WrappedActivity(name string) (WrappedActivity, bool)
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

// ResolveRecordActivity is the registered name of Wrapper.ResolveRecord;
// the worker registers it (the activity package's Wrapper.ResolveRecord)
// and onceflow's workflow package calls it.
const ResolveRecordActivity = "onceflow.ResolveRecord"

// RetryDetails are the details of the retryable errors a wrapped activity
// returns (TypeInProgress, TypeRetryableNoEffect, TypeStoreUnavailable,
// TypeCanceled, TypeInternal): what the attempt knew of an effect of the
// attempts so far. Should it be the last attempt its retry policy allows,
// the workflow side settles the call (SettleActivity) with them as
// evidence.
type RetryDetails struct {
	// Checkpoint is the attempt's own checkpoint once it reached the
	// action, else the one the previous attempt heartbeated; nil when
	// none did.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
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
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
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
// (an unknown effect is its TypeEffectUnknown error, with
// EffectUnknownDetails, for the workflow to recover).
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
	Details EffectUnknownDetails `json:"details"`
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
	Details EffectUnknownDetails `json:"details"`
	// Target is "COMPLETED" (Response is replayed from now on),
	// "FAILED_RETRYABLE" (the next claim takes over) or "FAILED" (later
	// attempts fail with TypeOperationFailed and Reason).
	Target   string `json:"target"`
	Response []byte `json:"response,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Fence is a fencing token: (epoch, attempt, rev), ordered
// lexicographically.
//
// Attempt and Rev grow on every takeover and transition while the record
// lives. A store that loses the record (a restart without AOF, FLUSHALL,
// eviction) starts again at attempt 1, so Epoch, the record's creation
// time in the store's clock (milliseconds), comes first: the attempts of a
// record created after the loss carry a greater fence than a zombie of the
// lost one. The store's clock is the one the leases already trust; a
// failover to a server whose clock is behind, or to a replica that had
// not yet seen the record's last transitions, can give equal or inverted
// fences (README, "Fences across a loss of Redis").
type Fence struct {
	// Epoch is the record's creation time (Unix milliseconds, store
	// clock); 0 when unknown, which is older than every known epoch.
	Epoch   int64 `json:"epoch,omitempty"`
	Attempt int64 `json:"attempt"`
	Rev     int64 `json:"rev"`
}

// Less reports whether f is older than g.
func (f Fence) Less(g Fence) bool {
	if f.Epoch != g.Epoch {
		return f.Epoch < g.Epoch
	}
	return f.Attempt < g.Attempt || f.Attempt == g.Attempt && f.Rev < g.Rev
}

// String returns "<attempt>.<rev>", followed by "@<epoch>" when the epoch
// is known.
func (f Fence) String() string {
	s := strconv.FormatInt(f.Attempt, 10) + "." + strconv.FormatInt(f.Rev, 10)
	if f.Epoch != 0 {
		s += "@" + strconv.FormatInt(f.Epoch, 10)
	}
	return s
}

// RawScope is the raw identity a record's scope digest is made from: the
// binding's name, then its parts (Digester.Digest(scope...)).
// Each binding's scope is spelled here once, so the activity wrapper, the
// HTTP middleware and the operators' tools that look a record up derive
// the same digest.
type RawScope []string

// RunScope is a run-scoped activity's scope: the retries of one activity
// in one workflow run.
func RunScope(namespace, workflowID, runID, activityID string) RawScope {
	return RawScope{"run", namespace, workflowID, runID, activityID}
}

// WorkflowScope is a workflow-scoped activity's scope: one activity ID
// across the runs of one workflow ID.
func WorkflowScope(namespace, workflowID, activityID string) RawScope {
	return RawScope{"workflow", namespace, workflowID, activityID}
}

// StandaloneScope is the scope of an activity started on its own (a
// Temporal Standalone Activity, client.ExecuteActivity), run- or
// workflow-scoped: its activity ID, which the caller chooses as the
// operation's identity, across the activity's attempts and runs.
func StandaloneScope(namespace, activityID string) RawScope {
	return RawScope{"standalone", namespace, activityID}
}

// BusinessScope is a business-scoped activity's scope: one business key
// ("order-42/charge") across workflows of a namespace.
func BusinessScope(namespace, key string) RawScope { return RawScope{"business", namespace, key} }

// HTTPScope is an Idempotency-Key request's scope: the principal, the
// method, the route pattern ("POST /orders") and the key.
func HTTPScope(principal, method, route, key string) RawScope {
	return RawScope{"http", principal, method, route, key}
}
