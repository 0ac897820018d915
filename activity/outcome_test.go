package activity

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/handshake"
)

// Every error outcome crosses the Temporal boundary with a type of its
// own table entry; an error the executor does not classify is
// onceflow.Internal, not "store unavailable".
func TestEveryOutcomeHasATemporalType(t *testing.T) {
	t.Parallel()
	for _, o := range onceflow.Outcomes() {
		if typ := o.TemporalType(); (typ != "") == o.Succeeded() {
			t.Errorf("outcome %q: Temporal type %q, succeeded %v", o, typ, o.Succeeded())
		}
	}
	var ae *temporal.ApplicationError
	err := toTemporal(errors.New("something new"), onceflow.Ref{}, "", nil, handshake.RetryDetails{}, downstream{})
	if !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeError.TemporalType() || ae.NonRetryable() {
		t.Fatalf("an unclassified error = %v, want a retryable %s", err, onceflow.OutcomeError.TemporalType())
	}
	err = toTemporal(&onceflow.Error{Outcome: onceflow.OutcomeInvalid, Field: "Ref", Reason: "bad"}, onceflow.Ref{}, "", nil, handshake.RetryDetails{}, downstream{})
	if !errors.As(err, &ae) || ae.Type() != onceflow.OutcomeInvalid.TemporalType() || !ae.NonRetryable() {
		t.Fatalf("a validation error = %v, want a non-retryable %s", err, onceflow.OutcomeInvalid.TemporalType())
	}
}
