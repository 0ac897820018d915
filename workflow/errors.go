package workflow

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
)

// MayHaveActed reports whether err, returned by a wrapped activity's
// Future.Get or by Execute, says an attempt may have had the effect, and
// returns what the record showed: its key, attempt, rev and state, and the
// last checkpoint a dead attempt heartbeated. It is true of the
// activity's "onceflow.EffectUnknown" failure (a workflow without the
// Interceptor gets it), and of a call a Fail decision ended (its failure
// ends in a TypeRecoveryFailed ApplicationError with the incident's
// details): a saga compensates such a step, which may have acted.
func MayHaveActed(err error) (onceflow.EffectUnknownDetails, bool) {
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

// rawEffectUnknown is MayHaveActed of an activity's own failure.
func rawEffectUnknown(err error) (onceflow.EffectUnknownDetails, bool) {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeEffectUnknown.TemporalType() {
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
