package onceflowtest

import (
	"context"
	"sync"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
)

// Crash, called inside an activity that runs under Once.Interceptors,
// is the test's stand-in for the worker dying at that line: the attempt
// never returns, its heartbeats and lease renewals stop, and Temporal sees
// what it sees of a dead worker, a heartbeat timeout carrying the last
// heartbeat's details (onceflow's checkpoint), which its retry policy
// retries, or ends the call with. The record stays as the attempt left it
// (EXECUTING, its lease running out), so the next attempt meets what it
// meets after a real crash. Call it right after the effect to test a
// crash after the effect, before it for one before. The crashed attempt's
// goroutine ends with the test.
//
// Crash panics outside an activity run under Once.Interceptors.
func Crash(ctx context.Context) {
	p, ok := ctx.Value(crashKey{}).(*crashPoint)
	if !ok {
		panic("onceflowtest.Crash: not in an activity run under onceflowtest's interceptors (Attach, or Once.Interceptors)")
	}
	p.once.Do(func() { close(p.crashed) })
	<-p.release
}

// crashKey is the context key of an attempt's crashPoint.
type crashKey struct{}

// crashPoint is one attempt's: closed crashed when it crashes; the last
// details it heartbeated.
type crashPoint struct {
	once    sync.Once
	crashed chan struct{}
	release <-chan struct{}
	mu      sync.Mutex
	details []any
}

// crasher is the worker interceptor that runs each activity attempt so
// that Crash can end it as a dead worker's.
type crasher struct {
	interceptor.WorkerInterceptorBase
	release <-chan struct{}
}

func (c *crasher) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &crashInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, release: c.release}
}

type crashInbound struct {
	interceptor.ActivityInboundInterceptorBase
	release <-chan struct{}
}

func (c *crashInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	return c.Next.Init(&crashOutbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: outbound}})
}

func (c *crashInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	p := &crashPoint{crashed: make(chan struct{}), release: c.release}
	inner, cancel := context.WithCancel(context.WithValue(ctx, crashKey{}, p))
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := c.Next.ExecuteActivity(inner, in)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		cancel()
		return r.v, r.err
	case <-p.crashed:
		cancel() // the dead worker's heartbeats and renewals stop
		p.mu.Lock()
		details := p.details
		p.mu.Unlock()
		return nil, temporal.NewHeartbeatTimeoutError(details...)
	}
}

// crashOutbound keeps each attempt's last heartbeat details.
type crashOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
}

func (c *crashOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if p, ok := ctx.Value(crashKey{}).(*crashPoint); ok && len(details) > 0 {
		p.mu.Lock()
		p.details = details
		p.mu.Unlock()
	}
	c.Next.RecordHeartbeat(ctx, details...)
}
