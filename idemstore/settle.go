package idemstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// writeCtx is the context for recording an outcome: the caller may have
// given up, but the outcome must still be written.
func writeCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// complete records the response. A lost reply, or one that does not
// decode, is verified with INSPECT; a success the store did not confirm is
// never reported.
func (v *invocation) complete(ctx context.Context, own driver.Ownership, resp []byte) (Result, error) {
	ctx = writeCtx(ctx)
	req := driver.CompleteRequest{Ownership: own, Nonce: v.nonce, Response: resp, TTL: v.e.cfg.ReplayTTL, Started: v.rec}
	ok := Result{Outcome: onceflow.OutcomeRan, Response: resp, Fence: v.fence(own)}
	recovery := func(reason string, err error) (Result, error) {
		v.log(ctx, slog.LevelError, "onceflow: the action succeeded but its result could not be recorded", "reason", reason, "err", err)
		return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeAwaitingDecision, Ref: own.Ref, Operation: own.Operation, Attempt: own.Attempt, Rev: own.Rev,
			State: onceflow.StateExecuting, Reason: "the action succeeded but " + reason, Err: err}
	}
	for try := 0; try < 2; try++ {
		out, err := v.store().Complete(ctx, req)
		if err == nil {
			switch o := out.(type) {
			case driver.Transitioned:
				ok.Fence = v.fence(o.Ownership)
				return ok, nil
			case driver.AlreadyTransitioned:
				if o.Record.Nonce == v.nonce {
					ok.Fence = v.fence(ownership(own.Ref, o.Record))
					return ok, nil
				}
				return recovery("another invocation completed the record", nil)
			case driver.Refused:
				return recovery(fmt.Sprintf("complete was refused (%s; the lease was lost)", o.Reason), nil)
			case driver.Missing:
				return recovery("the record is gone", nil)
			}
			return recovery("the store answered unexpectedly", &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Op: "complete", Ref: own.Ref, Reason: fmt.Sprintf("complete outcome %T", out)})
		}
		if errors.Is(err, onceflow.OutcomeInvalid) {
			// The effect happened, but the store refuses its response (too
			// large): it will never be recorded, so say so now rather
			// than leave the record EXECUTING until its lease runs out.
			return v.abandon(ctx, own, "the action succeeded but its response cannot be stored", err)
		}
		// Only a refused request proves nothing was sent. A lost reply,
		// and a reply that does not decode (OutcomeCorrupt), may follow a write that applied: INSPECT
		// tells.
		what := "complete was indeterminate"
		if !errors.Is(err, onceflow.OutcomeIndeterminate) {
			what = "complete's reply could not be read (" + err.Error() + ")"
		}
		obs, ierr := v.e.Inspect(ctx, own.Ref)
		if ierr != nil {
			return recovery(what+" and inspect failed", errors.Join(err, ierr))
		}
		r := obs.Record
		mine := obs.Found && r.Owner == own.Owner && r.Operation == own.Operation
		switch {
		case mine && r.State == onceflow.StateCompleted && bytes.Equal(r.Response, resp) && r.Nonce == v.nonce:
			ok.Fence = v.fence(ownership(own.Ref, r))
			return ok, nil
		case mine && r.State == onceflow.StateExecuting && r.Nonce == v.nonce:
			continue // not applied: complete again
		}
		return recovery(what+" and the record shows another outcome", err)
	}
	return recovery("complete stayed unconfirmed", nil)
}

// fail records FAILED_RETRYABLE or ABANDONED and verifies an indeterminate
// write, or one whose reply does not decode, with INSPECT before returning
// (seed flaw 6).
func (v *invocation) fail(ctx context.Context, own driver.Ownership, target onceflow.State, reason string) (recorded bool, rec onceflow.Record) {
	ctx = writeCtx(ctx)
	// The reason comes from an action's error text, a panic value or a
	// ReachedAction reason: sanitised, it is one the store accepts (no NUL, not too long).
	req := driver.FailRequest{Ownership: own, Nonce: v.nonce, Target: target, Reason: onceflow.SanitizeReason(reason), TTL: v.e.cfg.FailureRetention}
	for try := 0; try < 2; try++ {
		out, err := v.store().Fail(ctx, req)
		if err == nil {
			switch o := out.(type) {
			case driver.Transitioned:
				return true, o.Record
			case driver.AlreadyTransitioned:
				return true, o.Record
			case driver.Refused:
				return false, o.Record
			}
			return false, onceflow.Record{}
		}
		if errors.Is(err, onceflow.OutcomeInvalid) {
			v.log(ctx, slog.LevelError, "onceflow: the store refused to record the failure", "target", target, "err", err)
			return false, onceflow.Record{}
		}
		// A lost reply, or one that does not decode, may follow a write
		// that applied: INSPECT tells whether it was recorded.
		obs, ierr := v.e.Inspect(ctx, own.Ref)
		if ierr != nil {
			v.log(ctx, slog.LevelError, "onceflow: recording the failure is unconfirmed and inspect failed", "target", target, "err", errors.Join(err, ierr))
			return false, onceflow.Record{}
		}
		r := obs.Record
		mine := obs.Found && r.Owner == own.Owner && r.Operation == own.Operation
		switch {
		case mine && r.State == target:
			return true, r
		case mine && r.State == onceflow.StateExecuting && r.Nonce == v.nonce:
			continue // not applied: send it again
		}
		return false, r
	}
	return false, onceflow.Record{}
}

func (v *invocation) failRetryable(ctx context.Context, own driver.Ownership, cause error) (Result, error) {
	recorded, _ := v.fail(ctx, own, onceflow.StateFailedRetryable, cause.Error())
	return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeRetryable, Ref: own.Ref, Recorded: recorded, Err: cause}
}

func (v *invocation) abandon(ctx context.Context, own driver.Ownership, reason string, cause error) (Result, error) {
	full := reason
	if cause != nil {
		full += ": " + cause.Error()
	}
	recorded, r := v.fail(ctx, own, onceflow.StateAbandoned, full)
	v.log(ctx, slog.LevelWarn, "onceflow: effect unknown; record abandoned", "recorded", recorded, "reason", full)
	attempt, rev, state := own.Attempt, own.Rev, onceflow.StateExecuting
	if recorded {
		attempt, rev, state = r.Attempt, r.Rev, r.State
	}
	return Result{}, &onceflow.Error{Outcome: onceflow.OutcomeEffectUnknown, Ref: own.Ref, Operation: own.Operation, Attempt: attempt, Rev: rev, State: state,
		Recorded: recorded, Reason: reason, Err: cause, Since: v.since}
}
