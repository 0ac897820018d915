package activity

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
)

// Every error outcome crosses the Temporal boundary with a type of its
// own table entry; an error the executor does not classify is
// onceflow.Internal, not "store unavailable".
func TestEveryOutcomeHasATemporalType(t *testing.T) {
	t.Parallel()
	for _, o := range onceflow.Outcomes() {
		if _, ok := temporalErrors[o]; ok == o.Succeeded() {
			t.Errorf("outcome %q: in the table %v, succeeded %v", o, ok, o.Succeeded())
		}
	}
	var ae *temporal.ApplicationError
	err := toTemporal(errors.New("something new"), onceflow.Ref{}, "", nil, onceflow.RetryDetails{}, downstream{})
	if !errors.As(err, &ae) || ae.Type() != onceflow.TypeInternal || ae.NonRetryable() {
		t.Fatalf("an unclassified error = %v, want a retryable %s", err, onceflow.TypeInternal)
	}
	err = toTemporal(&onceflow.ValidationError{Field: "Ref", Reason: "bad"}, onceflow.Ref{}, "", nil, onceflow.RetryDetails{}, downstream{})
	if !errors.As(err, &ae) || ae.Type() != onceflow.TypeInvalidInput || !ae.NonRetryable() {
		t.Fatalf("a validation error = %v, want a non-retryable %s", err, onceflow.TypeInvalidInput)
	}
}
