// Package onceflow is the contract that crosses process and package
// boundaries: the stable ApplicationError type strings, the checkpoint an
// activity heartbeats, the details of an unknown effect, the input of the
// resolve activity and the fencing token. It imports only the standard
// library, so deterministic workflow code (package workflow) and operators'
// tools can use it without the activity runtime, the executor or Redis.
//
// The rest of onceflow:
//
//   - idemstore: the idempotency state machine's executor and store port;
//     idemstore/redisstore, the Redis store;
//   - activity: Temporal activities run through the executor;
//   - workflow: recovery of unknown effects from the workflow's history;
//   - idemhttp: the Idempotency-Key middleware;
//   - worker: a worker assembled from all of them.
package onceflow
