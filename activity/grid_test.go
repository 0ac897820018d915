package activity

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestBeatsStartedApartFallOnOneGrid: activities whose heartbeats start
// at different times beat on the same grid of their interval (so their
// renewals fall due together and the store sends them as one call), the
// first beat within one interval of the start. Five beats started 17 ms
// apart beat a median of a few ms after a tick of a 100 ms grid; on
// tickers of their own their phases would spread over the interval.
func TestBeatsStartedApartFallOnOneGrid(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	var (
		mu     sync.Mutex
		phases []time.Duration
		wg     sync.WaitGroup
	)
	spread := time.NewTicker(17 * time.Millisecond)
	defer spread.Stop()
	for range 5 {
		<-spread.C
		start := time.Now()
		wg.Go(func() {
			first := true
			onGrid(ctx, interval, func(now time.Time) {
				at := time.Now()
				mu.Lock()
				defer mu.Unlock()
				if first && at.Sub(start) > interval+50*time.Millisecond {
					t.Errorf("the first beat came %v after the start; want within one interval (%v)", at.Sub(start), interval)
				}
				first = false
				phases = append(phases, at.Sub(at.Truncate(interval)))
			})
		})
	}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		mu.Lock()
		n := len(phases)
		mu.Unlock()
		if n >= 20 {
			break
		}
		select {
		case <-deadline.C:
			t.Fatalf("only %d beats in 30 s", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()
	slices.Sort(phases)
	if median := phases[len(phases)/2]; median > 20*time.Millisecond {
		t.Errorf("the beats came a median %v after a tick of the %v grid (phases %v); want just after one", median, interval, phases)
	}
}
