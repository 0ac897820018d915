package idemstore

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// ReferenceCheck is one CheckReference.
type ReferenceCheck struct {
	// Reference names the business reference: the operation code and a
	// keyed digest of the reference (onceflow.Digester.Digest).
	Reference onceflow.Ref
	// Key is the operation key arriving with it (the record's
	// onceflow.Ref.String).
	Key string
	// Window is how long the first key holds the reference.
	Window time.Duration
	// Refuse makes a reuse an error; otherwise it is flagged only.
	Refuse bool
}

// CheckReference records that c.Key arrived with the business reference
// c.Reference, and says whether another operation key arrived with it
// first, within c.Window: a key derived from a volatile field (a
// timestamp), or a new key per retry. Such a reuse is flagged (a warning
// line, onceflow.reference_reuses{action=flagged}, an entry in the
// store's trail of reuses) and, with c.Refuse, returned as a
// *onceflow.Error of onceflow.OutcomeReferenceReused (action=refused). The same key arriving again is
// no reuse. A Store without a reference index (driver.ReferenceIndex)
// checks nothing: ok is false then.
func (e *Executor) CheckReference(ctx context.Context, c ReferenceCheck) (ok bool, err error) {
	idx, has := e.cfg.Store.(driver.ReferenceIndex)
	if !has {
		return false, nil
	}
	holder, err := idx.ClaimReference(ctx, driver.ReferenceRequest{Reference: c.Reference, Key: c.Key, Window: c.Window})
	if err != nil || holder == c.Key {
		return err == nil, err
	}
	action := "flagged"
	if c.Refuse {
		action = "refused"
	}
	e.log(ctx, c.Reference, "", slog.LevelWarn, "onceflow: business reference reused under another operation key",
		"action", action, "holder", holder, "key", c.Key, "window", c.Window)
	if m := e.metrics; m != nil {
		m.referenceReuses.Add(ctx, 1, metric.WithAttributes(labelOperationCode.String(string(c.Reference.Code)), labelAction.String(action)))
	}
	if nerr := idx.NoteReuse(ctx, driver.ReferenceReuse{Reference: c.Reference, Holder: holder, Key: c.Key, Refused: c.Refuse}); nerr != nil {
		e.log(ctx, c.Reference, "", slog.LevelWarn, "onceflow: could not append the reuse to the store's trail", "err", nerr)
	}
	if c.Refuse {
		return true, &onceflow.Error{Outcome: onceflow.OutcomeReferenceReused, Ref: c.Reference, Holder: holder, Key: c.Key}
	}
	return true, nil
}
