package onceflow

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; the concrete types below carry
// the details.
var (
	// ErrInvalidInput: a request was refused before anything was sent to
	// the store. Nothing was written.
	ErrInvalidInput = errors.New("idemstore: invalid input")
	// ErrIndeterminate: a mutating call failed without a reply. The
	// mutation may or may not have been applied; only an Inspect (or a
	// re-send of the same request) can tell.
	ErrIndeterminate = errors.New("idemstore: outcome indeterminate")
	// ErrUnavailable: a read-only call failed. Nothing was changed, but
	// nothing was learnt either.
	ErrUnavailable = errors.New("idemstore: store unavailable")
	// ErrCorruptRecord: the stored record does not decode (a field missing
	// or malformed). The store refuses to act on it; an operator must
	// repair or delete the key.
	ErrCorruptRecord = errors.New("idemstore: corrupt record")
	// ErrUnexpectedReply: the store answered with something no script
	// replies. It is never guessed at.
	ErrUnexpectedReply = errors.New("idemstore: unexpected reply")
)

// ValidationError says which input was refused and why. It matches
// ErrInvalidInput.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	return "idemstore: invalid " + e.Field + ": " + e.Reason
}

// Is reports whether target is ErrInvalidInput.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidInput }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Certainty says what a failed store call proves.
type Certainty string

const (
	// Indeterminate: a mutation may have been applied.
	Indeterminate Certainty = "INDETERMINATE"
	// Unavailable: a read failed; nothing changed.
	Unavailable Certainty = "UNAVAILABLE"
)

// StoreError is a failed store call: the transport error and what it
// proves. It matches ErrIndeterminate or ErrUnavailable by its Certainty and
// unwraps to the transport error.
type StoreError struct {
	Op        string // the script: "claim", "start", "renew", …
	Ref       Ref
	Certainty Certainty
	Err       error
}

func (e *StoreError) Error() string {
	what := "the call may have been applied; inspect the record before acting"
	if e.Certainty == Unavailable {
		what = "nothing was changed"
	}
	return fmt.Sprintf("idemstore: %s %s: %s (%s): %v", e.Op, e.Ref, e.Certainty, what, e.Err)
}

// Is matches ErrIndeterminate or ErrUnavailable by certainty.
func (e *StoreError) Is(target error) bool {
	switch target {
	case ErrIndeterminate:
		return e.Certainty == Indeterminate
	case ErrUnavailable:
		return e.Certainty == Unavailable
	}
	return false
}

// Unwrap returns the transport error.
func (e *StoreError) Unwrap() error { return e.Err }

// CorruptRecordError reports a stored record that does not decode. It
// matches ErrCorruptRecord.
type CorruptRecordError struct {
	Ref    Ref
	Field  string
	Reason string
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("idemstore: corrupt record %s: field %q %s; repair or delete the key by hand", e.Ref, e.Field, e.Reason)
}

// Is reports whether target is ErrCorruptRecord.
func (e *CorruptRecordError) Is(target error) bool { return target == ErrCorruptRecord }
