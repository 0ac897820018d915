package idemstore

import (
	"context"
	"fmt"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// defaultReopenReason is the reason Reopen records when none is given.
const defaultReopenReason = "reopened by an operator"

// Inspect reads the record ref names, changing nothing. Its errors are
// the store's: an *onceflow.Error of OutcomeStoreUnavailable or
// OutcomeCorrupt.
func (e *Executor) Inspect(ctx context.Context, ref onceflow.Ref) (driver.Observation, error) {
	if err := ref.Validate(); err != nil {
		return driver.Observation{}, err
	}
	obs, err := e.store.Inspect(ctx, ref)
	return obs, failure(err)
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
// A record that refuses the resolution fails with
// onceflow.OutcomeResolveRefused, one that is gone with
// onceflow.OutcomeNoRecord; every other failure is the store's.
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
		return onceflow.Record{}, failure(err)
	}
	switch o := out.(type) {
	case driver.Transitioned:
		return o.Record, nil
	case driver.AlreadyTransitioned:
		return o.Record, nil
	case driver.Refused:
		return onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeResolveRefused, Ref: req.Ref, Reason: string(o.Reason), Record: &o.Record}
	case driver.Missing:
		return onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeNoRecord, Ref: req.Ref}
	}
	return onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Op: "resolve", Ref: req.Ref, Reason: fmt.Sprintf("resolve outcome %T", out)}
}

// Reopen moves the record ref names from FAILED (a fail decision), or
// from ABANDONED when no workflow waits on it (an idemhttp key whose
// outcome an operator has found to be "no effect"), to FAILED_RETRYABLE,
// so the next attempt or request runs; reason ("" is "reopened by an
// operator") says why. It returns the record as it was.
//
// A missing record fails with onceflow.OutcomeNoRecord; one in another
// state, or one that moved on meanwhile (run it again), with
// onceflow.OutcomeResolveRefused.
func (e *Executor) Reopen(ctx context.Context, ref onceflow.Ref, reason string) (onceflow.Record, error) {
	obs, err := e.Inspect(ctx, ref)
	if err != nil {
		return onceflow.Record{}, fmt.Errorf("idemstore: reopen: read %s: %w", ref, err)
	}
	if !obs.Found {
		return onceflow.Record{}, &onceflow.Error{Outcome: onceflow.OutcomeNoRecord, Ref: ref, Reason: "reopen"}
	}
	r := obs.Record
	if r.State != onceflow.StateFailed && r.State != onceflow.StateAbandoned {
		return r, &onceflow.Error{Outcome: onceflow.OutcomeResolveRefused, Ref: ref, Reason: fmt.Sprintf("only a FAILED or ABANDONED record is reopened, and it is %s", r.State), Record: &r}
	}
	if reason == "" {
		reason = defaultReopenReason
	}
	_, err = e.Resolve(ctx, driver.ResolveRequest{Ref: ref, Attempt: r.Attempt, Rev: r.Rev, Target: onceflow.StateFailedRetryable,
		Reason: reason, TTL: max(r.TTL, time.Minute)})
	if err != nil {
		return r, fmt.Errorf("idemstore: reopen: %w", err)
	}
	return r, nil
}
