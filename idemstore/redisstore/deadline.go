package redisstore

import (
	"context"
	"time"
)

// deadlineCtx is a call's context for a client that bounds its reads and
// writes by the context (ContextTimeoutEnabled): the caller's context with
// the command timeout as its deadline when that is earlier. It carries the
// deadline without a timer: go-redis sets each socket deadline from
// Deadline(), so a call's I/O stops there, and Err reports the deadline
// once it has passed. Done is the caller's: what only a timer would stop
// (a wait for a free connection of an exhausted pool, for a dial permit)
// stops at the caller's context or the client's own bound on it
// (PoolTimeout, DialTimeout). context.WithTimeout would cost a timer, its
// runtime lock and four allocations on every call.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

// withDeadline returns ctx bounded by timeout from now: ctx itself when its
// own deadline is earlier.
func withDeadline(ctx context.Context, timeout time.Duration) context.Context {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && !cd.After(d) {
		return ctx
	}
	return &deadlineCtx{Context: ctx, deadline: d}
}

// Deadline implements context.Context.
func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Err implements context.Context: the caller's error, or
// context.DeadlineExceeded once the deadline has passed.
func (c *deadlineCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}
