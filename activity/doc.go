// Package activity makes Temporal activities idempotent: Register wraps
// any activity the SDK accepts (a function, or a struct's methods) into
// one with the same signature that runs through an idemstore.Executor
// backed by Redis, and registers it with the worker.
//
// Import it beside the SDK's package under another name:
//
//	import (
//		"go.temporal.io/sdk/activity"
//		onceactivity "github.com/onceflow/onceflow/activity"
//	)
//
// Register wraps an activity and registers it under the name the SDK gives
// the function, so a workflow keeps calling workflow.ExecuteActivity(ctx,
// a.Withdraw, in); its code and options are checked at registration. A
// business error keeps its own type for Temporal: see NoEffect and
// NoEffectWhen.
//
// Inside a wrapped activity:
//
//   - the operation ID is namespace + workflow ID + run ID + activity ID, so
//     every retry of one activity in one run is one operation, and the
//     Temporal attempt is the retained attempt (its owner token is derived
//     from it);
//   - the scope (what is deduplicated) is the run by default, the workflow
//     ID with WorkflowScope, or a business key with BusinessKey;
//   - the fingerprint is the SHA-256 of the JSON-encoded input;
//   - a ticker derived from the lease and the activity's HeartbeatTimeout
//     records a heartbeat carrying a Checkpoint and renews the lease; a lost
//     lease, Temporal cancellation and worker stop cancel fn's context;
//   - before fn runs, the Temporal server confirms the attempt's Checkpoint
//     (PhaseExecuting) through Config.Client: evidence, kept outside Redis,
//     that this attempt may act. A later attempt that finds the Redis record
//     gone while that checkpoint is unsettled does not run fn blindly: it
//     asks Reconcile first, and without one (and without
//     IdempotentDownstream) fails with onceflow.EffectUnknown, for the workflow's
//     recovery to decide. EarlierEffectUnknown and AskFirst let fn ask its downstream too;
//   - outcomes become ApplicationErrors with the stable Type* strings:
//     in progress is retryable with NextRetryDelay = the lease left;
//     mismatches and conflicts are non-retryable; an unknown effect is
//     non-retryable onceflow.EffectUnknown with EffectUnknownDetails.
package activity
