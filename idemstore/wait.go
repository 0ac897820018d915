package idemstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow"
)

// Waiting is how ExecuteWaiting waits for an attempt in progress
// elsewhere, instead of answering onceflow.Error at once. Its zero value
// waits until ctx is done, trying again every 50 ms to 1 s.
type Waiting struct {
	// Deadline ends the wait; the zero time leaves it to ctx.
	Deadline time.Time
	// MinDelay and MaxDelay bound the delay between tries, which is the
	// record's onceflow.Error.RetryAfter clamped to them (and never past
	// Deadline). Defaults: 50 ms and 1 s.
	MinDelay, MaxDelay time.Duration
	// OnWait, when set, is called once, before the first wait.
	OnWait func(*onceflow.Error)
}

// ExecuteWaiting is Execute, tried again while another attempt holds the
// operation (an *onceflow.Error), until it does not, w.Deadline passes
// or ctx is done. It reports whether it waited. When the deadline passes,
// the error is the last *onceflow.Error; when ctx ends the wait, the
// error wraps both ctx's cause and that *onceflow.Error, so it still
// classifies as OutcomeInProgress. The activity wrapper and the HTTP
// middleware both wait through it.
func (e *Executor) ExecuteWaiting(ctx context.Context, req Request, action Action, w Waiting) (res Result, waited bool, err error) {
	if w.MinDelay <= 0 {
		w.MinDelay = 50 * time.Millisecond
	}
	if w.MaxDelay < w.MinDelay {
		w.MaxDelay = max(w.MinDelay, time.Second)
	}
	for {
		res, err = e.Execute(ctx, req, action)
		var ip *onceflow.Error
		if !errors.As(err, &ip) || ip.Outcome != onceflow.OutcomeInProgress {
			return res, waited, err
		}
		delay := min(max(ip.RetryAfter, w.MinDelay), w.MaxDelay)
		if !w.Deadline.IsZero() {
			left := time.Until(w.Deadline)
			if left <= 0 {
				return res, waited, err
			}
			delay = min(delay, left)
		}
		if !waited && w.OnWait != nil {
			w.OnWait(ip)
		}
		waited = true
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, waited, fmt.Errorf("waiting for the attempt in progress: %w (%w)", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}
