package onceflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/onceflow/onceflow"
)

// TestErrorMatchesItsOutcome: one error type answers every failure; it
// matches its outcome (and the broader one of a narrower outcome) with
// errors.Is, gives its details with errors.As through any wrapping, and
// unwraps to its cause.
func TestErrorMatchesItsOutcome(t *testing.T) {
	t.Parallel()
	cause := context.DeadlineExceeded
	for _, c := range []struct {
		outcome onceflow.Outcome
		also    onceflow.Outcome // a broader outcome it matches too; "" for none
	}{
		{onceflow.OutcomeInProgress, ""},
		{onceflow.OutcomeEffectUnknown, ""},
		{onceflow.OutcomeAwaitingDecision, onceflow.OutcomeEffectUnknown},
		{onceflow.OutcomeRetryable, ""},
		{onceflow.OutcomeNotStored, onceflow.OutcomeRetryable},
		{onceflow.OutcomeResolveRefused, ""},
		{onceflow.OutcomeNoRecord, onceflow.OutcomeResolveRefused},
		{onceflow.OutcomeIndeterminate, ""},
	} {
		err := fmt.Errorf("calling the store: %w", &onceflow.Error{Outcome: c.outcome, Op: "claim", Err: cause})
		if !errors.Is(err, c.outcome) {
			t.Errorf("%s: errors.Is(err, its outcome) = false", c.outcome)
		}
		if c.also != "" && !errors.Is(err, c.also) {
			t.Errorf("%s: errors.Is(err, %s) = false", c.outcome, c.also)
		}
		for _, o := range onceflow.Outcomes() {
			if o != c.outcome && o != c.also && errors.Is(err, o) {
				t.Errorf("%s: matches %s too", c.outcome, o)
			}
		}
		var e *onceflow.Error
		if !errors.As(err, &e) || e.Outcome != c.outcome || e.Op != "claim" {
			t.Errorf("%s: errors.As = %v, %+v", c.outcome, errors.As(err, &e), e)
		}
		if !errors.Is(err, cause) {
			t.Errorf("%s: the cause is lost", c.outcome)
		}
	}
	// An Outcome is an error of its own, and matches only itself.
	if !errors.Is(onceflow.OutcomeCorrupt, onceflow.OutcomeCorrupt) || errors.Is(onceflow.OutcomeCorrupt, onceflow.OutcomeInvalid) {
		t.Error("an Outcome does not match as an error")
	}
}

// TestEveryFailureHasATemporalType: the Temporal error types the workflow
// side matches come from the same table as the outcomes, and every
// failure's type leads back to an outcome that raises it.
func TestEveryFailureHasATemporalType(t *testing.T) {
	t.Parallel()
	for _, o := range onceflow.Outcomes() {
		typ := o.TemporalType()
		if o.Succeeded() {
			if typ != "" {
				t.Errorf("%s: a result has Temporal type %q", o, typ)
			}
			continue
		}
		back, ok := onceflow.OutcomeOfTemporalType(typ)
		if !ok || back.TemporalType() != typ {
			t.Errorf("%s: type %q leads back to %q, %v", o, typ, back, ok)
		}
		if e := (&onceflow.Error{Outcome: o}).Error(); e == "" || e == "onceflow: " {
			t.Errorf("%s: empty message", o)
		}
	}
	if _, ok := onceflow.OutcomeOfTemporalType("onceflow.NoSuchType"); ok {
		t.Error("an unknown type names an outcome")
	}
}
