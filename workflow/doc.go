// Package workflow holds onceflow's workflow-side helpers. Import it beside
// the SDK's package under another name:
//
//	import (
//		"go.temporal.io/sdk/workflow"
//		idemwf "github.com/onceflow/onceflow/workflow"
//	)
//
// Execute runs an idempotent activity and recovers from an unknown effect
// with the workflow's own history. Where the answer is known it decides by
// itself, recorded like a person's decision and counted by
// onceflow_recoveries_decided_automatically (docs/operations.md), with no incident: retry for an activity that
// declared its downstream idempotent, completed with what the reconcile
// activity finds, retry when it finds nothing after Options.Settle.
// Otherwise it waits for a decision
// (completed with a result, retry, or fail) about exactly the incident
// PendingQuery lists, sent with the ResolveUpdate (validated and answered)
// or the ResolveSignal (fire and forget; refusals are listed by
// RefusalsQuery). A decision is idempotent by its request ID and bound to
// its incident: a repeat applies once, a delayed request never undoes a
// later decision; DecisionsQuery lists the decisions applied, with who,
// when, why and the evidence shown. Any number of Execute calls may wait
// on one Recovery.
// `cmd/worker pending`, `resolve` and `reopen` are the operator's side of
// it.
//
// Interceptor does the same for workflows that call their activities with
// plain workflow.ExecuteActivity, installed on the SDK worker
// (worker.Attach's Interceptors): each workflow gets its Recovery at its
// start, and an unknown effect is recovered behind the Future the call
// returned.
//
// EffectUnknown and InProgress read what an idempotent activity's error
// says, for workflows that handle it themselves.
package workflow
