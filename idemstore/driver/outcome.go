package driver

import "github.com/onceflow/onceflow"

// ClaimOutcome is the reply to Claim and ClaimStart. It is a closed sum:
// one of Acquired, TakenOver, ReplayedAcquire, CompletedReplay, InProgress,
// FingerprintMismatch, AwaitingDecision, OperationFailed,
// OwnerOperationConflict, CodecMismatch. Switch on the concrete type; the default branch of such a
// switch is unreachable.
type ClaimOutcome interface{ claimOutcome() }

// TransitionOutcome is the reply to Start, Complete and Fail: one of
// Transitioned, AlreadyTransitioned, Refused, Missing.
type TransitionOutcome interface{ transitionOutcome() }

// RenewOutcome is the reply to Renew: one of Renewed, Refused, Missing.
type RenewOutcome interface{ renewOutcome() }

// ReleaseOutcome is the reply to Release: one of Released, Refused, Missing.
type ReleaseOutcome interface{ releaseOutcome() }

// ResolveOutcome is the reply to Resolve: one of Transitioned,
// AlreadyTransitioned, Refused, Missing.
type ResolveOutcome interface{ resolveOutcome() }

// Acquired: no record existed; the caller now owns a new one (CLAIMED, or
// EXECUTING with the caller's nonce after ClaimStart).
type Acquired struct {
	Ownership Ownership
	Record    onceflow.Record
}

// TakenOver: the caller took the record over from a previous owner
// (attempt+1, rev+1). From says what it took over. When
// EffectUnknown is true — the previous owner's lease expired in
// EXECUTING, or an earlier takeover of that kind was never settled — the
// effect of the operation may already have happened.
type TakenOver struct {
	Ownership     Ownership
	Record        onceflow.Record
	From          onceflow.State
	EffectUnknown bool
}

// ReplayedAcquire: the record already belongs to this owner and operation —
// the reply of an earlier claim by the same owner was lost, or the same
// attempt was delivered twice. Record.State and Record.Nonce say how far it
// got. It is not permission to run: only a start confirmed for this
// invocation's nonce is.
type ReplayedAcquire struct {
	Ownership Ownership
	Record    onceflow.Record
}

// CompletedReplay: the operation completed; Record.Response holds the
// stored response, Record.Codec and Record.Policy how it was encoded. A
// replay reads only what it needs: the Record holds State, Attempt, Rev,
// Codec, Policy, CreatedAt (so Record.Fence is the record's) and
// Response, and TTL (how long the record stays) only where the store read
// it: zero otherwise (redisstore replays with one read that does not).
type CompletedReplay struct{ Record onceflow.Record }

// InProgress: another owner holds a live lease. Record.LeaseRemaining() says
// how long it has left.
type InProgress struct{ Record onceflow.Record }

// FingerprintMismatch: the scope was used with another request. Nothing was
// changed.
type FingerprintMismatch struct{ Record onceflow.Record }

// AwaitingDecision: the record is ABANDONED; the effect's fate is unknown.
// It must be resolved (Resolve) before anyone may claim it again.
type AwaitingDecision struct{ Record onceflow.Record }

// OperationFailed: the record is FAILED: a decision failed the operation for
// good. Record.Reason says why. Nothing may claim it until it is reopened.
type OperationFailed struct{ Record onceflow.Record }

// OwnerOperationConflict: the owner token already holds this record for
// another OperationID.
type OwnerOperationConflict struct{ Record onceflow.Record }

// CodecMismatch: the record completed, but its response was stored with a
// codec or policy revision other than the caller's, so it is not replayed.
type CodecMismatch struct{ Record onceflow.Record }

// Transitioned: the transition (or resolution) was applied. Ownership
// carries the advanced revision to present next.
type Transitioned struct {
	Ownership Ownership
	Record    onceflow.Record
}

// AlreadyTransitioned: the record is already at the target state for this
// owner and operation (a re-sent request whose first reply was lost).
// Record.Nonce says which invocation started it.
type AlreadyTransitioned struct{ Record onceflow.Record }

// Refusal says why a store refused a mutation.
type Refusal string

// The refusal reasons.
const (
	RefusedNotOwner  Refusal = "NOT_OWNER"   // another owner holds the record
	RefusedOperation Refusal = "OP_CONFLICT" // same owner, another OperationID
	RefusedStaleRev  Refusal = "STALE_REV"   // the revision moved on
	RefusedState     Refusal = "WRONG_STATE" // not in an allowed source state
	RefusedNonce     Refusal = "NONCE_MISMATCH"
	RefusedAttempt   Refusal = "STALE_ATTEMPT" // Resolve: the attempt moved on
)

// Refused: the mutation was refused and nothing changed. Record is the
// current record.
type Refused struct {
	Reason Refusal
	Record onceflow.Record
}

// Missing: there is no record (expired, released or never created).
type Missing struct{}

// Renewed: the lease was moved forward to Record.LeaseUntil and the key's
// TTL to Record.TTL. The Record holds what says whose lease it is: State,
// Owner, Attempt, Rev, Operation, LeaseUntil, Nonce, ServerTime and TTL.
type Renewed struct{ Record onceflow.Record }

// Released: the CLAIMED record was deleted.
type Released struct{}

func (Acquired) claimOutcome()               {}
func (TakenOver) claimOutcome()              {}
func (ReplayedAcquire) claimOutcome()        {}
func (CompletedReplay) claimOutcome()        {}
func (InProgress) claimOutcome()             {}
func (FingerprintMismatch) claimOutcome()    {}
func (AwaitingDecision) claimOutcome()       {}
func (OperationFailed) claimOutcome()        {}
func (OwnerOperationConflict) claimOutcome() {}
func (CodecMismatch) claimOutcome()          {}

func (Transitioned) transitionOutcome()        {}
func (AlreadyTransitioned) transitionOutcome() {}
func (Refused) transitionOutcome()             {}
func (Missing) transitionOutcome()             {}

func (Renewed) renewOutcome() {}
func (Refused) renewOutcome() {}
func (Missing) renewOutcome() {}

func (Released) releaseOutcome() {}
func (Refused) releaseOutcome()  {}
func (Missing) releaseOutcome()  {}

func (Transitioned) resolveOutcome()        {}
func (AlreadyTransitioned) resolveOutcome() {}
func (Refused) resolveOutcome()             {}
func (Missing) resolveOutcome()             {}
