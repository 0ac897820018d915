package idemstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/onceflow/onceflow/idemstore/driver"
)

// lease keeps an invocation's processing lease while its action runs.
//
// Two things happen independently of each other:
//
//   - The deadline: at the local time the lease ends, less the safety
//     margin, the action is cancelled with ErrLeaseUnconfirmed. It is
//     measured from the send time of the request that confirmed the lease,
//     on the monotonic clock, and fires whatever the store does: a renewal
//     that hangs, fails fast or answers late never holds it back. Only a
//     confirmed renewal moves it, and only while it is not due.
//   - Renewal: on every tick (the executor's RenewInterval, on a grid
//     every lease of the process shares, or Request.RenewTicks) one RENEW
//     is sent, never two at once, with a
//     context that ends no later than the lease. driver.Renewed moves the
//     deadline; driver.Refused or driver.Missing proves the lease lost and cancels the
//     action with ErrLeaseLost.
//
// One timer serves both: it fires at the next tick or at the deadline,
// whichever comes first, and while a renewal is in flight it waits for the
// deadline alone. Whenever it fires, the deadline is checked first.
//
// The action's context is therefore done no later than the deadline,
// before any other owner can take the record over by Redis' clock (which
// runs at the rate of ours; the margin absorbs scheduling delays and
// small drifts).
type lease struct {
	e      *Executor
	req    driver.RenewRequest
	cancel context.CancelCauseFunc // cancels the action
	margin time.Duration
	ticked bool // the executor ticks renewals itself (no Request.RenewTicks)

	// parent is the action's context; rctx, made at the first renewal, is
	// the parent of every renewal's context, and stopping cancels it.
	parent     context.Context
	rctx       context.Context
	stopRenews context.CancelFunc

	mu       sync.Mutex
	end      time.Time   // the local time by which the lease runs out at the earliest
	timer    *time.Timer // fires at the next tick or at end - margin
	done     bool        // the deadline passed or the lease was lost: renewals no longer count
	stopped  bool        // the action returned
	renewing bool        // a RENEW is in flight
	// renewed is closed when the RENEW in flight returns (nil when none
	// is); looped when the loop of the caller's ticks returns.
	renewed chan struct{}
	quit    chan struct{}
	looped  chan struct{}
}

// keepLease starts keeping the lease confirmed at v.sent (v.leaseEnd) for
// the action whose context cancel cancels.
func (v *invocation) keepLease(ctx context.Context, cancel context.CancelCauseFunc, own driver.Ownership) *lease {
	c := v.e.cfg
	l := &lease{e: v.e, req: v.renewRequest(own), cancel: cancel, margin: c.SafetyMargin, end: v.leaseEnd, parent: ctx}
	l.ticked = v.req.RenewTicks == nil
	// The timer's function takes mu: it waits until the timer is set.
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = time.AfterFunc(l.nextWakeLocked(), l.fire)
	if !l.ticked {
		l.quit, l.looped = make(chan struct{}), make(chan struct{})
		go l.loop(v.req.RenewTicks)
	}
	return l
}

// deadlineLocked is when the action is cancelled unless a renewal moves it.
func (l *lease) deadlineLocked() time.Time { return l.end.Add(-l.margin) }

// nextWakeLocked is how long until the timer must fire: the deadline, or
// the next tick when the executor ticks and no renewal is in flight.
func (l *lease) nextWakeLocked() time.Duration {
	d := time.Until(l.deadlineLocked())
	if l.ticked && !l.renewing {
		d = min(d, untilNextTick(l.e.cfg.RenewInterval))
	}
	return d
}

// untilNextTick is how long until the next tick of a grid of interval on
// the wall clock, the same for every lease with that interval: renewals
// fall due together, and the store sends those that wait for one another
// as one call (redisstore renews up to 64 leases per script call). A lease
// is thus renewed every interval, its first renewal within one interval
// of its start: never later than on a schedule of its own.
func untilNextTick(interval time.Duration) time.Duration {
	now := time.Now()
	return now.Truncate(interval).Add(interval).Sub(now)
}

// stop ends the keeping: no renewal starts after it, and one in flight is
// cancelled, its answer ignored. It waits for that renewal (and for the
// loop of the caller's ticks) to return, so nothing of the lease runs
// after Execute returns, but no longer than half the safety margin (at
// least the store's command timeout, which a store that honours its
// context returns within): a Store whose Renew ignores its cancellation
// must not hold the action's outcome back. What is still running then is
// left to the executor, which Drain waits for.
func (l *lease) stop() {
	l.mu.Lock()
	l.stopped = true
	l.timer.Stop()
	stopRenews, renewed := l.stopRenews, l.renewed
	l.mu.Unlock()
	if l.quit != nil {
		close(l.quit)
	}
	if stopRenews != nil {
		stopRenews()
	}
	if renewed == nil && l.looped == nil {
		return // nothing in flight: no timer to wait with
	}
	t := time.NewTimer(l.margin / 2)
	defer t.Stop()
	for _, ch := range []chan struct{}{renewed, l.looped} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-t.C:
			l.e.log(l.parent, l.req.Ref, l.req.Operation, slog.LevelWarn,
				"onceflow: a lease renewal did not return within half the safety margin after it was cancelled (the Store's Renew ignores its context); Execute returns without it and Executor.Drain waits for it",
				"waited", l.margin/2)
			l.e.background.Add(1)
			go func() {
				defer l.e.background.Done()
				if renewed != nil {
					<-renewed
				}
				if l.looped != nil {
					<-l.looped
				}
			}()
			return
		}
	}
}

// fire is the timer: the deadline when it is due, which always wins;
// otherwise the executor's renewal tick.
func (l *lease) fire() {
	l.mu.Lock()
	if l.done || l.stopped {
		l.mu.Unlock()
		return
	}
	if !time.Now().Before(l.deadlineLocked()) {
		l.mu.Unlock()
		l.finish(fmt.Errorf("%w: no renewal of %s confirmed before the lease ran out (less the %v safety margin)", ErrLeaseUnconfirmed, l.req.Ref, l.margin),
			"onceflow: lease not renewed in time; cancelling the action")
		return
	}
	if !l.ticked || l.renewing {
		// Woken early (the deadline moved, or ticks come from the
		// caller): wait for what is next.
		l.timer.Reset(l.nextWakeLocked())
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.renew() // arms the timer for the deadline while the renewal is in flight
}

// lose: a renewal proved the lease lost.
func (l *lease) lose(cause error) { l.finish(cause, "onceflow: lease lost; cancelling the action") }

// finish cancels the action with cause, once, unless the action returned.
func (l *lease) finish(cause error, msg string) {
	l.mu.Lock()
	if l.done || l.stopped {
		l.mu.Unlock()
		return
	}
	l.done = true
	l.timer.Stop()
	l.mu.Unlock()
	l.e.log(l.parent, l.req.Ref, l.req.Operation, slog.LevelWarn, msg, "cause", cause)
	l.e.countLostLease(context.WithoutCancel(l.parent), l.req.Ref.Code, cause)
	l.cancel(cause)
}

// extend moves the deadline after a confirmed renewal sent at sent, unless
// the deadline is already due: the deadline always wins.
func (l *lease) extend(sent time.Time, left time.Duration) {
	end := sent.Add(left)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || l.stopped || !end.After(l.end) || !time.Now().Before(l.deadlineLocked()) {
		return
	}
	l.end = end
}

// loop renews on the caller's ticks until stopped, or until the lease is
// lost or ran out. A tick that arrives while a renewal hangs is not read:
// the caller must not block on sending it.
func (l *lease) loop(ticks <-chan time.Time) {
	defer close(l.looped)
	for {
		select {
		case <-l.quit:
			return
		case <-ticks:
			if !l.renew() {
				return
			}
		}
	}
}

// renew sends one RENEW, unless one is in flight. It reports whether
// renewing should go on: false once the lease is lost, ran out or the
// action returned. While it waits for the store, the timer waits for the
// deadline alone; after, for the next tick.
func (l *lease) renew() (more bool) {
	l.mu.Lock()
	if l.done || l.stopped {
		l.mu.Unlock()
		return false
	}
	if l.renewing {
		l.mu.Unlock()
		return true
	}
	l.renewing = true
	renewed := make(chan struct{})
	l.renewed = renewed
	end := l.end
	if l.ticked {
		// Called by fire: the timer has fired. While the renewal is in
		// flight it waits for the deadline. (With the caller's ticks it
		// waits for the deadline all along.)
		l.timer.Reset(l.nextWakeLocked())
	}
	if l.rctx == nil {
		l.rctx, l.stopRenews = context.WithCancel(context.WithoutCancel(l.parent))
	}
	rctx := l.rctx
	l.mu.Unlock()
	defer func() {
		defer close(renewed)
		l.mu.Lock()
		l.renewing = false
		l.renewed = nil
		more = !l.done && !l.stopped
		// Re-arm for the next tick or the (perhaps moved) deadline; a
		// timer already firing checks the deadline itself.
		if more && l.timer.Stop() {
			l.timer.Reset(l.nextWakeLocked())
		}
		l.mu.Unlock()
	}()

	sent := time.Now()
	ctx, cancel := context.WithDeadline(rctx, end)
	out, err := l.e.store.Renew(ctx, l.req)
	cancel()
	if err != nil {
		l.mu.Lock()
		stopped := l.stopped
		l.mu.Unlock()
		// After the action returned, stop cancelled the renewal: its
		// failure says nothing about the lease.
		if !stopped {
			l.e.log(l.parent, l.req.Ref, l.req.Operation, slog.LevelWarn, "onceflow: lease renewal failed; will retry until the lease runs out", "err", err)
		}
		return true // the deferred function decides
	}
	switch o := out.(type) {
	case driver.Renewed:
		l.extend(sent, o.Record.LeaseRemaining())
	case driver.Refused:
		l.lose(fmt.Errorf("%w: renewal of %s refused (%s): owner attempt %d holds it in %s",
			ErrLeaseLost, l.req.Ref, o.Reason, o.Record.Attempt, o.Record.State))
	default:
		l.lose(fmt.Errorf("%w: renewal of %s: the record is gone", ErrLeaseLost, l.req.Ref))
	}
	return true // the deferred function decides
}
