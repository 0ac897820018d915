package workflow_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	idemwf "github.com/onceflow/onceflow/workflow"
)

func TestEffectUnknownReadsTheDetails(t *testing.T) {
	t.Parallel()
	want := onceflow.EffectUnknownDetails{RecordKey: "charge-payment:d1:ab", Attempt: 2, Rev: 5, State: "ABANDONED", Recorded: true}
	err := fmt.Errorf("activity error: %w", temporal.NewNonRetryableApplicationError("effect unknown", onceflow.TypeEffectUnknown, nil, want))
	got, ok := idemwf.EffectUnknown(err)
	if !ok || got != want {
		t.Fatalf("EffectUnknown = %+v, %v", got, ok)
	}
	for _, other := range []error{nil, errors.New("plain"), temporal.NewApplicationError("x", onceflow.TypeInProgress)} {
		if _, ok := idemwf.EffectUnknown(other); ok {
			t.Fatalf("EffectUnknown(%v) = true", other)
		}
	}
}

func TestInProgressReadsTheDelay(t *testing.T) {
	t.Parallel()
	err := temporal.NewApplicationErrorWithOptions("busy", onceflow.TypeInProgress, temporal.ApplicationErrorOptions{NextRetryDelay: 7 * time.Second})
	if d, ok := idemwf.InProgress(err); !ok || d != 7*time.Second {
		t.Fatalf("InProgress = %v, %v", d, ok)
	}
	if _, ok := idemwf.InProgress(errors.New("plain")); ok {
		t.Fatal("InProgress(plain) = true")
	}
}
