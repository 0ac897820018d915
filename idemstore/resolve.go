package idemstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// Errors Resolve and Reopen return, besides the store's own. Match them
// with errors.Is.
var (
	// ErrResolveRefused: the record refused a resolution and nothing
	// changed: it moved on since the decision was taken (another resolver,
	// a new attempt), it is in a state the resolution does not apply to,
	// or it is gone.
	ErrResolveRefused = errors.New("idemstore: resolution refused")
	// ErrNoRecord: there is no record (never claimed, expired, released,
	// or under another key namespace).
	ErrNoRecord = errors.New("idemstore: no such record")
	// ErrNotReopenable: Reopen found a record that is neither FAILED nor
	// ABANDONED.
	ErrNotReopenable = errors.New("idemstore: only a FAILED or ABANDONED record is reopened")
)

// DefaultReopenReason is the reason Reopen records when none is given.
const DefaultReopenReason = "reopened by an operator"

// ResolveRefusedError is a resolution that changed nothing. It matches
// ErrResolveRefused, and ErrNoRecord when the record is gone; OutcomeOf
// classifies it as onceflow.OutcomeResolveRefused.
type ResolveRefusedError struct {
	Ref onceflow.Ref
	// Missing is true when there is no record.
	Missing bool
	// Reason is the store's refusal when the record exists.
	Reason driver.Refusal
	// Record is the record as it is now, when it exists.
	Record onceflow.Record
}

func (e *ResolveRefusedError) Error() string {
	if e.Missing {
		return fmt.Sprintf("idemstore: resolving %s refused: there is no record (expired, released or never created)", e.Ref)
	}
	r := e.Record
	return fmt.Sprintf("idemstore: resolving %s refused (%s): the record is now attempt %d rev %d in %s", e.Ref, e.Reason, r.Attempt, r.Rev, r.State)
}

// Is matches ErrResolveRefused, and ErrNoRecord when the record is gone.
func (e *ResolveRefusedError) Is(target error) bool {
	return target == ErrResolveRefused || target == ErrNoRecord && e.Missing
}

// Inspect reads the record ref names, changing nothing. Its errors are
// the store's (a *onceflow.StoreError matching onceflow.ErrUnavailable, a
// *onceflow.CorruptRecordError), classified by OutcomeOf like Execute's.
func (e *Executor) Inspect(ctx context.Context, ref onceflow.Ref) (driver.Observation, error) {
	if err := ref.Validate(); err != nil {
		return driver.Observation{}, err
	}
	return e.store.Inspect(ctx, ref)
}

// Resolve settles an ABANDONED record, or reopens a FAILED one, as
// compare-and-set on the attempt and revision the decision was taken on
// (req.Attempt, req.Rev): to COMPLETED (req.Response is replayed from
// then on), to FAILED_RETRYABLE (the next claim takes over) or to FAILED.
// A zero req.TTL is the executor's FailureRetention (ReplayTTL for
// COMPLETED), and a COMPLETED resolution without a Codec is stored under
// the executor's codec and policy revision. It returns the record as
// resolved; a re-sent resolution that had applied returns it too.
//
// A record that refuses the resolution, or is gone, is a
// *ResolveRefusedError; every other error is the store's. OutcomeOf
// classifies them all, as it does Execute's.
func (e *Executor) Resolve(ctx context.Context, req driver.ResolveRequest) (onceflow.Record, error) {
	c := e.cfg
	if req.Target == onceflow.StateCompleted && req.Codec == "" {
		req.Codec, req.Policy = c.Codec, c.PolicyRevision
	}
	if req.TTL == 0 {
		req.TTL = c.FailureRetention
		if req.Target == onceflow.StateCompleted {
			req.TTL = c.ReplayTTL
		}
	}
	out, err := e.store.Resolve(ctx, req)
	if err != nil {
		return onceflow.Record{}, err
	}
	switch o := out.(type) {
	case driver.Transitioned:
		return o.Record, nil
	case driver.AlreadyTransitioned:
		return o.Record, nil
	case driver.Refused:
		return onceflow.Record{}, &ResolveRefusedError{Ref: req.Ref, Reason: o.Reason, Record: o.Record}
	case driver.Missing:
		return onceflow.Record{}, &ResolveRefusedError{Ref: req.Ref, Missing: true}
	}
	return onceflow.Record{}, fmt.Errorf("%w: resolve outcome %T", onceflow.ErrUnexpectedReply, out)
}

// Reopen moves the record ref names from FAILED (a fail decision), or
// from ABANDONED when no workflow waits on it (an idemhttp key whose
// outcome an operator has found to be "no effect"), to FAILED_RETRYABLE,
// so the next attempt or request runs; reason ("" is
// DefaultReopenReason) says why. It returns the record as it was.
//
// A missing record is an error matching ErrNoRecord, one in another state
// ErrNotReopenable, one that moved on meanwhile a *ResolveRefusedError
// (run it again).
func (e *Executor) Reopen(ctx context.Context, ref onceflow.Ref, reason string) (onceflow.Record, error) {
	obs, err := e.Inspect(ctx, ref)
	if err != nil {
		return onceflow.Record{}, fmt.Errorf("idemstore: reopen: read %s: %w", ref, err)
	}
	if !obs.Found {
		return onceflow.Record{}, &ResolveRefusedError{Ref: ref, Missing: true}
	}
	r := obs.Record
	if r.State != onceflow.StateFailed && r.State != onceflow.StateAbandoned {
		return r, fmt.Errorf("%w: %s is %s: %w", ErrNotReopenable, ref, r.State, &ResolveRefusedError{Ref: ref, Reason: driver.RefusedState, Record: r})
	}
	if reason == "" {
		reason = DefaultReopenReason
	}
	_, err = e.Resolve(ctx, driver.ResolveRequest{Ref: ref, Attempt: r.Attempt, Rev: r.Rev, Target: onceflow.StateFailedRetryable,
		Reason: reason, TTL: max(r.TTL, time.Minute)})
	if err != nil {
		return r, fmt.Errorf("idemstore: reopen: %w", err)
	}
	return r, nil
}
