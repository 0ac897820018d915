package main

import (
	"math"
	"testing"
)

func TestCellsRatioPairsTheCellsOfOneRound(t *testing.T) {
	t.Parallel()
	ops := func(s sample) float64 { return s.opsPerSec }
	c := cells{}
	// The machine slows down round by round: the medians (20 and 10) say
	// 0.5, every round says 0.8.
	for _, r := range []struct{ base, w float64 }{{30, 24}, {20, 16}, {10, 8}} {
		c.add("floor", 64, sample{opsPerSec: r.base})
		c.add("fresh", 64, sample{opsPerSec: r.w})
	}
	c.add("floor", 1, sample{opsPerSec: 10})
	c.add("fresh", 1, sample{opsPerSec: 5})
	if got := c.ratio("fresh", "floor", 1, ops); got != 0.5 {
		t.Errorf("one round: ratio = %v, want 0.5", got)
	}
	if got := c.ratio("fresh", "floor", 64, ops); math.Abs(got-0.8) > 1e-9 {
		t.Errorf("ratio = %v, want 0.8: the median of the rounds' ratios, not the ratio of the medians", got)
	}
	for _, tc := range []struct {
		name    string
		w, base string
		g       int
	}{
		{"base not measured", "fresh", "naive", 64},
		{"workload not measured", "naive", "floor", 64},
		{"concurrency not measured", "fresh", "floor", 16},
	} {
		if got := c.ratio(tc.w, tc.base, tc.g, ops); !math.IsNaN(got) {
			t.Errorf("%s: ratio = %v, want NaN", tc.name, got)
		}
	}
	c.add("fresh", 16, sample{opsPerSec: 1})
	c.add("fresh", 16, sample{opsPerSec: 1})
	c.add("floor", 16, sample{opsPerSec: 1})
	if got := c.ratio("fresh", "floor", 16, ops); !math.IsNaN(got) {
		t.Errorf("rounds that do not pair up: ratio = %v, want NaN", got)
	}
	if got := ratioText(math.NaN()); got != "" {
		t.Errorf("ratioText(NaN) = %q, want empty", got)
	}
}
