package operator

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	idemwf "github.com/onceflow/onceflow/workflow"
)

// Step is the incident an EvidenceSource is asked about: the workflow
// that waits, and what it waits on (the activity, and the record key,
// which for an activity with a BusinessKey is the operation key the downstream
// was called with: onceactivity.OperationKey).
type Step struct {
	WorkflowID string
	RunID      string
	Pending    idemwf.PendingRecovery
}

// EvidenceSource is the hook through which a library user supplies the
// evidence for their own steps: given a step whose effect is unknown, it
// asks the downstream what happened under the step's operation key and
// returns it as an idemwf.Evidence: a summary for the operator, the
// decision it implies (idemwf.Completed with the pre-filled result when
// the effect is there, idemwf.Retry when the downstream proves it is not,
// "" when it cannot tell) and the rows it read.
//
// A source answers ErrNoEvidence for a step it knows nothing about (another
// activity); any other error is a downstream that could not be asked. It
// must not change anything: it is called whenever a pending list or a
// console page is drawn. The console and worker trace show its answer
// beside every decision, pre-fill the implied decision, and send the
// evidence with the decision, so that a decision against it is refused
// unless confirmed with a reason (ErrContradictsEvidence) and the history
// keeps what the operator was shown.
type EvidenceSource interface {
	Evidence(ctx context.Context, step Step) (idemwf.Evidence, error)
}

// EvidenceFunc is a function that is an EvidenceSource.
type EvidenceFunc func(ctx context.Context, step Step) (idemwf.Evidence, error)

// Evidence calls f.
func (f EvidenceFunc) Evidence(ctx context.Context, step Step) (idemwf.Evidence, error) {
	return f(ctx, step)
}

// ErrNoEvidence: the source has no evidence for the step (not one of its
// activities). The decision is then the operator's alone.
var ErrNoEvidence = errors.New("operator: no evidence source knows this step")

// Assessed is one pending incident with its evidence.
type Assessed struct {
	Step
	// Evidence is nil when there is none (ErrNoEvidence) or when it could
	// not be read (EvidenceError says why).
	Evidence      *idemwf.Evidence `json:"evidence,omitempty"`
	EvidenceError string           `json:"evidenceError,omitempty"`
}

// Assess asks src for the evidence of every incident of list, in order. A
// source that fails for a step does not stop the others: the step's
// EvidenceError says why, and the returned error joins every failure. A
// nil src assesses nothing (every Evidence nil).
func Assess(ctx context.Context, src EvidenceSource, list []Waiting) ([]Assessed, error) {
	var out []Assessed
	var errs []error
	for _, w := range list {
		for _, p := range w.Pending {
			a := Assessed{Step: Step{WorkflowID: w.WorkflowID, RunID: w.RunID, Pending: p}}
			if src != nil {
				ev, err := src.Evidence(ctx, a.Step)
				switch {
				case errors.Is(err, ErrNoEvidence):
				case err != nil:
					a.EvidenceError = err.Error()
					errs = append(errs, fmt.Errorf("operator: evidence for %s in %s: %w", p.Incident, w.WorkflowID, err))
				default:
					a.Evidence = &ev
				}
			}
			out = append(out, a)
		}
	}
	return out, errors.Join(errs...)
}

// Decisions asks the workflow wfID (runID empty: its latest run) for the
// decisions it applied, with their audit (idemwf.DecisionsQuery), oldest
// first. A workflow of a version without the query answers none.
func Decisions(ctx context.Context, tc client.Client, wfID, runID string) ([]idemwf.Decided, error) {
	v, err := tc.QueryWorkflow(ctx, wfID, runID, idemwf.DecisionsQuery)
	var failed *serviceerror.QueryFailed
	switch {
	case errors.As(err, &failed):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("workflow %s: query %s: %w", wfID, idemwf.DecisionsQuery, err)
	}
	var out []idemwf.Decided
	if err := v.Get(&out); err != nil {
		return nil, fmt.Errorf("workflow %s: its %s answer does not decode: %w", wfID, idemwf.DecisionsQuery, err)
	}
	return out, nil
}

// AskDownstream asks the workflow wfID (runID empty: its latest run) to
// ask the downstream now about its pending incident inc, through the
// activity's own Reconcile (idemwf.EvidenceUpdate), and returns the
// evidence; the workflow's pending list shows it from then on
// (idemwf.PendingRecovery.Evidence). An activity that declares no
// Reconcile is refused, with the reason. It records an Update and an
// activity in the workflow's history: ask when an operator asks, not
// whenever a page is drawn.
func AskDownstream(ctx context.Context, tc client.Client, wfID, runID string, inc idemwf.Incident) (idemwf.Evidence, error) {
	h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: wfID, RunID: runID, UpdateName: idemwf.EvidenceUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{inc},
	})
	if err != nil {
		return idemwf.Evidence{}, fmt.Errorf("operator: ask the downstream about %s in %s: %w", inc, wfID, err)
	}
	var ev idemwf.Evidence
	if err := h.Get(ctx, &ev); err != nil {
		return idemwf.Evidence{}, fmt.Errorf("operator: ask the downstream about %s in %s: %w", inc, wfID, err)
	}
	return ev, nil
}

// AskedEvidence is the EvidenceSource of any service: the evidence the
// activity's own Reconcile gave when last asked (AskDownstream), as the
// workflow's pending list shows it; ErrNoEvidence until it was asked. It
// asks nothing itself.
var AskedEvidence EvidenceSource = EvidenceFunc(func(_ context.Context, step Step) (idemwf.Evidence, error) {
	if step.Pending.Evidence == nil {
		return idemwf.Evidence{}, ErrNoEvidence
	}
	return *step.Pending.Evidence, nil
})

// FirstEvidence is an EvidenceSource that asks srcs in order and answers
// with the first that knows the step (not ErrNoEvidence); nil sources
// are skipped.
func FirstEvidence(srcs ...EvidenceSource) EvidenceSource {
	return EvidenceFunc(func(ctx context.Context, step Step) (idemwf.Evidence, error) {
		for _, src := range srcs {
			if src == nil {
				continue
			}
			ev, err := src.Evidence(ctx, step)
			if !errors.Is(err, ErrNoEvidence) {
				return ev, err
			}
		}
		return idemwf.Evidence{}, ErrNoEvidence
	})
}
