package onceflow

import (
	"strings"
	"time"
	"unicode/utf8"
)

// State is the state of a record. See docs/state-machine.md.
type State string

// The record states.
const (
	// StateClaimed: an owner holds the lease; nothing has run yet.
	StateClaimed State = "CLAIMED"
	// StateExecuting: an invocation confirmed it is running the action;
	// its effect may happen at any moment.
	StateExecuting State = "EXECUTING"
	// StateCompleted: the action succeeded; its response is stored for
	// replay.
	StateCompleted State = "COMPLETED"
	// StateFailedRetryable: the action failed with no effect; the next
	// claim takes over at once.
	StateFailedRetryable State = "FAILED_RETRYABLE"
	// StateAbandoned: the effect's fate is unknown. Claims are refused with
	// AwaitingDecision until the record is resolved.
	StateAbandoned State = "ABANDONED"
	// StateFailed: a decision (an operator's, or a workflow's) failed the
	// operation for good. Claims are answered with OperationFailed, with
	// the reason, until the record is reopened (Resolve to
	// FAILED_RETRYABLE) or expires.
	StateFailed State = "FAILED"
)

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	switch s {
	case StateClaimed, StateExecuting, StateCompleted, StateFailedRetryable, StateAbandoned, StateFailed:
		return true
	}
	return false
}

// MaxReasonLen is the longest Reason a record holds, in bytes. A store
// refuses a stored record with a longer one as corrupt.
const MaxReasonLen = 1024

// ValidateReason checks a reason a caller gives (FailRequest.Reason,
// ResolveRequest.Reason): at most MaxReasonLen bytes and no NUL byte, the
// rule a stored reason is checked by ("" is no reason). A reason built
// from text the caller does not control, such as an error's message,
// should go through SanitizeReason first.
func ValidateReason(reason string) error {
	if len(reason) > MaxReasonLen {
		return invalid("Reason", "must be at most %d bytes, got %d (SanitizeReason shortens one)", MaxReasonLen, len(reason))
	}
	if i := strings.IndexByte(reason, 0); i >= 0 {
		return invalid("Reason", "must not contain a NUL byte, found one at byte %d (SanitizeReason replaces it)", i)
	}
	return nil
}

// SanitizeReason turns any text (an action's error message, a panic value)
// into a reason ValidateReason accepts: invalid UTF-8 and every NUL byte
// become U+FFFD, and text longer than MaxReasonLen bytes is cut on a rune
// boundary and ends in "...". Valid UTF-8 without a NUL byte, at most
// MaxReasonLen bytes long, is returned as it is.
func SanitizeReason(s string) string {
	if len(s) <= MaxReasonLen && strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	const ellipsis = "..."
	cut := len(s) > MaxReasonLen
	if cut {
		s = s[:MaxReasonLen] // nothing beyond it can be kept
	}
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if cut || len(s) > MaxReasonLen {
		i := min(MaxReasonLen-len(ellipsis), len(s))
		for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) { // s is valid UTF-8: at most 3 steps
			i--
		}
		s = s[:i] + ellipsis
	}
	return s
}

// Record is a decoded snapshot of a stored record, as the store saw it at
// ServerTime.
type Record struct {
	State       State
	Owner       Owner
	Attempt     int64 // claim attempt: 1, then +1 on each takeover
	Rev         int64 // revision: +1 on each confirmed transition
	Operation   OperationID
	Fingerprint Fingerprint
	Codec       string
	Policy      int
	LeaseUntil  time.Time // in the store's (Redis server's) clock
	Nonce       Nonce     // the invocation that started execution, if any
	Response    []byte    // only in replies that carry it (COMPLETED)
	Reason      string    // why FAILED_RETRYABLE / ABANDONED
	// EffectUnknown is set when an earlier attempt may have had an effect
	// that was never settled (the record was taken over from an expired
	// EXECUTING). It is cleared by COMPLETED and FAILED_RETRYABLE.
	EffectUnknown bool
	CreatedAt     time.Time
	UpdatedAt     time.Time

	// ServerTime is the store's clock when the snapshot was taken.
	ServerTime time.Time
	// TTL is the time the key has left before it expires.
	TTL time.Duration
}

// LeaseRemaining is the processing lease left at ServerTime, zero if expired.
func (r Record) LeaseRemaining() time.Duration {
	d := r.LeaseUntil.Sub(r.ServerTime)
	if d < 0 {
		return 0
	}
	return d
}

// Fence is the fencing token of the current ownership: it grows on every
// takeover and every confirmed transition, so a downstream store that keeps
// the highest token it has seen can reject a stale writer. Its Epoch is
// the record's creation time, so it grows across a loss of the record too.
func (r Record) Fence() Fence {
	return Fence{Epoch: epochOf(r.CreatedAt), Attempt: r.Attempt, Rev: r.Rev}
}

// epochOf is the Fence.Epoch of a record created at t: milliseconds of the
// store's clock, 0 when unknown.
func epochOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
