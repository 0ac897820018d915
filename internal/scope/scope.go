// Package scope spells the raw identity each kind of record is digested
// from (onceflow.Digester.Digest(scope...)), once, so the activity
// wrapper, the HTTP middleware and the operator's tools that look a record
// up derive the same digest. The raw parts never reach the store.
package scope

// Raw is the raw identity a record's digest is made from: the kind's
// name, then its parts.
type Raw []string

// Run is a run-scoped activity's scope (the default): the retries of one
// activity in one workflow run.
func Run(namespace, workflowID, runID, activityID string) Raw {
	return Raw{"run", namespace, workflowID, runID, activityID}
}

// Workflow is a workflow-scoped activity's scope (activity.WorkflowScope):
// one activity ID across the runs of one workflow ID.
func Workflow(namespace, workflowID, activityID string) Raw {
	return Raw{"workflow", namespace, workflowID, activityID}
}

// Standalone is the scope of an activity started on its own (a Temporal
// Standalone Activity, client.ExecuteActivity), run- or workflow-scoped:
// its activity ID, which the caller chooses as the operation's identity,
// across the activity's attempts and runs.
func Standalone(namespace, activityID string) Raw {
	return Raw{"standalone", namespace, activityID}
}

// Business is a business-keyed activity's scope (activity.BusinessKey):
// one business key ("order-42/charge") across workflows of a namespace.
func Business(namespace, key string) Raw { return Raw{"business", namespace, key} }

// HTTP is an Idempotency-Key request's scope: the principal, the method,
// the route pattern ("POST /orders") and the key.
func HTTP(principal, method, route, key string) Raw {
	return Raw{"http", principal, method, route, key}
}
