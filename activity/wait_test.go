package activity

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Wait that gives up leaves nothing behind: it waited on a goroutine of
// its own, which lived on until the activities returned.
func TestWaitThatGivesUpLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	w := &Wrapper{}
	if err := w.Wait(t.Context()); err != nil {
		t.Fatalf("Wait with nothing running: %v", err)
	}
	w.enter()
	for range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		err := w.Wait(ctx)
		cancel()
		if err == nil {
			t.Fatal("Wait returned nil while an activity runs")
		}
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait(t.Context()) }()
	w.leave()
	if err := <-done; err != nil {
		t.Fatalf("Wait after the activity returned: %v", err)
	}
}
