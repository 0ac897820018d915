package operator

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

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

// ErrContradictsEvidence: the decision is not the one its evidence
// implies (retry or fail while the downstream shows the effect, completed
// while it shows none), and it was not confirmed with a reason. Look at
// the evidence again; if the decision is still right, confirm it
// (Resolution.Confirmed, worker resolve -confirm) and say why.
var ErrContradictsEvidence = errors.New("operator: the decision contradicts the evidence; confirm it with a reason to send it anyway")

// ContradictionError is a decision Resolve refused to send because it
// contradicts its evidence; it matches ErrContradictsEvidence.
type ContradictionError struct {
	Decision idemwf.Decision
	Evidence idemwf.Evidence
}

func (e *ContradictionError) Error() string {
	return fmt.Sprintf("operator: %s contradicts the evidence, which implies %s (%s): confirm it with a reason (-confirm -reason TEXT) to send it anyway",
		e.Decision, e.Evidence.Implies, e.Evidence.Summary)
}

// Is matches ErrContradictsEvidence.
func (e *ContradictionError) Is(target error) bool { return target == ErrContradictsEvidence }

// NewRequestID returns a fresh decision request ID (128 random bits, 26
// base32 characters).
// Generate it once per decision the operator means to take, and send
// every retry of that decision with the same one.
func NewRequestID() string {
	return strings.ToLower(rand.Text())
}

// Resolve sends an operator's decision about one incident to the waiting
// workflow wfID (runID empty: its latest run) as the idemwf.ResolveUpdate
// Update and returns the workflow's answer; a server that takes no Updates
// gets the idemwf.ResolveSignal signal instead (ResolveReply.Signalled). A
// refusal is a *DecisionRefusedError.
//
// The request is idempotent: an empty res.RequestID is filled in with
// NewRequestID, and the request ID is the Update's ID too, so the same
// request sent again (by a retry of the caller, concurrently, or late)
// applies once: the server dedupes it by Update ID, and the workflow by
// request ID. The answer to a request the workflow had already applied
// says Repeated: a request ID given in res is first looked up in the
// workflow's decisions (DecisionsQuery), because the server answers a
// repeated Update ID with the first answer, which does not say so; found
// there, the request is not sent again, and found with another decision
// or incident, it is refused (*DecisionRefusedError) as the workflow
// would refuse it. A decision that contradicts its evidence
// (res.Contradicts) without res.Confirmed and a res.Reason is not sent:
// *ContradictionError.
func Resolve(ctx context.Context, tc client.Client, wfID, runID string, res idemwf.Resolution) (ResolveReply, error) {
	if err := checkEvidence(res); err != nil {
		return ResolveReply{}, err
	}
	if res.RequestID == "" {
		res.RequestID = NewRequestID()
	} else if d, ok := decidedBy(ctx, tc, wfID, runID, res.RequestID); ok {
		reply := ResolveReply{DecisionReply: idemwf.DecisionReply{Applied: d.Incident, Decision: d.Resolution.Decision, RequestID: res.RequestID, Repeated: true}}
		if d.Incident != res.Incident() || d.Resolution.Decision != res.Decision {
			return reply, &DecisionRefusedError{WorkflowID: wfID, Message: fmt.Sprintf("request %s already decided %s for %s: send this decision under a new request ID",
				res.RequestID, d.Resolution.Decision, d.Incident)}
		}
		return reply, nil
	}
	handle, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:   res.RequestID,
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

// decidedQueryTimeout bounds the look-up of a request among a workflow's
// decisions: a closed workflow answers the query only by a worker's
// replay, and without an answer the request is sent anyway.
const decidedQueryTimeout = 5 * time.Second

// decidedBy is the decision the workflow applied under requestID, if its
// decisions say it has one. A workflow that cannot be asked has none: the
// request is then sent, and the workflow decides.
func decidedBy(ctx context.Context, tc client.Client, wfID, runID, requestID string) (idemwf.Decided, bool) {
	qctx, cancel := context.WithTimeout(ctx, decidedQueryTimeout)
	defer cancel()
	ds, err := Decisions(qctx, tc, wfID, runID)
	if err != nil {
		return idemwf.Decided{}, false
	}
	for _, d := range ds {
		if d.Resolution.RequestID == requestID {
			return d, true
		}
	}
	return idemwf.Decided{}, false
}

// checkEvidence refuses a decision that contradicts its evidence without
// a confirmation and a reason.
func checkEvidence(res idemwf.Resolution) error {
	if res.Contradicts() && (!res.Confirmed || strings.TrimSpace(res.Reason) == "") {
		return &ContradictionError{Decision: res.Decision, Evidence: *res.Evidence}
	}
	return nil
}

// SignalResolve sends the decision as the idemwf.ResolveSignal signal,
// fire and forget: no answer comes back, and a refusal shows only in
// Pending's report (PendingReport.Refused). Like Resolve, it fills in an
// empty res.RequestID (a resent signal with the same one applies once)
// and refuses a decision that contradicts its evidence unconfirmed.
func SignalResolve(ctx context.Context, tc client.Client, wfID, runID string, res idemwf.Resolution) error {
	if err := checkEvidence(res); err != nil {
		return err
	}
	if res.RequestID == "" {
		res.RequestID = NewRequestID()
	}
	if err := tc.SignalWorkflow(ctx, wfID, runID, idemwf.ResolveSignal, res); err != nil {
		return fmt.Errorf("operator: signal %s: %w", wfID, err)
	}
	return nil
}
