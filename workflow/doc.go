// Package workflow holds onceflow's workflow-side helpers. Import it beside
// the SDK's package under another name:
//
//	import (
//		"go.temporal.io/sdk/workflow"
//		idemwf "github.com/onceflow/onceflow/workflow"
//	)
//
// Execute runs an idempotent activity and recovers from an unknown effect
// with the workflow's own history: a reconcile activity, or a decision sent
// with the ResolveSignal (completed with a result, retry, or fail) while
// PendingQuery lists what waits. `cmd/worker pending` and `cmd/worker
// resolve` are the operator's side of it.
//
// EffectUnknown and InProgress read what an idempotent activity's error
// says, for workflows that handle it themselves.
package workflow
