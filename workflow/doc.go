// Package workflow holds onceflow's workflow-side helpers. Import it beside
// the SDK's package under another name:
//
//	import (
//		"go.temporal.io/sdk/workflow"
//		idemwf "github.com/onceflow/onceflow/workflow"
//	)
//
// EffectUnknown and InProgress read what an idempotent activity's error
// says, so a workflow can branch on an unknown effect (and hand it to an
// operator, or to its own recovery) without parsing messages.
package workflow
