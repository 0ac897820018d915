package onceflow

import (
	"fmt"
	"time"
)

// Outcome is the class of everything an idempotent call can end in: a
// result (OutcomeRan, OutcomeReplayed, OutcomeReconciled) or one kind of
// failure. It is the one table every adapter maps from: the activity
// wrapper to a Temporal ApplicationError type (TemporalType), the HTTP
// middleware to a status and problem, telemetry to the "onceflow.outcome"
// attribute, whose values these are.
//
// An Outcome is an error so that it can be matched with errors.Is: every
// error onceflow returns for a failure is an *Error, which matches its
// Outcome (errors.Is(err, onceflow.OutcomeInProgress)); errors.As gives
// the details.
type Outcome string

// The outcomes.
const (
	// OutcomeRan: the action ran and its result was recorded.
	OutcomeRan Outcome = "ran"
	// OutcomeReplayed: a recorded result was returned; nothing ran.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeReconciled: a takeover found the earlier attempt's effect.
	OutcomeReconciled Outcome = "reconciled"

	// OutcomeInProgress: another attempt holds the lease (Error.RetryAfter
	// is what it has left; Error.SameOwner when it is another delivery of
	// the same attempt). Retryable.
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeFingerprintMismatch: the scope was used with another input.
	// It can never succeed as sent.
	OutcomeFingerprintMismatch Outcome = "fingerprint_mismatch"
	// OutcomeOwnerConflict: the owner holds the record for another
	// operation. It can never succeed as sent.
	OutcomeOwnerConflict Outcome = "owner_conflict"
	// OutcomeCodecMismatch: the stored result was encoded with another
	// codec or policy revision, or does not decode into the result type.
	OutcomeCodecMismatch Outcome = "codec_mismatch"
	// OutcomeRetryable: the action failed with no effect; the record is
	// FAILED_RETRYABLE (Error.Recorded when the store confirmed it) and
	// the next attempt runs it again. Error.Err is the action's error.
	OutcomeRetryable Outcome = "retryable"
	// OutcomeNotStored: the action answered, with a response its caller
	// chose not to keep (an HTTP 202); the record is released as for
	// OutcomeRetryable, and an error of this outcome matches
	// OutcomeRetryable too.
	OutcomeNotStored Outcome = "not_stored"
	// OutcomeEffectUnknown: the effect's fate is unknown; the record is (or
	// is being made) ABANDONED and must be resolved. Error.Recorded says
	// whether the store confirmed ABANDONED.
	OutcomeEffectUnknown Outcome = "effect_unknown"
	// OutcomeAwaitingDecision: the record is already ABANDONED, or a result
	// could not be recorded: resolve it before retrying. An error of this
	// outcome matches OutcomeEffectUnknown too.
	OutcomeAwaitingDecision Outcome = "awaiting_decision"
	// OutcomeFailed: a decision failed the operation for good (FAILED); it
	// does not run again until the record is reopened. Error.Reason is
	// the decision's.
	OutcomeFailed Outcome = "failed"
	// OutcomeInvalid: the request was refused before anything was sent to
	// the store (Error.Field, Error.Reason). Nothing was written.
	OutcomeInvalid Outcome = "invalid"
	// OutcomeMisconfigured: the activity cannot run as registered or
	// scheduled: it has no heartbeat timeout, or it was started as a local
	// activity (no heartbeat to renew its lease). Nothing ran; fix the
	// workflow's ActivityOptions.
	OutcomeMisconfigured Outcome = "misconfigured"
	// OutcomeCorrupt: the record, or a reply about it, does not decode
	// (Error.Field, Error.Reason). The store refuses to act on it; an
	// operator must repair or delete the key.
	OutcomeCorrupt Outcome = "corrupt"
	// OutcomeCanceled: the caller's context ended before the store
	// answered.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeStoreUnavailable: a read failed, or a write reached Redis
	// after its deadline and refused itself (Error.Op): nothing changed,
	// but nothing was learnt either.
	OutcomeStoreUnavailable Outcome = "store_unavailable"
	// OutcomeIndeterminate: a call that may write failed without a reply
	// (Error.Op): the mutation may or may not have been applied; only an
	// Inspect, or the same request sent again, can tell.
	OutcomeIndeterminate Outcome = "indeterminate"
	// OutcomeResolveRefused: a resolution changed nothing: the record
	// moved on since the decision was taken (Error.Record is it now), or
	// is in a state the resolution does not apply to.
	OutcomeResolveRefused Outcome = "resolve_refused"
	// OutcomeNoRecord: there is no record (never claimed, expired,
	// released). An error of this outcome matches OutcomeResolveRefused
	// too.
	OutcomeNoRecord Outcome = "no_record"
	// OutcomeReferenceReused: a business reference arrived under a second
	// operation key within its window and was refused (Error.Holder holds
	// it; Error.Key arrived with it): a key derived from a volatile field,
	// or a new key per retry. See docs/guards.md#the-business-reference.
	OutcomeReferenceReused Outcome = "reference_reused"
	// OutcomeError: an error onceflow does not classify (a bug).
	OutcomeError Outcome = "error"
)

// outcomeInfo is one row of the outcome table.
type outcomeInfo struct {
	// temporalType is the ApplicationError type the activity wrapper
	// raises for the outcome; retryable says whether it is retryable.
	temporalType string
	retryable    bool
	// text is the outcome's sentence, what Error says.
	text string
}

// outcomes is the table: every outcome, in the order Outcomes returns.
var outcomes = []struct {
	o Outcome
	outcomeInfo
}{
	{OutcomeRan, outcomeInfo{"", false, "the action ran"}},
	{OutcomeReplayed, outcomeInfo{"", false, "a recorded result was replayed"}},
	{OutcomeReconciled, outcomeInfo{"", false, "an earlier attempt's effect was found"}},
	{OutcomeInProgress, outcomeInfo{"onceflow.InProgress", true, "operation in progress"}},
	{OutcomeFingerprintMismatch, outcomeInfo{"onceflow.FingerprintMismatch", false, "fingerprint mismatch"}},
	{OutcomeOwnerConflict, outcomeInfo{"onceflow.OwnerOperationConflict", false, "owner/operation conflict"}},
	{OutcomeCodecMismatch, outcomeInfo{"onceflow.CodecMismatch", false, "codec mismatch"}},
	{OutcomeRetryable, outcomeInfo{"onceflow.RetryableNoEffect", true, "failed with no effect; retry"}},
	{OutcomeNotStored, outcomeInfo{"onceflow.RetryableNoEffect", true, "response not stored"}},
	{OutcomeEffectUnknown, outcomeInfo{"onceflow.EffectUnknown", false, "effect unknown"}},
	{OutcomeAwaitingDecision, outcomeInfo{"onceflow.EffectUnknown", false, "awaiting a decision"}},
	{OutcomeFailed, outcomeInfo{"onceflow.OperationFailed", false, "operation failed by decision"}},
	{OutcomeInvalid, outcomeInfo{"onceflow.InvalidInput", false, "invalid input"}},
	{OutcomeMisconfigured, outcomeInfo{"onceflow.Misconfigured", false, "activity misconfigured"}},
	{OutcomeCorrupt, outcomeInfo{"onceflow.CorruptRecord", false, "corrupt record"}},
	{OutcomeCanceled, outcomeInfo{"onceflow.Canceled", true, "canceled"}},
	{OutcomeStoreUnavailable, outcomeInfo{"onceflow.StoreUnavailable", true, "store unavailable"}},
	{OutcomeIndeterminate, outcomeInfo{"onceflow.StoreUnavailable", true, "outcome indeterminate"}},
	{OutcomeResolveRefused, outcomeInfo{"onceflow.ResolveRefused", false, "resolution refused"}},
	{OutcomeNoRecord, outcomeInfo{"onceflow.ResolveRefused", false, "no such record"}},
	{OutcomeReferenceReused, outcomeInfo{"onceflow.ReferenceReused", false, "business reference reused under another operation key"}},
	{OutcomeError, outcomeInfo{"onceflow.Internal", true, "internal error"}},
}

func (o Outcome) info() outcomeInfo {
	for _, row := range outcomes {
		if row.o == o {
			return row.outcomeInfo
		}
	}
	return outcomeInfo{"onceflow.Internal", true, string(o)}
}

// Outcomes returns every outcome, the successful ones first, so an
// adapter's test can check that its table maps each failure.
func Outcomes() []Outcome {
	all := make([]Outcome, len(outcomes))
	for i, row := range outcomes {
		all[i] = row.o
	}
	return all
}

// Succeeded reports whether o is a result rather than a failure.
func (o Outcome) Succeeded() bool {
	return o == OutcomeRan || o == OutcomeReplayed || o == OutcomeReconciled
}

// Error returns the outcome's name, as String would ("in_progress"): an
// Outcome is an error so that errors.Is(err, o) can match it, and prints
// as its name wherever it is formatted.
func (o Outcome) Error() string { return string(o) }

// TemporalType is the stable ApplicationError type the activity wrapper
// raises for a failure of this outcome ("onceflow.EffectUnknown"); ""
// for a result. Workflows match on it (temporal.ApplicationError.Type())
// and may list the non-retryable ones in
// RetryPolicy.NonRetryableErrorTypes. Outcomes a workflow need not tell
// apart share one: OutcomeNotStored is "onceflow.RetryableNoEffect",
// OutcomeAwaitingDecision "onceflow.EffectUnknown",
// OutcomeIndeterminate "onceflow.StoreUnavailable", OutcomeNoRecord
// "onceflow.ResolveRefused".
func (o Outcome) TemporalType() string { return o.info().temporalType }

// Retryable reports whether the activity wrapper raises a failure of this
// outcome as retryable.
func (o Outcome) Retryable() bool { return o.info().retryable }

// OutcomeOfTemporalType returns the outcome a Temporal ApplicationError
// type names: the first in Outcomes with that TemporalType.
func OutcomeOfTemporalType(t string) (Outcome, bool) {
	for _, row := range outcomes {
		if row.temporalType == t && t != "" {
			return row.o, true
		}
	}
	return "", false
}

// Error is every failure onceflow returns: Outcome says which, and the
// fields that outcome documents carry the details; the others are zero.
// It matches its Outcome with errors.Is (and the broader outcome for
// OutcomeAwaitingDecision, OutcomeNotStored and OutcomeNoRecord), and
// unwraps to its cause.
type Error struct {
	Outcome Outcome
	// Ref names the record, when there is one.
	Ref Ref
	// Op is the store call that failed: "claim", "start", "renew", …
	// (OutcomeStoreUnavailable, OutcomeIndeterminate, OutcomeCorrupt).
	Op string
	// Field is the input or record field at fault (OutcomeInvalid,
	// OutcomeCorrupt).
	Field string
	// Reason is why, in words: the refused input's problem, a corrupt
	// field's, a conflict's detail, why an effect is unknown, a failing
	// decision's reason, the store's refusal of a resolution.
	Reason string
	// RetryAfter is the lease the running attempt has left, and SameOwner
	// is set when it is another delivery of the same attempt
	// (OutcomeInProgress).
	RetryAfter time.Duration
	SameOwner  bool
	// Recorded is set when the store confirmed the state the outcome
	// leaves: ABANDONED (OutcomeEffectUnknown), FAILED_RETRYABLE
	// (OutcomeRetryable, OutcomeNotStored). False when that write could
	// not be verified.
	Recorded bool
	// Operation, Attempt, Rev and State are the record's, as last
	// confirmed (OutcomeEffectUnknown, OutcomeAwaitingDecision).
	Operation OperationID
	Attempt   int64
	Rev       int64
	State     State
	// Since is the earliest time an attempt may have reached the action,
	// by the store's clock; zero when the record was not read.
	// RetentionPassed is set when a re-run was refused because Since is
	// further back than the downstream's retention
	// (OutcomeEffectUnknown).
	Since           time.Time
	RetentionPassed bool
	// Record is the record as it is now (OutcomeResolveRefused).
	Record *Record
	// Holder is the operation key that arrived first with a business
	// reference and Key this operation's (OutcomeReferenceReused; Ref
	// names the reference).
	Holder, Key string
	// Err is the cause: the transport error, the action's own error, the
	// context's.
	Err error
}

// Error says what happened and what to do about it.
func (e *Error) Error() string {
	prefix := "onceflow: "
	var msg string
	switch e.Outcome {
	case OutcomeInvalid:
		msg = "invalid " + e.Field + ": " + e.Reason
	case OutcomeCorrupt:
		if e.Field == "" {
			msg = fmt.Sprintf("unexpected reply to %s %s: %s", e.Op, e.Ref, e.Reason)
		} else {
			msg = fmt.Sprintf("corrupt record %s: field %q %s; repair or delete the key by hand", e.Ref, e.Field, e.Reason)
		}
	case OutcomeIndeterminate:
		msg = fmt.Sprintf("%s %s: INDETERMINATE (the call may have been applied; inspect the record before acting)", e.Op, e.Ref)
	case OutcomeStoreUnavailable:
		msg = fmt.Sprintf("%s %s: UNAVAILABLE (nothing was changed)", e.Op, e.Ref)
	case OutcomeInProgress:
		who := "another owner"
		if e.SameOwner {
			who = "another invocation of the same attempt"
		}
		msg = fmt.Sprintf("%s is being executed by %s; retry after %v", e.Ref, who, e.RetryAfter)
	case OutcomeFingerprintMismatch, OutcomeOwnerConflict, OutcomeCodecMismatch:
		msg = fmt.Sprintf("%s: %s: %s", e.Outcome.info().text, e.Ref, e.Reason)
	case OutcomeEffectUnknown, OutcomeAwaitingDecision:
		msg = fmt.Sprintf("effect of %s (attempt %d, rev %d) unknown: %s", e.Ref, e.Attempt, e.Rev, e.Reason)
		if e.Recorded {
			msg += "; the record is ABANDONED: resolve it (to COMPLETED with the real result, or to FAILED_RETRYABLE to run again)"
		} else {
			msg += "; the record's state could not be confirmed: inspect it before resolving"
		}
	case OutcomeFailed:
		msg = fmt.Sprintf("%s was failed by decision (%s); it does not run again until the record is reopened (resolve it to FAILED_RETRYABLE, or `worker reopen`)", e.Ref, e.Reason)
	case OutcomeRetryable:
		msg = fmt.Sprintf("%s failed with no effect (recorded: %v); retry", e.Ref, e.Recorded)
	case OutcomeNotStored:
		msg = fmt.Sprintf("%s answered with a response that is not stored (recorded: %v); the next request runs it again", e.Ref, e.Recorded)
	case OutcomeResolveRefused:
		msg = fmt.Sprintf("resolving %s refused", e.Ref)
		if e.Reason != "" {
			msg += " (" + e.Reason + ")"
		}
		if r := e.Record; r != nil {
			msg += fmt.Sprintf(": the record is now attempt %d rev %d in %s", r.Attempt, r.Rev, r.State)
		}
	case OutcomeNoRecord:
		msg = fmt.Sprintf("%s: there is no record (expired, released or never created)", e.Ref)
		if e.Reason != "" {
			msg = e.Reason + ": " + msg
		}
	case OutcomeReferenceReused:
		msg = fmt.Sprintf("the business reference %s arrived with operation key %s, but %s holds it: "+
			"two keys for one business operation, and the downstream would see two requests. Derive the key from the "+
			"operation's stable identity, never from a timestamp or a per-retry value (docs/guards.md#the-business-reference)",
			e.Ref, e.Key, e.Holder)
	default:
		msg = e.Outcome.info().text
		if e.Reason != "" {
			msg += ": " + e.Reason
		}
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return prefix + msg
}

// Is matches e's Outcome, and the broader outcome of a narrower one:
// OutcomeEffectUnknown for OutcomeAwaitingDecision, OutcomeRetryable for
// OutcomeNotStored, OutcomeResolveRefused for OutcomeNoRecord.
func (e *Error) Is(target error) bool {
	o, ok := target.(Outcome)
	if !ok {
		return false
	}
	switch {
	case o == e.Outcome:
		return true
	case o == OutcomeEffectUnknown:
		return e.Outcome == OutcomeAwaitingDecision
	case o == OutcomeRetryable:
		return e.Outcome == OutcomeNotStored
	case o == OutcomeResolveRefused:
		return e.Outcome == OutcomeNoRecord
	}
	return false
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func invalid(field, format string, args ...any) error {
	return &Error{Outcome: OutcomeInvalid, Field: field, Reason: fmt.Sprintf(format, args...)}
}
