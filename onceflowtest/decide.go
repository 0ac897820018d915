package onceflowtest

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/onceflow/onceflow/workflow"
)

// Decider returns the decision to take about a pending incident, as an
// operator would; ok false leaves it waiting.
type Decider func(p workflow.PendingRecovery) (res workflow.Resolution, ok bool)

// Decide has env's workflow decide its incidents as soon as they wait:
// every second of the test's clock it asks the workflow what it waits on
// (workflow.PendingQuery) and sends decide's decision about each incident
// it has not decided yet through workflow.ResolveSignal, the incident
// (record key, attempt, rev), a request ID and By "onceflowtest" filled
// in. The workflow applies it as a person's, so a test of the service's
// own error path (a refund after a failed deposit) still passes through
// onceflow: Fail delivers the activity's own error to the workflow. Call
// it before env.ExecuteWorkflow.
func Decide(env *testsuite.TestWorkflowEnvironment, decide Decider) {
	decided := map[workflow.Incident]bool{}
	var poll func()
	poll = func() {
		if env.IsWorkflowCompleted() {
			return
		}
		if v, err := env.QueryWorkflow(workflow.PendingQuery); err == nil {
			var pending []workflow.PendingRecovery
			if v.Get(&pending) == nil {
				for _, p := range pending {
					if decided[p.Incident] {
						continue
					}
					res, ok := decide(p)
					if !ok {
						continue
					}
					decided[p.Incident] = true
					res.RecordKey, res.Attempt, res.Rev = p.Incident.RecordKey, p.Incident.Attempt, p.Incident.Rev
					if res.RequestID == "" {
						res.RequestID = fmt.Sprintf("onceflowtest-%d", len(decided))
					}
					if res.By == "" {
						res.By = "onceflowtest"
					}
					env.SignalWorkflow(workflow.ResolveSignal, res)
				}
			}
		}
		env.RegisterDelayedCallback(poll, time.Second)
	}
	env.RegisterDelayedCallback(poll, time.Second)
}

// Fail decides every incident failed, with reason: the workflow's call
// then fails with the activity's own error (workflow.MayHaveActed tells
// that it may have acted).
func Fail(reason string) Decider {
	return func(workflow.PendingRecovery) (workflow.Resolution, bool) {
		return workflow.Resolution{Decision: workflow.Fail, Reason: reason}, true
	}
}

// Retry decides every incident retried, with reason: the effect did not
// happen, run the activity again.
func Retry(reason string) Decider {
	return func(workflow.PendingRecovery) (workflow.Resolution, bool) {
		return workflow.Resolution{Decision: workflow.Retry, Reason: reason}, true
	}
}

// Complete decides every incident completed with result, the activity's
// result (nil for an activity that returns only an error).
func Complete(result any) Decider {
	return func(workflow.PendingRecovery) (workflow.Resolution, bool) {
		raw, err := json.Marshal(result)
		if err != nil {
			panic(fmt.Sprintf("onceflowtest.Complete: the result does not encode as JSON: %v", err))
		}
		return workflow.Resolution{Decision: workflow.Completed, Result: raw, Reason: "completed by the test"}, true
	}
}
