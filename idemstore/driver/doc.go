// Package driver is the interface between the onceflow executor and a
// store of idempotency records (the service provider interface, as River
// keeps riverdriver apart from river): the Store port with its requests,
// the closed sum types a Store answers with (ClaimOutcome,
// TransitionOutcome, RenewOutcome, ReleaseOutcome, ResolveOutcome,
// Observation), and the domain types both sides share: the identity of a
// record (Ref, OperationCode, ScopeDigest, Digester, OperationID, Owner,
// Nonce, Fingerprint), the Record and its State, and the errors whose type
// says what a failed call proves (a *StoreError matching ErrIndeterminate
// or ErrUnavailable, a *ValidationError, a *CorruptRecordError).
//
// Applications use package idemstore, which re-exports the shared types
// they name (idemstore.Ref is driver.Ref); they import driver only to
// implement a Store, or to call one directly from an operator's tool
// (Inspect, Resolve). The Redis implementation is idemstore/redisstore;
// the contract suite every Store must pass is idemstore/storetest.
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
// answers with one of the closed sum types above or an error whose type
// says what it proves.
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
package driver
