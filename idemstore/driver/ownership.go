package driver

import (
	"fmt"

	"github.com/onceflow/onceflow"
)

// ValidCodec reports whether codec may name the encoding of a response: 1 to
// 32 characters of [a-z0-9.-], the rule every request's Codec is checked by.
func ValidCodec(codec string) bool { return ValidateCodec(codec, 1) == nil }

// Ownership is what a claimant holds after a claim: the record it owns and
// the revision it last confirmed. Every transition presents it.
type Ownership struct {
	Ref       onceflow.Ref
	Operation onceflow.OperationID
	Owner     onceflow.Owner
	Attempt   int64
	Rev       int64
}

// Fence returns the ownership's fencing token, without an Epoch (an
// Ownership does not carry the record's creation time; the executor's
// Execution.Fence and Result.Fence do).
func (o Ownership) Fence() onceflow.Fence { return onceflow.Fence{Attempt: o.Attempt, Rev: o.Rev} }

// invalid is a request refused before anything was sent.
func invalid(field, format string, args ...any) error {
	return &onceflow.Error{Outcome: onceflow.OutcomeInvalid, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// truncate shortens a refused value for its error message.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
