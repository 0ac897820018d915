package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// world is a simulated pair of clocks: the local monotonic and wall
// clocks, and Redis', which runs at 1+drift (in ppm) of the monotonic
// rate from offset, and answers TIME at a point inside a round trip.
type world struct {
	mono    time.Duration
	wallOff time.Duration // the local wall clock less the monotonic one
	offset  time.Duration // Redis' clock at mono 0, from the Unix epoch
	drift   float64       // ppm
	rtt     time.Duration
	at      float64 // where in the round trip Redis reads its clock, 0–1
	fail    bool
}

// redis is Redis' clock at the monotonic instant m.
func (w *world) redis(m time.Duration) time.Time {
	return time.Unix(0, 0).Add(w.offset + time.Duration(float64(m)*(1+w.drift/1e6)))
}

func (w *world) clock() *serverClock {
	return &serverClock{
		on:   true,
		mono: func() time.Duration { return w.mono },
		wall: func() time.Time { return time.Unix(0, 0).Add(w.mono + w.wallOff) },
		read: func(context.Context) (time.Time, error) {
			if w.fail {
				return time.Time{}, errors.New("no TIME")
			}
			read := w.mono + time.Duration(float64(w.rtt)*w.at)
			w.mono += w.rtt
			return w.redis(read).Truncate(time.Microsecond), nil
		},
	}
}

// notAfter is the latest Redis time, in µs, that b lets a call run at.
func notAfter(t *testing.T, b bound) int64 {
	t.Helper()
	if b.served <= 0 || b.budget <= 0 {
		t.Fatalf("bound %+v is not one", b)
	}
	return b.served + b.budget
}

// TestBoundNeverOutlivesTheDeadline: whatever Redis' clock reads against
// the local one (hours ahead or behind), however it drifts (within
// maxDrift), however long the reading's round trip and wherever in it
// Redis read its clock, the latest Redis time a bound lets a call run at
// is no later than Redis' clock at the caller's deadline, and no earlier
// than the round trip and the drift allowance make it.
func TestBoundNeverOutlivesTheDeadline(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(47, 2))
	for i := range 20000 {
		w := &world{
			mono:    time.Duration(rng.Int64N(int64(time.Hour))),
			wallOff: time.Duration(rng.Int64N(int64(48*time.Hour))) - 24*time.Hour,
			offset:  time.Duration(1_700_000_000+rng.Int64N(100_000_000)) * time.Second,
			drift:   rng.Float64()*1800 - 900,
			rtt:     time.Duration(rng.Int64N(int64(50 * time.Millisecond))),
			at:      rng.Float64(),
		}
		c := w.clock()
		c.refresh(t.Context())
		age := time.Duration(rng.Int64N(int64(refreshEvery)))
		w.mono += age
		// A deadline up to 10 s ahead, or already passed (but after the
		// reading arrived).
		remaining := time.Duration(rng.Int64N(int64(10*time.Second+age))) - age + 10*time.Microsecond
		b := c.bound(t.Context(), remaining)
		if !b.ok() {
			t.Fatalf("case %d: no bound from a fresh, trusted reading (%+v)", i, w)
		}
		deadline := w.redis(w.mono + remaining).UnixMicro()
		got := notAfter(t, b)
		if got > deadline {
			t.Fatalf("case %d: the bound lets a call run at Redis µs %d, %d µs after the deadline (%+v)", i, got, got-deadline, w)
		}
		slack := w.rtt + (w.mono-c.last.Load().mono+remaining)*2*maxDrift/1_000_000 + 3*time.Microsecond
		if deadline-got > slack.Microseconds() {
			t.Fatalf("case %d: the bound ends %d µs before the deadline, more than the round trip and drift allow (%v)", i, deadline-got, slack)
		}
	}
}

// TestBoundNeedsATrustedReading: no bound without a reading, from a
// failed read, from a reading older than maxAge, or for a call whose
// deadline came before the reading; a call at its deadline is bounded by
// a moment Redis' clock has reached; a reading older than refreshEvery
// is renewed first.
func TestBoundNeedsATrustedReading(t *testing.T) {
	t.Parallel()
	w := &world{offset: 1_800_000_000 * time.Second, rtt: time.Millisecond, at: 0.5}
	c := w.clock()
	w.fail = true
	if b := c.bound(t.Context(), time.Second); b.ok() {
		t.Fatalf("bound %+v without any reading", b)
	}
	w.fail = false
	if b := c.bound(t.Context(), time.Second); !b.ok() {
		t.Fatal("no bound once TIME answers")
	}
	first := c.last.Load()
	if b := c.bound(t.Context(), -time.Hour); b.ok() {
		t.Fatalf("bound %+v for a call whose deadline came before the reading", b)
	}
	w.mono += 100 * time.Millisecond
	if b := c.bound(t.Context(), 0); !b.ok() || b.served+b.budget > w.redis(w.mono).UnixMicro() {
		t.Fatalf("bound %+v for a call at its deadline: want one Redis' clock has reached", b)
	}
	w.mono += refreshEvery + time.Millisecond
	if b := c.bound(t.Context(), time.Second); !b.ok() || c.last.Load() == first {
		t.Fatalf("a reading older than refreshEvery was not renewed (bound %+v)", b)
	}
	w.fail = true
	w.mono += maxAge + time.Millisecond
	if b := c.bound(t.Context(), time.Second); b.ok() {
		t.Fatalf("bound %+v from a reading older than maxAge", b)
	}
	if c.unbounded.Load() != 3 || c.bounded.Load() != 3 {
		t.Fatalf("counted %d bounded and %d unbounded calls, want 3 and 3", c.bounded.Load(), c.unbounded.Load())
	}
}

// TestBoundStopsAtAStepOfTheLocalWallClock: a step of the local wall
// clock (not a slew: it moves against the monotonic one) drops the
// reading; calls go unbounded until a reading taken after distrustFor
// agrees with the one taken just after the step.
func TestBoundStopsAtAStepOfTheLocalWallClock(t *testing.T) {
	t.Parallel()
	for _, step := range []time.Duration{-3 * time.Second, 40 * time.Millisecond, time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			t.Parallel()
			w := &world{offset: 1_800_000_000 * time.Second, rtt: time.Millisecond, at: 0.5}
			c := w.clock()
			if !c.bound(t.Context(), time.Second).ok() {
				t.Fatal("no first bound")
			}
			w.mono += time.Second
			w.wallOff += step
			if b := c.bound(t.Context(), time.Second); b.ok() {
				t.Fatalf("bound %+v after the local wall clock stepped %v", b, step)
			}
			if c.steps.Load() != 1 {
				t.Fatalf("%d steps seen, want 1", c.steps.Load())
			}
			w.mono += 10 * time.Millisecond
			if b := c.bound(t.Context(), time.Second); b.ok() {
				t.Fatalf("bound %+v from the first reading after a step", b)
			}
			w.mono += distrustFor + time.Millisecond
			if b := c.bound(t.Context(), time.Second); !b.ok() {
				t.Fatal("still no bound once a second reading agrees with the first after the step")
			}
		})
	}
}

// TestBoundStopsWhenRedisClockJumps: a reading that disagrees with the
// last one by more than their round trips and the drift (Redis' clock
// set by hand, another server after a failover) is not trusted until a
// later one agrees with it; a slew within maxDrift is no jump.
func TestBoundStopsWhenRedisClockJumps(t *testing.T) {
	t.Parallel()
	for _, jump := range []time.Duration{-2 * time.Second, -50 * time.Millisecond, 50 * time.Millisecond, time.Minute} {
		t.Run(jump.String(), func(t *testing.T) {
			t.Parallel()
			w := &world{offset: 1_800_000_000 * time.Second, rtt: time.Millisecond, at: 0.5, drift: 900}
			c := w.clock()
			if !c.bound(t.Context(), time.Second).ok() {
				t.Fatal("no first bound")
			}
			w.mono += refreshEvery + time.Second // a slew of 900 ppm: no jump
			if !c.bound(t.Context(), time.Second).ok() || c.steps.Load() != 0 {
				t.Fatalf("a slew within maxDrift was taken for a jump (%d steps)", c.steps.Load())
			}
			w.offset += jump
			w.mono += refreshEvery + time.Second
			if b := c.bound(t.Context(), time.Second); b.ok() {
				t.Fatalf("bound %+v right after Redis' clock jumped %v", b, jump)
			}
			w.mono += distrustFor + time.Millisecond
			if b := c.bound(t.Context(), time.Second); !b.ok() {
				t.Fatal("no bound once a reading agrees with the one after the jump")
			}
		})
	}
}

// TestAnEarlyLateDropsTheReading: a LATE that the reading says Redis
// could not have answered yet proves the reading wrong: calls go
// unbounded until readings agree again. A LATE within the bound's margin
// (the reading's round trip and the drift) proves nothing.
func TestAnEarlyLateDropsTheReading(t *testing.T) {
	t.Parallel()
	w := &world{offset: 1_800_000_000 * time.Second, rtt: 20 * time.Millisecond, at: 0.5}
	c := w.clock()
	b := c.bound(t.Context(), time.Second)
	if !b.ok() {
		t.Fatal("no first bound")
	}
	w.mono += time.Second - 2*time.Millisecond // within the round trip of the deadline
	if c.disproves(b) || c.last.Load() == nil {
		t.Fatal("a LATE within the bound's margin dropped the reading")
	}
	b = c.bound(t.Context(), time.Second)
	w.mono += 500 * time.Millisecond
	if !c.disproves(b) {
		t.Fatal("a LATE half a second before the deadline did not drop the reading")
	}
	if b := c.bound(t.Context(), time.Second); b.ok() {
		t.Fatalf("bound %+v right after an early LATE", b)
	}
	w.mono += distrustFor + time.Millisecond
	if !c.bound(t.Context(), time.Second).ok() {
		t.Fatal("no bound once readings agree again")
	}
}

// TestBoundIsOffForSeveralServers: a clock that is off (a Cluster, a
// Ring, a client without ContextTimeoutEnabled) bounds nothing and reads
// nothing.
func TestBoundIsOffForSeveralServers(t *testing.T) {
	t.Parallel()
	read := 0
	c := newServerClock(false, func(context.Context) (time.Time, error) { read++; return time.Now(), nil })
	if b := c.bound(t.Context(), time.Second); b.ok() || read != 0 {
		t.Fatalf("an off clock bound %+v after %d reads", b, read)
	}
}
