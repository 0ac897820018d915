package storetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// Method names a Store method, for fault injection.
type Method string

// The Store methods.
const (
	MethodClaim      Method = "claim"
	MethodClaimStart Method = "claim+start"
	MethodStart      Method = "start"
	MethodComplete   Method = "complete"
	MethodFail       Method = "fail"
	MethodRenew      Method = "renew"
	MethodRelease    Method = "release"
	MethodInspect    Method = "inspect"
	MethodResolve    Method = "resolve"
)

// Fault is what a FaultyStore does to one call.
type Fault int

const (
	// ErrorBeforeApply fails the call without reaching the store: the
	// caller gets the error a lost connection gives (Indeterminate for a
	// mutation, Unavailable for Inspect), and nothing was applied.
	ErrorBeforeApply Fault = iota + 1
	// LoseReplyAfterApply applies the call, then throws the reply away and
	// returns the same error: the caller cannot tell the two apart.
	LoseReplyAfterApply
	// CorruptReplyAfterApply applies the call, then answers as a store
	// does whose reply it cannot decode: a *onceflow.Error (not
	// Indeterminate). The call applied; only an Inspect can tell.
	CorruptReplyAfterApply
)

// ErrInjected is the transport error of injected faults.
var ErrInjected = errors.New("storetest: injected fault")

// FaultyStore wraps a Store and injects faults into chosen calls. It is
// safe for concurrent use.
type FaultyStore struct {
	inner driver.Store
	mu    sync.Mutex
	plan  map[Method][]Fault
	calls map[Method]int
	hooks map[Method]func()
}

var _ driver.Store = (*FaultyStore)(nil)

// NewFaultyStore wraps s; without injected faults it passes every call on.
func NewFaultyStore(s driver.Store) *FaultyStore {
	return &FaultyStore{inner: s, plan: map[Method][]Fault{}, calls: map[Method]int{}, hooks: map[Method]func(){}}
}

// Inject queues faults for the next calls of m, one fault per call.
func (f *FaultyStore) Inject(m Method, faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan[m] = append(f.plan[m], faults...)
}

// InjectAlways makes every further call of m fail with fault (until Clear).
func (f *FaultyStore) InjectAlways(m Method, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan[m] = []Fault{-fault}
}

// CommandTimeout is the wrapped store's, when it reports one
// (driver.TimeBounded), so an executor over a FaultyStore checks its
// safety margin as it would over the store itself; 0 otherwise.
func (f *FaultyStore) CommandTimeout() time.Duration {
	if tb, ok := f.inner.(driver.TimeBounded); ok {
		return tb.CommandTimeout()
	}
	return 0
}

// Clear removes every queued fault.
func (f *FaultyStore) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan = map[Method][]Fault{}
}

// OnCall runs hook at the start of every call of m (before any fault).
func (f *FaultyStore) OnCall(m Method, hook func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks[m] = hook
}

// Calls counts the calls of m so far.
func (f *FaultyStore) Calls(m Method) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[m]
}

func (f *FaultyStore) next(m Method) Fault {
	f.mu.Lock()
	f.calls[m]++
	hook := f.hooks[m]
	var fault Fault
	if q := f.plan[m]; len(q) > 0 {
		if q[0] < 0 {
			fault = -q[0]
		} else {
			fault, f.plan[m] = q[0], q[1:]
		}
	}
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return fault
}

func injected(m Method, ref onceflow.Ref) error {
	c := onceflow.OutcomeIndeterminate
	if m == MethodInspect {
		c = onceflow.OutcomeStoreUnavailable
	}
	return &onceflow.Error{Outcome: c, Op: string(m), Ref: ref, Err: ErrInjected}
}

// call applies the fault plan around one call.
func call[T any](f *FaultyStore, m Method, ref onceflow.Ref, do func() (T, error)) (T, error) {
	var zero T
	switch f.next(m) {
	case ErrorBeforeApply:
		return zero, injected(m, ref)
	case LoseReplyAfterApply:
		if _, err := do(); err != nil {
			return zero, err
		}
		return zero, injected(m, ref)
	case CorruptReplyAfterApply:
		if _, err := do(); err != nil {
			return zero, err
		}
		return zero, &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Ref: ref, Field: "(reply)", Reason: "does not decode (storetest: injected fault)"}
	}
	return do()
}

// Claim implements driver.Store.
func (f *FaultyStore) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimOutcome, error) {
	return call(f, MethodClaim, req.Ref, func() (driver.ClaimOutcome, error) { return f.inner.Claim(ctx, req) })
}

// ClaimStart implements driver.Store.
func (f *FaultyStore) ClaimStart(ctx context.Context, req driver.ClaimRequest) (driver.ClaimOutcome, error) {
	return call(f, MethodClaimStart, req.Ref, func() (driver.ClaimOutcome, error) { return f.inner.ClaimStart(ctx, req) })
}

// Start implements driver.Store.
func (f *FaultyStore) Start(ctx context.Context, req driver.StartRequest) (driver.TransitionOutcome, error) {
	return call(f, MethodStart, req.Ownership.Ref, func() (driver.TransitionOutcome, error) { return f.inner.Start(ctx, req) })
}

// Complete implements driver.Store.
func (f *FaultyStore) Complete(ctx context.Context, req driver.CompleteRequest) (driver.TransitionOutcome, error) {
	return call(f, MethodComplete, req.Ownership.Ref, func() (driver.TransitionOutcome, error) { return f.inner.Complete(ctx, req) })
}

// Fail implements driver.Store.
func (f *FaultyStore) Fail(ctx context.Context, req driver.FailRequest) (driver.TransitionOutcome, error) {
	return call(f, MethodFail, req.Ownership.Ref, func() (driver.TransitionOutcome, error) { return f.inner.Fail(ctx, req) })
}

// Renew implements driver.Store.
func (f *FaultyStore) Renew(ctx context.Context, req driver.RenewRequest) (driver.RenewOutcome, error) {
	return call(f, MethodRenew, req.Ref, func() (driver.RenewOutcome, error) { return f.inner.Renew(ctx, req) })
}

// Release implements driver.Store.
func (f *FaultyStore) Release(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseOutcome, error) {
	return call(f, MethodRelease, req.Ownership.Ref, func() (driver.ReleaseOutcome, error) { return f.inner.Release(ctx, req) })
}

// Inspect implements driver.Store.
func (f *FaultyStore) Inspect(ctx context.Context, ref onceflow.Ref) (driver.Observation, error) {
	return call(f, MethodInspect, ref, func() (driver.Observation, error) { return f.inner.Inspect(ctx, ref) })
}

// Resolve implements driver.Store.
func (f *FaultyStore) Resolve(ctx context.Context, req driver.ResolveRequest) (driver.ResolveOutcome, error) {
	return call(f, MethodResolve, req.Ref, func() (driver.ResolveOutcome, error) { return f.inner.Resolve(ctx, req) })
}
