package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDeadlineCtxKeepsTheContextContract: a call's context reports its
// deadline, is not done before it, is done (Done closed, Err
// DeadlineExceeded) after it, and shows a cancelled caller at once.
func TestDeadlineCtxKeepsTheContextContract(t *testing.T) {
	t.Parallel()
	var timers deadlines
	const timeout = 50 * time.Millisecond
	start := time.Now()
	ctx := withDeadline(context.Background(), timeout, &timers)
	if d, ok := ctx.Deadline(); !ok || d.Before(start.Add(timeout)) {
		t.Fatalf("Deadline() = %v, %v; want %v after %v", d, ok, timeout, start)
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err() before the deadline = %v", err)
	}
	<-ctx.Done()
	if took := time.Since(start); took < timeout {
		t.Errorf("Done closed after %v, before the %v deadline", took, timeout)
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() after Done = %v, want DeadlineExceeded", err)
	}

	// A caller's earlier deadline is kept as it is.
	early, cancel := context.WithTimeout(context.Background(), timeout/2)
	defer cancel()
	if got := withDeadline(early, timeout, &timers); got != early {
		t.Errorf("withDeadline replaced a caller's earlier deadline")
	}

	// A cancelled caller shows at once.
	parent, cancelParent := context.WithCancel(context.Background())
	ctx = withDeadline(parent, time.Hour, &timers)
	cancelParent()
	select {
	case <-ctx.Done():
	default:
		t.Errorf("Done is not closed after the caller's context was cancelled")
	}
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err() after the caller cancelled = %v, want Canceled", err)
	}
}

// TestDeadlinesForgetClosedChannels: the channels of deadlines long past
// are dropped, so a store keeps no more than a few seconds' worth.
func TestDeadlinesForgetClosedChannels(t *testing.T) {
	t.Parallel()
	var d deadlines
	past := time.Now().Add(-keep / 4)
	for i := range 100 {
		<-d.done(past.Add(time.Duration(i) * time.Millisecond))
	}
	d.mu.Lock()
	d.swept = 0 // the next channel made sweeps
	old := make(map[int64]chan struct{}, len(d.at))
	for k, ch := range d.at {
		old[k-2*keep.Milliseconds()] = ch // as if made two keeps ago
	}
	d.at = old
	d.mu.Unlock()
	d.done(time.Now().Add(time.Second))
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.at) != 1 {
		t.Errorf("%d channels kept after a sweep, want 1 (the new one)", len(d.at))
	}
}
