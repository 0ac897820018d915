package redisstore

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is a call's context for a client that bounds its reads and
// writes by the context (ContextTimeoutEnabled): the caller's context with
// the command timeout as its deadline. go-redis sets each socket deadline
// from Deadline(), so a call's I/O stops there without a timer of its own;
// context.WithTimeout would arm and stop one on every call (a runtime lock
// and four allocations). What go-redis waits for on a channel (a free
// connection of an exhausted pool, a dial) ends at Done, which closes at
// the deadline too: its channel is shared by every call whose deadline
// falls in the same millisecond (deadlines), so one timer serves them all.
//
// A caller's cancellation is seen by every check of Done and Err, and ends
// such a wait by the deadline at the latest (a wait that began before it
// waits on the deadline's channel, not the caller's).
type deadlineCtx struct {
	context.Context
	deadline time.Time
	timers   *deadlines
}

// withDeadline returns ctx bounded by timeout from now: ctx itself when its
// own deadline is earlier.
func withDeadline(ctx context.Context, timeout time.Duration, timers *deadlines) context.Context {
	return new(deadlineCtx).bind(ctx, timeout, timers)
}

// bind makes c ctx bounded by timeout from now and returns c, or returns
// ctx itself when its own deadline is earlier. A pooled call binds its
// own deadlineCtx (replayCall, scriptCall): valid until it is released.
func (c *deadlineCtx) bind(ctx context.Context, timeout time.Duration, timers *deadlines) context.Context {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && !cd.After(d) {
		return ctx
	}
	*c = deadlineCtx{Context: ctx, deadline: d, timers: timers}
	return c
}

// Deadline implements context.Context.
func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context: the caller's channel once it is
// closed, else one that closes at the deadline (a moment after it).
func (c *deadlineCtx) Done() <-chan struct{} {
	if p := c.Context.Done(); p != nil {
		select {
		case <-p:
			return p
		default:
		}
	}
	return c.timers.done(c.deadline)
}

// Err implements context.Context: the caller's error, or
// context.DeadlineExceeded once the deadline's channel has closed.
func (c *deadlineCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if time.Now().Before(c.deadline) {
		return nil // the channel closes after the deadline
	}
	select {
	case <-c.timers.done(c.deadline):
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// deadlines hands out channels that close at a deadline: one for every
// millisecond in which deadlines fall, closed by one timer once the last
// deadline of that millisecond has passed. A closed channel is kept for
// keep, so that every Done and Err of a deadline agree (a channel made
// anew for a passed deadline would be open for a moment); a deadline
// older than that gets one closed channel.
type deadlines struct {
	mu     sync.Mutex
	at     map[int64]chan struct{}
	closed chan struct{}
	swept  int64 // when the last sweep ran, in Unix milliseconds
}

// keep is how long a closed channel is kept.
const keep = 2 * time.Second

// done returns the channel that closes once t has passed.
func (d *deadlines) done(t time.Time) <-chan struct{} {
	ms := t.UnixMilli()
	d.mu.Lock()
	defer d.mu.Unlock()
	if ch, ok := d.at[ms]; ok {
		return ch
	}
	if time.Until(t) < -keep/2 {
		if d.closed == nil {
			d.closed = make(chan struct{})
			close(d.closed)
		}
		return d.closed
	}
	if d.at == nil {
		d.at = make(map[int64]chan struct{})
	}
	if now := time.Now().UnixMilli(); now-d.swept > keep.Milliseconds() {
		// Forget the channels closed more than keep ago (past deadlines
		// up to keep/2 are still asked for, and get theirs): the map holds
		// the milliseconds of deadlines of the last two keeps at most.
		d.swept = now
		for k := range d.at {
			if k < now-keep.Milliseconds() {
				delete(d.at, k)
			}
		}
	}
	ch := make(chan struct{})
	d.at[ms] = ch
	// Every deadline of this millisecond is less than one after t (the
	// delay is measured on t's monotonic clock).
	time.AfterFunc(time.Until(t)+time.Millisecond, func() { close(ch) })
	return ch
}
