package workflow_test

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	idemwf "github.com/onceflow/onceflow/workflow"
)

func TestMayHaveActedReadsTheDetails(t *testing.T) {
	t.Parallel()
	want := onceflow.EffectUnknownDetails{RecordKey: "charge-payment:d1:ab", Attempt: 2, Rev: 5, State: "ABANDONED", Recorded: true}
	err := fmt.Errorf("activity error: %w", temporal.NewNonRetryableApplicationError("effect unknown", onceflow.OutcomeEffectUnknown.TemporalType(), nil, want))
	got, ok := idemwf.MayHaveActed(err)
	if !ok || got != want {
		t.Fatalf("MayHaveActed = %+v, %v", got, ok)
	}
	for _, other := range []error{nil, errors.New("plain"), temporal.NewApplicationError("x", onceflow.OutcomeInProgress.TemporalType())} {
		if _, ok := idemwf.MayHaveActed(other); ok {
			t.Fatalf("MayHaveActed(%v) = true", other)
		}
	}
}
