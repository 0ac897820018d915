package workflow

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// PendingSearchAttribute is the custom search attribute (type Int) a
// Recovery made by NewRecoveryWithOptions with
// RecoveryOptions.PendingSearchAttribute keeps at the number of incidents
// the workflow waits on a decision for: upserted when one opens and when
// one closes, so visibility finds the waiting workflows
// ("OnceflowPending > 0") without asking each of them, and the count
// survives worker restarts. The namespace must have it registered
// (docs/operations.md): a workflow that upserts an unregistered attribute
// has its workflow tasks failed by the server.
const PendingSearchAttribute = "OnceflowPending"

// PendingKey is PendingSearchAttribute's typed key.
var PendingKey = temporal.NewSearchAttributeKeyInt64(PendingSearchAttribute)

// pendingChange is the workflow.GetVersion change ID of the upserts:
// histories recorded before them replay without them.
const pendingChange = "onceflow.pending-search-attribute"

// RecoveryOptions configure a Recovery.
type RecoveryOptions struct {
	// PendingSearchAttribute makes the Recovery upsert
	// PendingSearchAttribute as incidents open and close. Default false:
	// nothing is upserted, and the namespace needs no registration.
	PendingSearchAttribute bool
}

// NewRecoveryWithOptions is NewRecovery with options.
func NewRecoveryWithOptions(ctx workflow.Context, opts RecoveryOptions) (*Recovery, error) {
	r, err := NewRecovery(ctx)
	if err != nil {
		return nil, err
	}
	r.upsertPending = r.upsertPending || opts.PendingSearchAttribute
	return r, nil
}

// notePending upserts PendingSearchAttribute with the number of incidents
// waiting, when the Recovery was asked to and the history is not from
// before the upserts.
func (r *Recovery) notePending(ctx workflow.Context) {
	if !r.upsertPending {
		return
	}
	if r.pendingVersion == nil {
		v := workflow.GetVersion(ctx, pendingChange, workflow.DefaultVersion, 1)
		r.pendingVersion = &v
	}
	if *r.pendingVersion < 1 {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, PendingKey.ValueSet(int64(len(r.waiting)))); err != nil {
		workflow.GetLogger(ctx).Warn("onceflow: could not upsert the pending search attribute", "attribute", PendingSearchAttribute, "error", err)
	}
}
