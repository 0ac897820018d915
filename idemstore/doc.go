// Package idemstore is the provider-neutral core of onceflow: the domain
// types of an idempotent operation, the Store port, and (see Executor) the
// rules that run an action at most once whenever the system can know.
//
// # Identity
//
// A record is named by a Ref: an OperationCode ("charge-payment") and a
// ScopeDigest, the versioned HMAC-SHA256 of the raw scope computed by a
// Digester, so no raw client key, principal or workflow ID reaches the
// store. An OperationID names one logical operation (all its retries), an
// Owner one claimant (one retained attempt), a Nonce one invocation, and a
// Fingerprint the request, so that reusing a scope for another request is
// refused.
//
// # States and outcomes
//
// A record is CLAIMED, EXECUTING, COMPLETED, FAILED_RETRYABLE, FAILED or
// ABANDONED; docs/state-machine.md draws the machine. Every Store call
// answers with a closed sum type (ClaimOutcome, TransitionOutcome,
// RenewOutcome, ReleaseOutcome, ResolveOutcome) or an error whose type says
// what it proves: a *StoreError matching ErrIndeterminate (a mutation may
// have happened) or ErrUnavailable (a read failed), a *ValidationError
// (nothing was sent), or a *CorruptRecordError.
//
// # What is stored
//
// A record holds its state, the owner token, the attempt and revision, the
// request's Fingerprint, the codec and policy revision of the response, the
// lease end, the invocation's nonce, timestamps, a reason, the response
// bytes as the action returned them (with a checksum), and the
// OperationID exactly as the caller gave it. Callers whose operation
// identity names a workflow, a customer or an order pass
// Digester.Operation of it (the Temporal binding does), so nothing raw is
// stored; docs/state-machine.md lists every field.
//
// # Leases
//
// The Executor runs an action only under a lease the store confirmed, and
// cancels the action's context at a local, absolute deadline (the lease
// less ExecutorConfig.SafetyMargin, from the send time of the confirming
// request) whatever the store does; see Executor and ErrLeaseUnconfirmed.
// A record in flight outlives its lease by ExecutorConfig.FailureRetention.
//
// The Redis implementation is in idemstore/redisstore; the contract suite
// every Store must pass is in idemstore/storetest.
package idemstore
