package idemstore

import (
	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// The types an application shares with the store, defined in package
// driver (see its documentation for each).
type (
	// Store is a store of idempotency records (driver.Store).
	Store = driver.Store
	// Ref names one record: an OperationCode and a ScopeDigest.
	Ref = driver.Ref
	// OperationCode names the kind of operation ("charge-payment").
	OperationCode = driver.OperationCode
	// ScopeDigest is the versioned HMAC of a record's raw scope.
	ScopeDigest = driver.ScopeDigest
	// Digester computes scope digests and operation IDs under a secret.
	Digester = driver.Digester
	// OperationID names one logical operation: all its retries.
	OperationID = driver.OperationID
	// Owner names one claimant (one retained attempt).
	Owner = driver.Owner
	// Fingerprint is the digest of a request's identifying content.
	Fingerprint = driver.Fingerprint
	// Ownership is what a confirmed claim hands the action's side.
	Ownership = driver.Ownership
	// Record is a record as the store holds it.
	Record = driver.Record
	// State is a record's state.
	State = driver.State
	// Fence is a fencing token (onceflow.Fence).
	Fence = onceflow.Fence
	// StoreError is a store call that failed; its Certainty says what it
	// proves.
	StoreError = driver.StoreError
	// Certainty says what a failed store call proves.
	Certainty = driver.Certainty
	// ValidationError is a request refused before anything was sent.
	ValidationError = driver.ValidationError
	// CorruptRecordError is a record, or a reply about it, that breaks
	// the schema.
	CorruptRecordError = driver.CorruptRecordError
)

// The states of a record (driver.State).
const (
	StateClaimed         = driver.StateClaimed
	StateExecuting       = driver.StateExecuting
	StateCompleted       = driver.StateCompleted
	StateFailedRetryable = driver.StateFailedRetryable
	StateAbandoned       = driver.StateAbandoned
	StateFailed          = driver.StateFailed
)

// What a failed store call proves (driver.Certainty).
const (
	Indeterminate = driver.Indeterminate
	Unavailable   = driver.Unavailable
)

// Limits (driver).
const (
	MaxOperationIDLen       = driver.MaxOperationIDLen
	MaxReasonLen            = driver.MaxReasonLen
	DefaultMaxResponseBytes = driver.DefaultMaxResponseBytes
)

// The store's error sentinels (driver); errors.Is finds them in a
// *StoreError, *ValidationError or *CorruptRecordError.
var (
	ErrInvalidInput    = driver.ErrInvalidInput
	ErrIndeterminate   = driver.ErrIndeterminate
	ErrUnavailable     = driver.ErrUnavailable
	ErrCorruptRecord   = driver.ErrCorruptRecord
	ErrUnexpectedReply = driver.ErrUnexpectedReply
)

// NewDigester returns a Digester for secret, under digest version version
// (driver.NewDigester).
func NewDigester(secret []byte, version int) (*Digester, error) {
	return driver.NewDigester(secret, version)
}

// ParseOperationCode validates s as an OperationCode.
func ParseOperationCode(s string) (OperationCode, error) { return driver.ParseOperationCode(s) }

// ParseRef parses the String form of a Ref.
func ParseRef(s string) (Ref, error) { return driver.ParseRef(s) }

// SanitizeReason turns any text into a reason a store records as it is:
// no NUL byte, valid UTF-8, at most MaxReasonLen bytes
// (driver.SanitizeReason). The executor passes every reason it derives
// from an action's error through it; a caller-given reason that breaks
// the rule (driver.ValidateReason) is refused instead.
func SanitizeReason(s string) string { return driver.SanitizeReason(s) }

// FingerprintOf is the Fingerprint of a request's identifying parts.
func FingerprintOf(parts ...[]byte) Fingerprint { return driver.FingerprintOf(parts...) }
