package operator

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	idemwf "github.com/onceflow/onceflow/workflow"
)

// ResolveReply is how a decision was delivered, and the workflow's answer.
type ResolveReply struct {
	idemwf.DecisionReply
	// Signalled: the server takes no Updates, so the decision went as the
	// onceflow.resolve signal and no answer came back.
	Signalled bool
}

// DecisionRefusedError is a decision the workflow refused (stale,
// duplicate, no such pending incident, a result that does not decode).
type DecisionRefusedError struct {
	WorkflowID string
	// Message is the workflow's reason, for the operator.
	Message string
	Err     error
}

func (e *DecisionRefusedError) Error() string {
	return "the workflow " + e.WorkflowID + " refused the decision: " + e.Message
}

func (e *DecisionRefusedError) Unwrap() error { return e.Err }

// Resolve sends an operator's decision about one incident to the waiting
// workflow wfID (runID empty: its latest run) as the idemwf.ResolveUpdate
// Update and returns the workflow's answer; a server that takes no Updates
// gets the idemwf.ResolveSignal signal instead (ResolveReply.Signalled). A
// refusal is a *DecisionRefusedError.
func Resolve(ctx context.Context, tc client.Client, wfID, runID string, res idemwf.Resolution) (ResolveReply, error) {
	handle, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: wfID, RunID: runID, UpdateName: idemwf.ResolveUpdate, Args: []any{res},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var reply ResolveReply
	if err == nil {
		err = handle.Get(ctx, &reply.DecisionReply)
	}
	var unimplemented *serviceerror.Unimplemented
	var ae *temporal.ApplicationError
	switch {
	case err == nil:
		return reply, nil
	case errors.As(err, &ae) && ae.Type() == idemwf.TypeDecisionRefused:
		return reply, &DecisionRefusedError{WorkflowID: wfID, Message: ae.Error(), Err: err}
	case errors.As(err, &unimplemented):
		if err := SignalResolve(ctx, tc, wfID, runID, res); err != nil {
			return reply, err
		}
		reply.Signalled = true
		return reply, nil
	}
	return reply, fmt.Errorf("operator: update %s: %w", wfID, err)
}

// SignalResolve sends the decision as the idemwf.ResolveSignal signal,
// fire and forget: no answer comes back, and a refusal shows only in
// Pending's report (PendingReport.Refused).
func SignalResolve(ctx context.Context, tc client.Client, wfID, runID string, res idemwf.Resolution) error {
	if err := tc.SignalWorkflow(ctx, wfID, runID, idemwf.ResolveSignal, res); err != nil {
		return fmt.Errorf("operator: signal %s: %w", wfID, err)
	}
	return nil
}
