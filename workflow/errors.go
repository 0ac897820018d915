package workflow

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
)

// EffectUnknown reports whether err, returned by an idempotent activity's
// Future.Get, says the effect's fate is unknown (onceflow.TypeEffectUnknown),
// and returns what the record showed: its key, attempt, rev and state, and
// the last checkpoint a dead attempt heartbeated.
func EffectUnknown(err error) (onceflow.EffectUnknownDetails, bool) {
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
