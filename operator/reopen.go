package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

var (
	// ErrNoRecord: the record does not exist (never claimed, expired, or
	// another key namespace).
	ErrNoRecord = errors.New("operator: no such record")
	// ErrNotReopenable: the record is neither FAILED nor ABANDONED.
	ErrNotReopenable = errors.New("operator: only a FAILED or ABANDONED record is reopened")
)

// DefaultReopenReason is the reason Reopen records when none is given.
const DefaultReopenReason = "reopened by an operator"

// Reopen moves the record ref names from FAILED (a fail decision), or
// from ABANDONED when no workflow waits on it (an idemhttp key whose
// outcome an operator has found to be "no effect"), to FAILED_RETRYABLE,
// so the next attempt or request runs. It returns the record as it was.
//
// A missing record is ErrNoRecord, one in another state
// ErrNotReopenable; a record that moved on meanwhile is an error saying
// so (run it again).
func Reopen(ctx context.Context, store driver.Store, ref onceflow.Ref, reason string) (onceflow.Record, error) {
	obs, err := store.Inspect(ctx, ref)
	if err != nil {
		return onceflow.Record{}, fmt.Errorf("operator: reopen: read %s: %w", ref, err)
	}
	if !obs.Found {
		return onceflow.Record{}, fmt.Errorf("%w: %s", ErrNoRecord, ref)
	}
	r := obs.Record
	if r.State != onceflow.StateFailed && r.State != onceflow.StateAbandoned {
		return r, fmt.Errorf("%w: %s is %s", ErrNotReopenable, ref, r.State)
	}
	if reason == "" {
		reason = DefaultReopenReason
	}
	res, err := store.Resolve(ctx, driver.ResolveRequest{Ref: ref, Attempt: r.Attempt, Rev: r.Rev, Target: onceflow.StateFailedRetryable,
		Reason: reason, TTL: max(r.TTL, time.Minute)})
	if err != nil {
		return r, fmt.Errorf("operator: reopen %s: %w", ref, err)
	}
	switch o := res.(type) {
	case driver.Transitioned, driver.AlreadyTransitioned:
		return r, nil
	case driver.Refused:
		return r, fmt.Errorf("operator: reopen: %s moved on (%s); run it again", ref, o.Reason)
	case driver.Missing:
		return r, fmt.Errorf("%w: %s expired before it was reopened: there is nothing to reopen, the next attempt claims it afresh", ErrNoRecord, ref)
	default:
		return r, fmt.Errorf("operator: reopen %s: %w: %T", ref, onceflow.ErrUnexpectedReply, res)
	}
}
