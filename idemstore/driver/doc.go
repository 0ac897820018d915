// Package driver is the interface between the onceflow executor and a
// store of idempotency records (the service provider interface, as River
// keeps riverdriver apart from river): the Store port, its requests
// (ClaimRequest, StartRequest, …, with the Ownership a transition
// presents) and the closed sum types a Store answers with (ClaimOutcome,
// TransitionOutcome, RenewOutcome, ReleaseOutcome, ResolveOutcome,
// Observation).
//
// The nouns both sides share (the identity of a record, the Record and
// its State, the fence token and the errors whose type says what a failed
// call proves) live in the root package, onceflow. Import driver to
// implement a Store; applications go through the idemstore.Executor. The Redis
// implementation is idemstore/redisstore; the contract suite every Store
// must pass is idemstore/storetest.
//
// # Outcomes
//
// A record is CLAIMED, EXECUTING, COMPLETED, FAILED_RETRYABLE, FAILED or
// ABANDONED; docs/state-machine.md draws the machine. Every Store call
// answers with one of the closed sum types above or an error whose type
// says what it proves: a *onceflow.Error matching
// onceflow.OutcomeIndeterminate or onceflow.OutcomeStoreUnavailable, a
// *onceflow.Error, a *onceflow.Error.
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
