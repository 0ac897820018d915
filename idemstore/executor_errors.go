package idemstore

import (
	"context"
	"errors"

	"github.com/onceflow/onceflow"
)

// The causes of an action context's cancellation (context.Cause) when
// the executor stops an action because its lease is gone. Every failure
// the Executor's methods return is an *onceflow.Error; match it with
// errors.Is on its onceflow.Outcome.
var (
	// ErrLeaseLost: renewal proved that another owner took the record
	// over.
	ErrLeaseLost = errors.New("idemstore: processing lease lost")
	// ErrLeaseUnconfirmed: renewal could not be confirmed before the lease
	// ran out, so another owner may take over.
	ErrLeaseUnconfirmed = errors.New("idemstore: processing lease could not be renewed in time")
)

// failure returns err as the *onceflow.Error the Executor's methods
// return: an *onceflow.Error as it is, a context's end as
// OutcomeCanceled, an error wrapping an outcome as that outcome, anything
// else as OutcomeError.
func failure(err error) error {
	if err == nil {
		return nil
	}
	var oe *onceflow.Error
	if errors.As(err, &oe) {
		return err
	}
	var o onceflow.Outcome
	switch {
	case errors.As(err, &o):
		return &onceflow.Error{Outcome: o, Reason: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &onceflow.Error{Outcome: onceflow.OutcomeCanceled, Err: err}
	}
	return &onceflow.Error{Outcome: onceflow.OutcomeError, Err: err}
}

// outcome is the outcome of what an Executor method returned.
func outcome(res Result, err error) onceflow.Outcome {
	if err == nil {
		return res.Outcome
	}
	var oe *onceflow.Error
	if errors.As(failure(err), &oe) {
		return oe.Outcome
	}
	return onceflow.OutcomeError
}

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
// request runs the action again, and fails with
// onceflow.OutcomeNotStored, which telemetry counts apart from failures.
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
