// Package onceflow is the contract that crosses process and package
// boundaries, each noun defined here once: the identity of a record (Ref,
// OperationCode, Digest and the Digester that computes it from a raw
// scope, OperationID, Owner, Nonce, Fingerprint), the Record and its
// State, the fencing token (Fence), the outcomes of an idempotent call
// (Outcome) with the one error every failure is (Error) and the stable
// ApplicationError type each raises in Temporal, the checkpoint an activity
// heartbeats, the details of an unknown effect and the input of the
// resolve activity. It imports only the standard library, so
// deterministic workflow code (package workflow) and operators' tools can
// use it without the activity runtime, the executor or Redis.
//
// # Identity
//
// A record is named by a Ref: an OperationCode ("charge-payment") and a
// Digest, the versioned HMAC-SHA256 of the record's raw scope (the run,
// the business key, the HTTP principal and key) computed by a Digester,
// so no raw client key, principal or workflow ID reaches the
// store. An OperationID names one logical operation (all its retries), an
// Owner one claimant (one retained attempt), a Nonce one invocation, and a
// Fingerprint the request, so that reusing a scope for another request is
// refused.
//
// # The rest of onceflow
//
//   - idemstore: the executor, the idempotency state machine;
//     idemstore/driver, the store port; idemstore/redisstore, the Redis
//     store;
//   - activity: Temporal activities run through the executor;
//   - workflow: recovery of unknown effects from the workflow's history;
//   - idemhttp: the Idempotency-Key middleware;
//   - worker: a worker assembled from all of them.
package onceflow
