package driver

import (
	"context"
	"time"

	"github.com/onceflow/onceflow"
)

// ReferenceIndex is a Store that also indexes business references: which
// operation key first arrived with a reference (an order number, a
// transfer reference) within a window. It is optional; the executor's
// CheckReference uses it when the Store has it. The Redis store has it.
type ReferenceIndex interface {
	// ClaimReference makes req.Key the holder of req.Reference for
	// req.Window, unless the reference has a holder already, and returns
	// the holder: req.Key, or the key that arrived first. It is atomic on
	// one reference.
	ClaimReference(ctx context.Context, req ReferenceRequest) (holder string, err error)
	// NoteReuse appends a reuse ClaimReference found to the store's
	// trail of reuses, for the operator. Best effort.
	NoteReuse(ctx context.Context, reuse ReferenceReuse) error
}

// ReferenceRequest asks ClaimReference for a reference.
type ReferenceRequest struct {
	// Reference names the reference: the operation code, and a keyed
	// digest of the reference (onceflow.Digester.Digest), never the raw
	// reference.
	Reference onceflow.Ref
	// Key is the operation key (onceflow.Ref.String of the operation's
	// record) arriving with the reference.
	Key string
	// Window is how long the first holder keeps the reference.
	Window time.Duration
}

// ReferenceReuse is one reference that arrived under a second operation
// key within its window.
type ReferenceReuse struct {
	Reference onceflow.Ref
	// Holder is the operation key that arrived first; Key the second.
	Holder, Key string
	// Refused is true when the second operation was refused, false when
	// it was only flagged.
	Refused bool
	// At is when the store noted the reuse, by its clock; set on what a
	// store reads back, ignored by NoteReuse.
	At time.Time
}

// Validate checks a reference request.
func (r ReferenceRequest) Validate() error {
	if err := r.Reference.Validate(); err != nil {
		return err
	}
	if r.Key == "" {
		return invalid("Key", "must not be empty")
	}
	return validateTTL("Window", r.Window)
}
