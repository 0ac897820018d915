package idemstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// lease keeps an invocation's processing lease while its action runs.
//
// Two things happen independently of each other:
//
//   - The deadline: a timer at the local time the lease ends, less the
//     safety margin, cancels the action with ErrLeaseUnconfirmed. It is
//     armed from the send time of the request that confirmed the lease, on
//     the monotonic clock, and fires whatever the store does: a renewal
//     that hangs, fails fast or answers late never holds it back. Only a
//     confirmed renewal moves it, and only while it has not fired.
//   - Renewal: on every tick (the executor's RenewInterval, or
//     Request.RenewTicks) one RENEW is sent, never two at once, with a
//     context that ends no later than the lease. Renewed moves the
//     deadline; Refused or Missing proves the lease lost and cancels the
//     action with ErrLeaseLost.
//
// The action's context is therefore done no later than the deadline,
// before any other owner can take the record over by Redis' clock (which
// runs at the rate of ours; the margin absorbs scheduling delays and
// small drifts).
type lease struct {
	v      *invocation
	req    RenewRequest
	cancel context.CancelCauseFunc // cancels the action
	margin time.Duration

	// rctx is the parent of every renewal's context; stopping cancels it.
	rctx       context.Context
	stopRenews context.CancelFunc

	mu       sync.Mutex
	end      time.Time   // the local time by which the lease runs out at the earliest
	deadline *time.Timer // fires at end - margin
	done     bool        // the deadline fired or the lease was lost: renewals no longer count
	stopped  bool        // the action returned
	renewing bool        // a RENEW is in flight
	ticker   *time.Timer // the executor's own renewal timer (nil with RenewTicks)
	quit     chan struct{}
}

// keepLease starts keeping the lease confirmed at v.sent (v.leaseEnd) for
// the action whose context cancel cancels.
func (v *invocation) keepLease(ctx context.Context, cancel context.CancelCauseFunc, own Ownership) *lease {
	c := v.e.cfg
	l := &lease{v: v, req: v.renewRequest(own), cancel: cancel, margin: c.SafetyMargin, end: v.leaseEnd}
	l.rctx, l.stopRenews = context.WithCancel(context.WithoutCancel(ctx))
	// The timers' functions take mu: they wait until both are set.
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = time.AfterFunc(time.Until(l.end.Add(-l.margin)), l.expire)
	if ticks := v.req.RenewTicks; ticks != nil {
		l.quit = make(chan struct{})
		go l.loop(ticks)
	} else {
		l.ticker = time.AfterFunc(c.RenewInterval, l.onTimer)
	}
	return l
}

// stop ends the keeping; a renewal in flight is abandoned (its context is
// cancelled) and its answer ignored. It does not wait for it.
func (l *lease) stop() {
	l.mu.Lock()
	l.stopped = true
	l.deadline.Stop()
	if l.ticker != nil {
		l.ticker.Stop()
	}
	l.mu.Unlock()
	if l.quit != nil {
		close(l.quit)
	}
	l.stopRenews()
}

// expire is the deadline: no renewal confirmed the lease in time.
func (l *lease) expire() {
	l.finish(fmt.Errorf("%w: no renewal of %s confirmed before the lease ran out (less the %v safety margin)", ErrLeaseUnconfirmed, l.req.Ref, l.margin),
		"onceflow: lease not renewed in time; cancelling the action")
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
	l.deadline.Stop()
	l.mu.Unlock()
	l.v.log.Warn(msg, "cause", cause)
	l.cancel(cause)
}

// extend moves the deadline after a confirmed renewal sent at sent, unless
// the deadline has already passed: the deadline always wins.
func (l *lease) extend(sent time.Time, left time.Duration) {
	end := sent.Add(left)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || l.stopped || !end.After(l.end) {
		return
	}
	if !time.Now().Before(l.end.Add(-l.margin)) || !l.deadline.Stop() {
		return // the deadline is due or firing: the action is being cancelled
	}
	l.end = end
	l.deadline.Reset(time.Until(end.Add(-l.margin)))
}

// onTimer is the executor's own renewal tick: renew, then arm the next.
func (l *lease) onTimer() {
	if !l.renew() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done && !l.stopped {
		l.ticker.Reset(l.v.e.cfg.RenewInterval)
	}
}

// loop renews on the caller's ticks until stopped, or until the lease is
// lost or ran out. A tick that arrives while a renewal hangs is not read:
// the caller must not block on sending it.
func (l *lease) loop(ticks <-chan time.Time) {
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
// action returned.
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
	end := l.end
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.renewing = false
		more = !l.done && !l.stopped
		l.mu.Unlock()
	}()

	sent := time.Now()
	ctx, cancel := context.WithDeadline(l.rctx, end)
	out, err := l.v.store().Renew(ctx, l.req)
	cancel()
	if err != nil {
		l.v.log.Warn("onceflow: lease renewal failed; will retry until the lease runs out", "err", err)
		return true // the deferred function decides
	}
	switch o := out.(type) {
	case Renewed:
		l.extend(sent, o.Record.LeaseRemaining())
	case Refused:
		l.lose(fmt.Errorf("%w: renewal of %s refused (%s): owner attempt %d holds it in %s",
			ErrLeaseLost, l.req.Ref, o.Reason, o.Record.Attempt, o.Record.State))
	default:
		l.lose(fmt.Errorf("%w: renewal of %s: the record is gone", ErrLeaseLost, l.req.Ref))
	}
	return true // the deferred function decides
}
