package idemstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// ErrReferenceReused matches a *ReferenceReusedError.
var ErrReferenceReused = errors.New("idemstore: business reference reused under another operation key")

// ReferenceReusedError is a business reference that arrived under a second
// operation key within its window, refused (ReferenceCheck.Refuse). It
// matches ErrReferenceReused.
type ReferenceReusedError struct {
	// Reference names the reference (code and digest, never the raw
	// reference).
	Reference onceflow.Ref
	// Holder is the operation key that arrived first with it; Key is this
	// operation's.
	Holder, Key string
}

func (e *ReferenceReusedError) Error() string {
	return fmt.Sprintf("idemstore: the business reference %s arrived with operation key %s, but %s holds it: "+
		"two keys for one business operation, and the downstream would see two requests. Derive the key from the "+
		"operation's stable identity, never from a timestamp or a per-retry value (docs/guards.md#the-business-reference)",
		e.Reference, e.Key, e.Holder)
}

// Is matches ErrReferenceReused.
func (e *ReferenceReusedError) Is(target error) bool { return target == ErrReferenceReused }

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
// *ReferenceReusedError (action=refused). The same key arriving again is
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
		m.referenceReuses.Add(ctx, 1, metric.WithAttributes(LabelOperationCode.String(string(c.Reference.Code)), LabelAction.String(action)))
	}
	if nerr := idx.NoteReuse(ctx, driver.ReferenceReuse{Reference: c.Reference, Holder: holder, Key: c.Key, Refused: c.Refuse}); nerr != nil {
		e.log(ctx, c.Reference, "", slog.LevelWarn, "onceflow: could not append the reuse to the store's trail", "err", nerr)
	}
	if c.Refuse {
		return true, &ReferenceReusedError{Reference: c.Reference, Holder: holder, Key: c.Key}
	}
	return true, nil
}
