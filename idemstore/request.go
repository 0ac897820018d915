package idemstore

import (
	"context"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// Action is the side effect. It returns the response to store and replay,
// or an error: wrap it with RetryableNoEffect when the effect certainly did
// not happen, or EffectUnknown when it may have. An unmarked error, and a
// panic, count as EffectUnknown.
//
// The context is cancelled when the caller's is, and when the lease is
// lost (context.Cause is ErrLeaseLost or ErrLeaseUnconfirmed): stop then.
type Action func(ctx context.Context) ([]byte, error)

// ReconcileFunc asks the outside world whether the effect of a previous
// attempt happened, for instance by looking the operation key up at the
// payment provider. found with a response completes the operation with that
// response; not found lets the action run.
type ReconcileFunc func(ctx context.Context, rec onceflow.Record) (response []byte, found bool, err error)

// Request is one call of Execute.
type Request struct {
	Ref         onceflow.Ref
	Operation   onceflow.OperationID
	Fingerprint onceflow.Fingerprint
	// Owner is the retained attempt's owner token. Invocations with the
	// same owner are the same attempt: only the one whose start the store
	// confirmed runs the action. Default: a new random owner, that is a
	// new attempt.
	Owner onceflow.Owner
	// Reconcile is consulted when this attempt takes over a record whose
	// previous owner's lease expired in EXECUTING. Without it (and without
	// IdempotentDownstream) that takeover ends in ABANDONED and
	// onceflow.OutcomeEffectUnknown, without running the action.
	Reconcile ReconcileFunc
	// IdempotentDownstream declares that the action's effect is itself
	// idempotent (it passes Execution.Key to a provider that deduplicates),
	// so re-running after an uncertain takeover is safe.
	IdempotentDownstream bool
	// ReachedAction, when set, is evidence kept outside the store that an earlier
	// attempt may have reached the action (the Temporal binding sets it
	// from the previous attempt's checkpoint). A record is then not proof
	// that nothing ran: a claim that creates the record, or takes over one
	// the store calls safe (FAILED_RETRYABLE, an expired CLAIMED), leaves
	// the effect as unknown as a takeover of an expired EXECUTING record: Reconcile
	// first, a re-run only if IdempotentDownstream, and otherwise ABANDONED
	// and an *onceflow.Error without running. See ReachedAction.
	ReachedAction *ReachedAction
	// BeforeStart, when set, selects the two-step path: CLAIM, then
	// BeforeStart, then START. If it fails the claim is released (nothing
	// ran) and Execute returns its error.
	BeforeStart func(ctx context.Context, o driver.Ownership) error
	// RenewTicks, when set, drives lease renewal instead of the executor's
	// own ticker (the Temporal binding ticks it from heartbeats).
	RenewTicks <-chan time.Time
	// Codec names the encoding of this operation's response when it is
	// not ExecutorConfig.Codec. A completed record stored under another
	// codec is not replayed (onceflow.OutcomeCodecMismatch).
	Codec string
	// DownstreamRetention is how long the downstream remembers the key
	// it deduplicates by (a payment provider keeps an idempotency key 24
	// hours to 31 days). Past it, a re-run after an unknown effect (a
	// Reconcile that found nothing, IdempotentDownstream) may reach a
	// downstream that has forgotten the first attempt and acts again, so
	// it is refused: the record is abandoned with
	// onceflow.Error.RetentionPassed, for a decision. Measured from
	// onceflow.Error.Since, by the store's clock (see
	// docs/guards.md#the-downstreams-retention). Zero: no limit.
	DownstreamRetention time.Duration
}

// ReachedAction is evidence, kept outside the store, that an earlier
// attempt of an operation may have reached its action. The store can lose a record
// (a restart without AOF, a failover to a replica that lacked it,
// FLUSHALL, eviction): a claim that then finds nothing would run the
// action again. Request.ReachedAction makes the effect of such a claim unknown.
type ReachedAction struct {
	// Reason says what the evidence is; it is logged and becomes part of
	// the onceflow.Error's reason.
	Reason string
	// Fence is the fence the earlier attempt held when it reached the
	// action, when known. A record of the same incarnation (equal
	// Fence.Epoch) that the store moved to FAILED_RETRYABLE at that
	// attempt or later settles it: the store recorded that the
	// attempt had no effect, and that record is the one being taken over.
	Fence onceflow.Fence
}

// settledBy reports whether taking over r from state from settles the
// evidence: the store itself recorded that the attempt had no effect.
func (d *ReachedAction) settledBy(r onceflow.Record, from onceflow.State) bool {
	return from == onceflow.StateFailedRetryable && d.Fence.Epoch != 0 && r.Fence().Epoch == d.Fence.Epoch && r.Attempt-1 >= d.Fence.Attempt
}

// Result is a successful Execute.
type Result struct {
	// Outcome says how Execute produced the response:
	// onceflow.OutcomeRan (this invocation ran the action and recorded its
	// response), onceflow.OutcomeReplayed (the operation had completed;
	// the stored response is returned and nothing ran) or
	// onceflow.OutcomeReconciled (an earlier attempt's effect was found by
	// Reconcile; its response was recorded and the action did not run).
	Outcome  onceflow.Outcome
	Response []byte
	// Fence is the fencing token of the attempt that produced the response.
	Fence onceflow.Fence
	// TookOver is the state this invocation took the record over from, if
	// it did.
	TookOver onceflow.State
}

// Execution describes the running action; the action's context carries it.
type Execution struct {
	Ref       onceflow.Ref
	Operation onceflow.OperationID
	Owner     onceflow.Owner
	Nonce     onceflow.Nonce
	// Fence is the running attempt's fencing token, with the record's
	// Epoch.
	Fence onceflow.Fence
	// EffectUnknown says why an earlier attempt may have had an effect, when this
	// one runs although it might have: Reconcile found nothing, or the
	// downstream is idempotent. "" when the record proved that nothing
	// ran. An action that calls a downstream which does not deduplicate
	// asks it first when EffectUnknown is set (activity.AskFirst does).
	EffectUnknown string
}

// Key is the stable operation key: the same for every attempt of the
// operation, so it can be the idempotency key of a downstream call. It
// names the record ("<code>:d<version>:<digest>"), so it holds no raw key.
func (x Execution) Key() string {
	if x.Ref == (onceflow.Ref{}) {
		return ""
	}
	return x.Ref.String()
}

type executionKey struct{}

// ExecutionFrom returns the execution an action's context carries.
func ExecutionFrom(ctx context.Context) (Execution, bool) {
	x, ok := ctx.Value(executionKey{}).(Execution)
	return x, ok
}

// WithExecution returns ctx carrying x, as an action's context carries
// it: for code that calls an activity's Reconcile outside an attempt (the
// activity package's Wrapper.Reconcile), so that the operation key and
// the fence answer there as they do inside one.
func WithExecution(ctx context.Context, x Execution) context.Context {
	return context.WithValue(ctx, executionKey{}, x)
}

// Validate checks the request's identity.
func (r Request) Validate() error {
	if err := driver.ValidateIdentity(r.Ref, r.Operation, r.Fingerprint); err != nil {
		return err
	}
	if r.Codec != "" {
		if err := driver.ValidateCodec(r.Codec, 1); err != nil {
			return err
		}
	}
	if r.Owner != "" {
		return r.Owner.Validate()
	}
	return nil
}
