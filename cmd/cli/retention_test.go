package cli

import (
	"testing"
	"time"
)

// TestRetentionLeftShowsTheWindow: `worker pending`'s RETENTION LEFT
// column shows the time left in the downstream's retention, when it
// expired, or "-" without one.
func TestRetentionLeftShowsTheWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		ends   time.Time
		passed bool
		want   string
	}{
		{time.Time{}, false, "-"},
		{time.Time{}, true, "expired"},
		{now.Add(23*time.Hour + 30*time.Minute + 500*time.Millisecond), false, "23h30m0s"},
		{now.Add(-90 * time.Minute), true, "expired 1h30m0s ago"},
		{now, false, "expired 0s ago"},
	} {
		if got := RetentionLeft(c.ends, c.passed, now); got != c.want {
			t.Errorf("RetentionLeft(%v, %v) = %q, want %q", c.ends, c.passed, got, c.want)
		}
	}
}
