package workflow

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
)

// EffectUnknown reports whether err, returned by a wrapped activity's
// Future.Get or by Execute, says an attempt may have had the effect, and
// returns what the record showed: its key, attempt, rev and state, and the
// last checkpoint a dead attempt heartbeated. It is true of the activity's
// onceflow.TypeEffectUnknown failure (a workflow without the Interceptor
// gets it), and of a call a Fail decision ended (its failure ends in a
// TypeRecoveryFailed ApplicationError with the incident's details): a saga
// compensates such a step, which may have acted.
func EffectUnknown(err error) (onceflow.EffectUnknownDetails, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if ae, ok := e.(*temporal.ApplicationError); ok && ae.Type() == TypeRecoveryFailed {
			var d onceflow.EffectUnknownDetails
			if ae.HasDetails() && ae.Details(&d) == nil {
				return d, true
			}
		}
	}
	return rawEffectUnknown(err)
}

// rawEffectUnknown is EffectUnknown of an activity's own failure.
func rawEffectUnknown(err error) (onceflow.EffectUnknownDetails, bool) {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != onceflow.TypeEffectUnknown {
		return onceflow.EffectUnknownDetails{}, false
	}
	var d onceflow.EffectUnknownDetails
	if ae.HasDetails() {
		if derr := ae.Details(&d); derr != nil {
			return onceflow.EffectUnknownDetails{}, true
		}
	}
	return d, true
}

// InProgress reports whether err is onceflow's in-progress error (another
// attempt or workflow holds the operation) and the delay it asked for. An
// activity's retry policy retries it by itself; this is for workflows that
// ran the activity with MaximumAttempts 1.
func InProgress(err error) (retryAfter time.Duration, ok bool) {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != onceflow.TypeInProgress {
		return 0, false
	}
	return ae.NextRetryDelay(), true
}
