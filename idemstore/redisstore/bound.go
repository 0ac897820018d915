package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// A claim or a transition (the writes that take, start, complete or fail
// a lease) is bounded by Redis' clock: it carries the latest server time
// at which it may still take effect, and a script that Redis runs later
// refuses itself (LATE, nothing changed). Its caller stops waiting at its
// deadline, so a bounded call whose reply never came took effect before
// that deadline or never: its fate is settled then, however late the
// bytes reach Redis (a stalled socket, a queue in go-redis'
// auto-pipeliner), without closing a connection. That is what lets these
// scripts ride the auto-pipeliner (docs/state-machine.md, "A call's fate
// is settled at its deadline").
//
// The store never sends its own clock. It sends a reading of Redis'
// clock that TIME returned to it (served) and a budget, in µs: how long
// after that reading the call may still run. The budget is the time the
// store's monotonic clock has run since the reading arrived, plus what
// the call has left, less the drift two clocks may have between them
// (maxDrift): Redis read served before its reply arrived, so Redis' clock
// at the caller's deadline is at least served plus the budget, and a
// script that finds Redis' clock past that sum runs after the deadline.
//
// A call is sent unbounded (and never through the auto-pipeliner), as
// before this bound existed, while the store has no reading it trusts:
// before the first, on a client of several servers (a Cluster, a Ring:
// several clocks), after the local wall clock stepped, after Redis' clock
// jumped against the last reading (another server after a failover, a
// clock set by hand), and after a LATE reply that the reading says Redis
// could not have answered yet (disproves). A LATE within the bound's
// margin is an answer: the call changed nothing (OutcomeStoreUnavailable).

// The bound's parameters.
const (
	// refreshEvery is how old a reading may grow before a call asks for
	// a new one (one TIME, sent by one call at a time).
	refreshEvery = 10 * time.Second
	// maxAge is how old a reading may be used while its refresh is in
	// flight or failing; past it, calls go unbounded.
	maxAge = 30 * time.Second
	// maxDrift bounds how fast two clocks may drift apart, in parts per
	// million: Linux slews a clock by at most 500, and each side may.
	maxDrift = 1000
	// stepTolerance is how far the local wall clock may move against the
	// monotonic one, or Redis' clock against a new reading's prediction
	// (beyond the readings' round trips and drift), before the store
	// calls it a step and stops bounding until readings agree again.
	stepTolerance = 5 * time.Millisecond
	// distrustFor is how long a step or an early LATE keeps calls
	// unbounded: the next reading after it must agree with the one
	// taken when it ended.
	distrustFor = time.Second
)

// serverClock estimates Redis' clock from readings of TIME.
type serverClock struct {
	// on is set for a client of one server at a time (*redis.Client,
	// one of Sentinel's among them), whose readings are of one clock.
	on bool
	// read asks the server for TIME.
	read func(ctx context.Context) (time.Time, error)
	// mono is the local monotonic clock and wall the local wall clock;
	// time.Since of a start and time.Now but in the tests.
	mono func() time.Duration
	wall func() time.Time

	last       atomic.Pointer[reading]
	refreshing atomic.Bool
	// distrust is the monotonic instant until which calls go unbounded.
	distrust atomic.Int64
	// steps counts the steps detected (local or Redis', or an early
	// LATE); bounded and unbounded count the calls sent each way (on a
	// clock that is on), for the tests.
	steps              atomic.Int64
	bounded, unbounded atomic.Int64
}

// reading is one TIME: Redis' clock as it replied, in µs, and the local
// clocks when the reply arrived, and its round trip.
type reading struct {
	served int64
	// sent is when TIME was sent, on the monotonic clock.
	sent time.Duration
	mono time.Duration
	wall time.Time
	rtt  time.Duration
	// trusted is unset for the reading taken after a step: the next one
	// must agree with it.
	trusted bool
}

// newServerClock is a clock for read, on when on is.
func newServerClock(on bool, read func(ctx context.Context) (time.Time, error)) *serverClock {
	start := time.Now()
	return &serverClock{on: on, read: read, mono: func() time.Duration { return time.Since(start) }, wall: time.Now}
}

// bound is a bounded call's two arguments: served and budget, in µs;
// both 0 for an unbounded call. from is the reading it was made from.
type bound struct {
	served, budget int64
	from           *reading
}

func (b bound) ok() bool { return b.served != 0 }

// bound returns the bound of a call that stops waiting after remaining,
// or the zero bound when the store has no reading it trusts (or the
// deadline came before the reading). A reading
// older than refreshEvery is renewed first, by one call at a time (the
// others use the one they have while it is younger than maxAge).
func (c *serverClock) bound(ctx context.Context, remaining time.Duration) bound {
	if c == nil || !c.on {
		return bound{}
	}
	b := c.estimate(ctx, remaining)
	if b.ok() {
		c.bounded.Add(1)
	} else {
		c.unbounded.Add(1)
	}
	return b
}

// estimate is bound's estimate. A call whose deadline has passed
// (remaining ≤ 0) is bounded all the same: by a moment Redis' clock has
// passed too, so that it refuses itself if it is sent at all.
func (c *serverClock) estimate(ctx context.Context, remaining time.Duration) bound {
	now := c.mono()
	r := c.last.Load()
	if r == nil || now-r.mono > refreshEvery || (!r.trusted && now-r.mono > distrustFor) {
		if c.refreshing.CompareAndSwap(false, true) {
			c.refresh(ctx)
			c.refreshing.Store(false)
			now, r = c.mono(), c.last.Load()
		}
	}
	if r == nil || !r.trusted || now-r.mono > maxAge || int64(now) < c.distrust.Load() {
		return bound{}
	}
	if c.stepped(r, now) {
		return bound{}
	}
	budget := now - r.mono + remaining
	budget -= budget / 1_000_000 * maxDrift
	us := budget.Microseconds() - 1
	if us <= 0 {
		return bound{}
	}
	return bound{served: r.served, budget: us, from: r}
}

// stepped reports whether the local wall clock moved against the
// monotonic one since r was read (a step, not a slew): the reading is
// dropped, and calls go unbounded until the next one.
func (c *serverClock) stepped(r *reading, now time.Duration) bool {
	moved := c.wall().Sub(r.wall) - (now - r.mono)
	if moved < 0 {
		moved = -moved
	}
	if moved <= stepTolerance+(now-r.mono)/1_000_000*maxDrift {
		return false
	}
	if c.last.CompareAndSwap(r, nil) {
		c.steps.Add(1)
		c.distrust.Store(int64(now + distrustFor))
	}
	return true
}

// refresh reads TIME and keeps the reading. A reading that disagrees
// with the last one by more than their round trips, the drift and
// stepTolerance says Redis' clock jumped (or another server answers): it
// is kept untrusted, and calls go unbounded until a later reading agrees
// with it. A failed read keeps the last reading (it ages out by maxAge).
func (c *serverClock) refresh(ctx context.Context) {
	sent := c.mono()
	t, err := c.read(ctx)
	recv := c.mono()
	if err != nil {
		return
	}
	r := &reading{served: t.UnixMicro(), sent: sent, mono: recv, wall: c.wall(), rtt: recv - sent, trusted: true}
	if prev := c.last.Load(); prev != nil {
		elapsed := recv - prev.mono
		predicted := prev.served + elapsed.Microseconds()
		off := time.Duration(r.served-predicted) * time.Microsecond
		if off < 0 {
			off = -off
		}
		if off > prev.rtt+r.rtt+stepTolerance+elapsed/1_000_000*maxDrift {
			r.trusted = false
			c.steps.Add(1)
			c.distrust.Store(int64(recv + distrustFor))
		}
	} else if c.distrust.Load() > int64(recv) {
		r.trusted = false // the first reading after a step: the next must agree
	}
	c.last.Store(r)
}

// disproves reports whether a LATE reply to a call bounded by b, which
// arrived now, proves b's reading wrong, and if so drops it (late). Redis
// read its clock after the reading was sent, so by the reading its clock
// now is at most served plus the time since then (and the drift): below
// served plus the budget, a LATE could not have been answered. A LATE
// above it is the bound's own margin (the reading's round trip and the
// drift, by which the bound ends before the deadline), and proves
// nothing.
func (c *serverClock) disproves(b bound) bool {
	since := c.mono() - b.from.sent
	since += since / 1_000_000 * maxDrift
	if since.Microseconds() >= b.budget {
		return false
	}
	c.late()
	return true
}

// late drops the reading after a LATE that proved it wrong: calls go
// unbounded until readings agree again.
func (c *serverClock) late() {
	now := c.mono()
	c.last.Store(nil)
	c.steps.Add(1)
	c.distrust.Store(int64(now + distrustFor))
}

// errLate is the cause of a LATE reply: the call reached Redis after the
// moment its bound gave it and refused itself.
var errLate = errors.New("redisstore: the call reached Redis after its deadline and refused itself; nothing changed: retry it")

// remaining is how long a call on ctx has before the store stops waiting
// for it: the command timeout, or less when ctx ends sooner.
func (s *Store) remaining(ctx context.Context) time.Duration {
	d := s.timeout
	if cd, ok := ctx.Deadline(); ok {
		if r := time.Until(cd); r < d {
			d = r
		}
	}
	return d
}
