package idemstore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// reachedSince is the earliest time an attempt of the operation may have
// reached the action, by the store's clock: the record's creation (no
// attempt can have acted before its record existed), or, when
// Request.ReachedAction names an earlier incarnation of a record the
// store lost, that incarnation's creation (its Fence.Epoch), whichever
// is earlier. It is at or before the first attempt that reached the
// downstream, so a window measured from it ends early, never late.
func (v *invocation) reachedSince(r onceflow.Record) time.Time {
	since := r.CreatedAt
	if d := v.req.ReachedAction; d != nil && d.Fence.Epoch > 0 {
		if e := time.UnixMilli(d.Fence.Epoch); since.IsZero() || e.Before(since) {
			since = e
		}
	}
	return since
}

// pastRetention says why a re-run of the action on record r would reach a
// downstream past Request.DownstreamRetention, or "" when it would not
// (no retention, or within it). Both ends are the store's clock: r's
// ServerTime and reachedSince.
func (v *invocation) pastRetention(r onceflow.Record) string {
	retention := v.req.DownstreamRetention
	if retention <= 0 || v.since.IsZero() {
		return ""
	}
	now := r.ServerTime
	if now.IsZero() {
		now = time.Now()
	}
	age := now.Sub(v.since)
	if age <= retention {
		return ""
	}
	return fmt.Sprintf("an earlier attempt may have reached the downstream %s ago (the record was created at %s by the store's clock), "+
		"past its retention of %s: the downstream may have forgotten the key and act again",
		age.Round(time.Second), v.since.UTC().Format(time.RFC3339), retention)
}

// refuseRerun refuses to run the action again past the downstream's
// retention: the record is abandoned, as a takeover without Reconcile
// would leave it, and the error says why, for a decision.
func (v *invocation) refuseRerun(ctx context.Context, own driver.Ownership, unknown, why string) (Result, error) {
	v.log(ctx, slog.LevelWarn, "onceflow: re-run refused: past the downstream's retention", "effect_unknown", unknown, "why", why)
	if m := v.e.metrics; m != nil {
		m.retentionRefusals.Add(ctx, 1, codeOption(own.Ref.Code))
	}
	res, err := v.abandon(ctx, own, unknown+"; re-run refused: "+why, nil)
	if eu, ok := err.(*onceflow.Error); ok {
		eu.RetentionPassed = true
	}
	return res, err
}
