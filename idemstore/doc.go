// Package idemstore runs an action at most once whenever the system can
// know, and says exactly what it knows when it cannot: the Executor, its
// Request and Result, and the markers an action classifies its error with
// (RetryableNoEffect, NotStored, EffectUnknown). It is the one door to
// the store: Execute runs an action, and Inspect, Resolve and Reopen read
// and settle a record for operators and workflows. Every failure they
// return is an *onceflow.Error whose Outcome says what happened.
//
// The store behind it is a driver.Store (package idemstore/driver, the
// interface a store implements, with its requests and replies); the Redis
// implementation is idemstore/redisstore, and the contract suite every
// Store must pass is idemstore/storetest. The nouns an application names
// (onceflow.Ref, onceflow.Record, onceflow.State, onceflow.Digester, the
// store's errors) live in the root package, onceflow.
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
