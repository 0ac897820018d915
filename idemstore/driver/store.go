package driver

import (
	"context"
	"time"

	"github.com/onceflow/onceflow"
)

// Store is the port to an idempotency record store. Every method is atomic
// on one record. Its errors are *onceflow.Error: a method that mutates
// fails with OutcomeIndeterminate when it got no reply (the mutation may
// have happened), Inspect with OutcomeStoreUnavailable. Requests that fail
// validation fail with OutcomeInvalid and send nothing. A record that does
// not decode fails with OutcomeCorrupt.
//
// Every mutation is safe to re-send: the same request, applied twice, gives
// ReplayedAcquire or AlreadyTransitioned the second time and never a second
// effect.
//
// idemstore/storetest holds the contract suite every Store must pass.
type Store interface {
	// Claim creates or takes over the record in CLAIMED.
	Claim(ctx context.Context, req ClaimRequest) (ClaimOutcome, error)
	// ClaimStart is Claim fused with Start: a new or taken-over record goes
	// straight to EXECUTING with req.Nonce. One round trip instead of two.
	ClaimStart(ctx context.Context, req ClaimRequest) (ClaimOutcome, error)
	// Start moves CLAIMED to EXECUTING and records the nonce.
	Start(ctx context.Context, req StartRequest) (TransitionOutcome, error)
	// Complete moves EXECUTING to COMPLETED with the response.
	Complete(ctx context.Context, req CompleteRequest) (TransitionOutcome, error)
	// Fail moves CLAIMED or EXECUTING to FAILED_RETRYABLE or ABANDONED.
	Fail(ctx context.Context, req FailRequest) (TransitionOutcome, error)
	// Renew moves an EXECUTING record's lease and TTL forward.
	Renew(ctx context.Context, req RenewRequest) (RenewOutcome, error)
	// Release deletes a CLAIMED record: nothing ran, nothing to keep.
	Release(ctx context.Context, req ReleaseRequest) (ReleaseOutcome, error)
	// Inspect reads the record without changing it.
	Inspect(ctx context.Context, ref onceflow.Ref) (Observation, error)
	// Resolve settles an ABANDONED record: to COMPLETED with a response,
	// to FAILED_RETRYABLE so the next claim takes over, or to FAILED for
	// good. It also reopens a FAILED record (to FAILED_RETRYABLE).
	Resolve(ctx context.Context, req ResolveRequest) (ResolveOutcome, error)
}

// Observation is what Inspect saw.
type Observation struct {
	// Found is false when there is no record.
	Found bool
	// Record is the record, with its Response, when Found.
	Record onceflow.Record
	// ServerTime is the store's clock at the time of the read.
	ServerTime time.Time
}

// ClaimRequest asks for ownership of a record.
type ClaimRequest struct {
	Ref         onceflow.Ref
	Operation   onceflow.OperationID
	Fingerprint onceflow.Fingerprint
	Owner       onceflow.Owner
	// Codec and Policy describe how the response will be encoded; a
	// completed record stored with others is reported as CodecMismatch.
	Codec  string
	Policy int
	// Lease is the processing lease granted on success.
	Lease time.Duration
	// Retention is how long the record outlives its lease: while CLAIMED
	// or EXECUTING, the record's time to live is always the lease left
	// plus Retention, so the evidence of an attempt that died outlives its
	// lease.
	Retention time.Duration
	// Nonce is the invocation's nonce; ClaimStart records it, Claim
	// ignores it.
	Nonce onceflow.Nonce
}

// StartRequest moves a claimed record to EXECUTING.
type StartRequest struct {
	Ownership Ownership
	Nonce     onceflow.Nonce
	Lease     time.Duration
	// Retention is how long the record outlives its lease (see
	// ClaimRequest.Retention).
	Retention time.Duration
}

// CompleteRequest stores the response and moves EXECUTING to COMPLETED.
type CompleteRequest struct {
	Ownership Ownership
	Nonce     onceflow.Nonce
	Response  []byte
	// TTL is how long the response is replayed.
	TTL time.Duration
	// Started is the record as the caller's start left it, or the zero
	// Record (see RenewRequest.Started): a store may check the record it
	// holds against it by equality and answer with less.
	Started onceflow.Record
}

// FailRequest records a failure.
type FailRequest struct {
	Ownership Ownership
	// Nonce must match the stored nonce when the record is EXECUTING.
	Nonce onceflow.Nonce
	// Target is StateFailedRetryable (no effect happened; the next claim
	// takes over) or StateAbandoned (the effect's fate is unknown).
	Target onceflow.State
	Reason string
	// TTL is how long the failure is retained.
	TTL time.Duration
}

// RenewRequest extends the lease of an EXECUTING record.
type RenewRequest struct {
	Ref       onceflow.Ref
	Operation onceflow.OperationID
	Owner     onceflow.Owner
	Nonce     onceflow.Nonce
	Lease     time.Duration
	// Retention is how long the record outlives its lease (see
	// ClaimRequest.Retention).
	Retention time.Duration
	// Started is the record as the caller's start left it (the Record
	// of the Acquired, TakenOver, ReplayedAcquire or Transitioned that
	// put it in EXECUTING), or the zero Record when the caller does not
	// have it. A renewal moves the lease alone, so a store may check the
	// record it holds against Started by equality instead of by its
	// rules and answer with less; when they differ, or Started is zero,
	// it checks the whole record. A store may ignore it: it decides
	// nothing the other fields do not.
	Started onceflow.Record
}

// ReleaseRequest deletes a CLAIMED record.
type ReleaseRequest struct{ Ownership Ownership }

// ResolveRequest settles an ABANDONED record, or reopens a FAILED one,
// compare-and-set on the attempt and revision the resolver saw.
type ResolveRequest struct {
	Ref     onceflow.Ref
	Attempt int64
	Rev     int64
	// Target is StateCompleted (Response is replayed from now on),
	// StateFailedRetryable (the next claim takes over) or StateFailed
	// (claims are answered with OperationFailed and Reason).
	Target   onceflow.State
	Response []byte
	Codec    string
	Policy   int
	Reason   string
	TTL      time.Duration
}

// DefaultMaxResponseBytes is the default limit on a stored response.
const DefaultMaxResponseBytes = 1 << 20

// ValidateIdentity checks what names a request: the record, the
// operation and the request's fingerprint.
func ValidateIdentity(ref onceflow.Ref, op onceflow.OperationID, fp onceflow.Fingerprint) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if err := op.Validate(); err != nil {
		return err
	}
	return fp.Validate()
}

// Validate checks a claim request.
func (r ClaimRequest) Validate() error {
	if err := ValidateIdentity(r.Ref, r.Operation, r.Fingerprint); err != nil {
		return err
	}
	if err := r.Owner.Validate(); err != nil {
		return err
	}
	if err := ValidateCodec(r.Codec, r.Policy); err != nil {
		return err
	}
	return validateLease(r.Lease, r.Retention)
}

// Validate checks a start request.
func (r StartRequest) Validate() error {
	if err := r.Ownership.Validate(); err != nil {
		return err
	}
	if err := r.Nonce.Validate(); err != nil {
		return err
	}
	return validateLease(r.Lease, r.Retention)
}

// Validate checks a complete request against a response size limit.
func (r CompleteRequest) Validate(maxResponse int) error {
	if err := r.Ownership.Validate(); err != nil {
		return err
	}
	if err := r.Nonce.Validate(); err != nil {
		return err
	}
	if err := ValidateResponse(r.Response, maxResponse); err != nil {
		return err
	}
	return validateTTL("TTL", r.TTL)
}

// Validate checks a fail request.
func (r FailRequest) Validate() error {
	if err := r.Ownership.Validate(); err != nil {
		return err
	}
	if r.Nonce != "" {
		if err := r.Nonce.Validate(); err != nil {
			return err
		}
	}
	if r.Target != onceflow.StateFailedRetryable && r.Target != onceflow.StateAbandoned {
		return invalid("Target", "must be FAILED_RETRYABLE or ABANDONED, got %q", r.Target)
	}
	if err := onceflow.ValidateReason(r.Reason); err != nil {
		return err
	}
	return validateTTL("TTL", r.TTL)
}

// Validate checks a renew request.
func (r RenewRequest) Validate() error {
	if err := r.Ref.Validate(); err != nil {
		return err
	}
	if err := r.Operation.Validate(); err != nil {
		return err
	}
	if err := r.Owner.Validate(); err != nil {
		return err
	}
	if err := r.Nonce.Validate(); err != nil {
		return err
	}
	return validateLease(r.Lease, r.Retention)
}

// Validate checks a release request.
func (r ReleaseRequest) Validate() error { return r.Ownership.Validate() }

// Validate checks a resolve request against a response size limit.
func (r ResolveRequest) Validate(maxResponse int) error {
	if err := r.Ref.Validate(); err != nil {
		return err
	}
	if r.Attempt <= 0 || r.Rev <= 0 {
		return invalid("Attempt/Rev", "must be positive (the values Inspect showed), got %d/%d", r.Attempt, r.Rev)
	}
	switch r.Target {
	case onceflow.StateCompleted:
		if err := ValidateCodec(r.Codec, r.Policy); err != nil {
			return err
		}
		if err := ValidateResponse(r.Response, maxResponse); err != nil {
			return err
		}
	case onceflow.StateFailedRetryable, onceflow.StateFailed:
	default:
		return invalid("Target", "must be COMPLETED, FAILED_RETRYABLE or FAILED, got %q", r.Target)
	}
	if err := onceflow.ValidateReason(r.Reason); err != nil {
		return err
	}
	return validateTTL("TTL", r.TTL)
}

// Validate checks an ownership presented with a transition.
func (o Ownership) Validate() error {
	if err := o.Ref.Validate(); err != nil {
		return err
	}
	if err := o.Operation.Validate(); err != nil {
		return err
	}
	if err := o.Owner.Validate(); err != nil {
		return err
	}
	if o.Attempt <= 0 || o.Rev <= 0 {
		return invalid("Ownership", "attempt and rev must be positive (take them from the claim), got %d/%d", o.Attempt, o.Rev)
	}
	return nil
}

// ValidateResponse checks that a response fits the limit.
func ValidateResponse(resp []byte, max int) error {
	if max <= 0 {
		max = DefaultMaxResponseBytes
	}
	if len(resp) > max {
		return invalid("Response", "is %d bytes, over the limit of %d; store a reference instead or raise MaxResponseBytes", len(resp), max)
	}
	return nil
}

// ValidateCodec checks a codec name ([a-z0-9.-], 1 to 32 bytes) and a
// policy revision (positive).
func ValidateCodec(codec string, policy int) error {
	if len(codec) == 0 || len(codec) > 32 {
		return invalid("Codec", "must be 1 to 32 characters, got %q", truncate(codec))
	}
	for i := 0; i < len(codec); i++ {
		b := codec[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '.') {
			return invalid("Codec", "must be characters of [a-z0-9.-], got %q", truncate(codec))
		}
	}
	if policy <= 0 {
		return invalid("Policy", "must be a positive revision, got %d", policy)
	}
	return nil
}

func validateLease(lease, retention time.Duration) error {
	if lease < time.Millisecond {
		return invalid("Lease", "must be at least 1ms, got %v", lease)
	}
	return validateTTL("Retention", retention)
}

func validateTTL(field string, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return invalid(field, "must be at least 1ms, got %v", ttl)
	}
	return nil
}

// TimeBounded is implemented by a Store that bounds how long each call may
// wait (redisstore.Store does): idemstore.NewExecutor checks
// ExecutorConfig.SafetyMargin against it.
type TimeBounded interface {
	// CommandTimeout is the longest one store call waits.
	CommandTimeout() time.Duration
}
