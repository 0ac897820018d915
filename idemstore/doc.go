// Package idemstore runs an action at most once whenever the system can
// know, and says exactly what it knows when it cannot: the Executor, its
// Request and Result, the errors that classify every outcome
// (OutcomeOf), and the identity and record types an application names.
//
// The store behind it is a driver.Store (package idemstore/driver, the
// interface a store implements, with its requests and replies); the Redis
// implementation is idemstore/redisstore, and the contract suite every
// Store must pass is idemstore/storetest. The shared types (Ref, Record,
// State, Digester, …) are defined in driver and re-exported here, so an
// application imports idemstore and a store implementation.
//
// # Identity
//
// A record is named by a Ref: an OperationCode ("charge-payment") and a
// ScopeDigest, the versioned HMAC-SHA256 of the raw scope computed by a
// Digester, so no raw client key, principal or workflow ID reaches the
// store. An OperationID names one logical operation (all its retries) and
// a Fingerprint the request, so that reusing a scope for another request
// is refused.
//
// # Leases
//
// The Executor runs an action only under a lease the store confirmed, and
// cancels the action's context at a local, absolute deadline (the lease
// less ExecutorConfig.SafetyMargin, from the send time of the confirming
// request) whatever the store does; see Executor and ErrLeaseUnconfirmed.
// A record in flight outlives its lease by ExecutorConfig.FailureRetention.
// Drain waits for what an Execute left running.
package idemstore
