package idemstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow"
)

// Errors Execute returns. Match them with errors.Is; the concrete types
// carry the details.
var (
	// ErrInProgress: another owner, or another invocation of the same
	// owner, is executing the operation. Retry after InProgressError.RetryAfter.
	ErrInProgress = errors.New("idemstore: operation in progress")
	// ErrFingerprintMismatch: the scope was used for another request.
	ErrFingerprintMismatch = errors.New("idemstore: fingerprint mismatch")
	// ErrOwnerOperationConflict: the owner holds the record for another
	// operation.
	ErrOwnerOperationConflict = errors.New("idemstore: owner/operation conflict")
	// ErrCodecMismatch: the stored response was encoded with a codec or
	// policy revision this executor does not use.
	ErrCodecMismatch = errors.New("idemstore: codec mismatch")
	// ErrEffectUnknown: the action's effect may or may not have happened.
	// The record is (or is being made) ABANDONED; it must be resolved.
	ErrEffectUnknown = errors.New("idemstore: effect unknown")
	// ErrAwaitingDecision: the record is ABANDONED, or the executor could
	// not record what happened. Resolve it before retrying. Every
	// AwaitingDecision error also matches ErrEffectUnknown.
	ErrAwaitingDecision = errors.New("idemstore: awaiting a decision")
	// ErrRetryable: the action failed with no effect (RetryableNoEffect);
	// the record is FAILED_RETRYABLE and the next attempt takes over.
	ErrRetryable = errors.New("idemstore: failed with no effect; retry")
	// ErrLeaseLost: renewal proved that another owner took the record
	// over. It is the cause of the action context's cancellation.
	ErrLeaseLost = errors.New("idemstore: processing lease lost")
	// ErrOperationFailed: a decision failed the operation for good (the
	// record is FAILED); it is not run again until the record is reopened.
	ErrOperationFailed = errors.New("idemstore: operation failed by decision")
	// ErrLeaseUnconfirmed: renewal could not be confirmed before the lease
	// ran out, so another owner may take over. It is the cause of the
	// action context's cancellation.
	ErrLeaseUnconfirmed = errors.New("idemstore: processing lease could not be renewed in time")
)

// InProgressError says the operation is running elsewhere. It matches
// ErrInProgress.
type InProgressError struct {
	Ref onceflow.Ref
	// RetryAfter is the lease the running owner has left.
	RetryAfter time.Duration
	// SameOwner is true when the runner is another invocation of this
	// very owner (the same retained attempt, delivered twice).
	SameOwner bool
}

func (e *InProgressError) Error() string {
	who := "another owner"
	if e.SameOwner {
		who = "another invocation of the same attempt"
	}
	return fmt.Sprintf("idemstore: %s is being executed by %s; retry after %v", e.Ref, who, e.RetryAfter)
}

// Is reports whether target is ErrInProgress.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// ConflictError is a request that can never succeed as sent: a fingerprint
// mismatch, an owner/operation conflict or a codec mismatch. It matches the
// sentinel in Kind.
type ConflictError struct {
	Ref    onceflow.Ref
	Kind   error // ErrFingerprintMismatch, ErrOwnerOperationConflict or ErrCodecMismatch
	Detail string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: %s: %s", e.Kind, e.Ref, e.Detail)
}

// Is matches the kind.
func (e *ConflictError) Is(target error) bool { return target == e.Kind }

// EffectUnknownError says the effect's fate is unknown and what the record
// shows. It matches ErrEffectUnknown, and ErrAwaitingDecision when
// AwaitingDecision is set. It unwraps to the cause.
type EffectUnknownError struct {
	Ref       onceflow.Ref
	Operation onceflow.OperationID
	Attempt   int64
	Rev       int64
	// State is the record's state as last confirmed (ABANDONED when the
	// abandonment was recorded).
	State onceflow.State
	// Recorded is true when the store confirmed the record is ABANDONED;
	// false when that write could not be verified (the record may still be
	// EXECUTING until its lease runs out).
	Recorded bool
	// AwaitingDecision is set when the record was already ABANDONED, or a
	// result could not be recorded.
	AwaitingDecision bool
	Reason           string
	Err              error
	// Since is the earliest time an attempt of the operation may have
	// reached the action, by the store's clock: the record's creation, or
	// an earlier incarnation's (Request.ReachedAction's fence) when the
	// store lost it. Zero when the record was not read.
	Since time.Time
	// RetentionPassed is set when a re-run was refused because Since is
	// further back than Request.DownstreamRetention.
	RetentionPassed bool
}

func (e *EffectUnknownError) Error() string {
	msg := fmt.Sprintf("idemstore: effect of %s (attempt %d, rev %d) unknown: %s", e.Ref, e.Attempt, e.Rev, e.Reason)
	if e.Recorded {
		msg += "; the record is ABANDONED: resolve it (to COMPLETED with the real result, or to FAILED_RETRYABLE to run again)"
	} else {
		msg += "; the record's state could not be confirmed: inspect it before resolving"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is matches ErrEffectUnknown, and ErrAwaitingDecision when set.
func (e *EffectUnknownError) Is(target error) bool {
	return target == ErrEffectUnknown || target == ErrAwaitingDecision && e.AwaitingDecision
}

// Unwrap returns the cause.
func (e *EffectUnknownError) Unwrap() error { return e.Err }

// OperationFailedError says a decision failed the operation for good. It
// matches ErrOperationFailed.
type OperationFailedError struct {
	Ref onceflow.Ref
	// Reason is the decision's reason, as recorded.
	Reason string
}

func (e *OperationFailedError) Error() string {
	return fmt.Sprintf("idemstore: %s was failed by decision (%s); it does not run again until the record is reopened (Resolve it to FAILED_RETRYABLE, or `worker reopen`)", e.Ref, e.Reason)
}

// Is reports whether target is ErrOperationFailed.
func (e *OperationFailedError) Is(target error) bool { return target == ErrOperationFailed }

// RetryableError is an action's failure with no effect. It matches
// ErrRetryable and unwraps to the action's error.
type RetryableError struct {
	Ref onceflow.Ref
	// Recorded is true when the record was confirmed FAILED_RETRYABLE, so
	// the next claim takes over at once; false when that write could not
	// be verified (the next claim waits for the lease).
	Recorded bool
	// NotStored is true when the action answered with a response its
	// caller chose not to keep (NotStored), rather than failing.
	NotStored bool
	Err       error
}

func (e *RetryableError) Error() string {
	if e.NotStored {
		return fmt.Sprintf("idemstore: %s answered with a response that is not stored (recorded: %v); the next request runs it again: %v", e.Ref, e.Recorded, e.Err)
	}
	return fmt.Sprintf("idemstore: %s failed with no effect (recorded: %v); retry: %v", e.Ref, e.Recorded, e.Err)
}

// Is reports whether target is ErrRetryable.
func (e *RetryableError) Is(target error) bool { return target == ErrRetryable }

// Unwrap returns the action's error.
func (e *RetryableError) Unwrap() error { return e.Err }

// noEffectError and effectUnknownError classify an action's error.
type noEffectError struct {
	err       error
	notStored bool
}

func (e *noEffectError) Error() string { return "no effect: " + e.err.Error() }
func (e *noEffectError) Unwrap() error { return e.err }

type effectUnknownError struct{ err error }

func (e *effectUnknownError) Error() string { return "effect unknown: " + e.err.Error() }
func (e *effectUnknownError) Unwrap() error { return e.err }

// RetryableNoEffect marks an action's error as a failure that certainly had
// no effect (the card was declined, the request never left): the record
// becomes FAILED_RETRYABLE and the next attempt runs the action again.
func RetryableNoEffect(err error) error {
	if err == nil {
		err = errors.New("retryable failure")
	}
	return &noEffectError{err: err}
}

// NotStored marks an action's answer as one its caller does not keep (an
// HTTP 202 Accepted: the request was taken, its result comes later): the
// executor releases the record as for RetryableNoEffect, so the next
// request runs the action again, and returns a *RetryableError with
// NotStored set, which OutcomeOf reports as OutcomeNotStored rather than
// as a failure.
func NotStored(err error) error {
	if err == nil {
		err = errors.New("response not stored")
	}
	return &noEffectError{err: err, notStored: true}
}

// EffectUnknown marks an action's error as one after which the effect may
// have happened (a timeout after the request was sent). The record becomes
// ABANDONED. An error an action returns unmarked is treated the same way.
func EffectUnknown(err error) error {
	if err == nil {
		err = errors.New("effect unknown")
	}
	return &effectUnknownError{err}
}
