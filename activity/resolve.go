package activity

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/internal/handshake"
)

// ResolveRecord is an activity that settles an ABANDONED record with a
// decision taken in a workflow (compare-and-set on its attempt and rev),
// through the executor's Resolve. A completed result (JSON) is stored with
// the Codec of the activity Register registered for the record's operation
// code, or as it is under the executor's codec when this worker wraps
// none. A record that is gone (expired) is nothing to settle; the decision
// stands in the workflow's history. Every other error is mapped to its
// ApplicationError type as a wrapped activity's are: a refused resolution
// is onceflow.OutcomeResolveRefused.TemporalType(), a corrupt record
// onceflow.OutcomeCorrupt.TemporalType(), a store that did not answer
// onceflow.OutcomeStoreUnavailable.TemporalType().
func (w *Wrapper) ResolveRecord(ctx context.Context, in handshake.ResolveRecordInput) error {
	d := in.Details
	ref := onceflow.Ref{Code: onceflow.OperationCode(d.OperationCode), Digest: onceflow.Digest{Version: d.DigestVersion, Hex: d.ScopeDigest}}
	req := driver.ResolveRequest{
		Ref: ref, Attempt: d.Attempt, Rev: d.Rev, Target: onceflow.State(in.Target), Reason: onceflow.SanitizeReason(in.Reason), // an operator's text: never a NUL the schema refuses
	}
	if req.Target == onceflow.StateCompleted {
		req.Response = in.Response
		// Stored under the codec of the activity that owns the operation
		// code (Register records it), so its next claim replays the result.
		if r, ok := w.resolvers.Load(ref.Code); ok {
			r := r.(resolver)
			b, err := r.encode(in.Response)
			if err != nil {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"onceflow: the decided result of %s does not encode with codec %s: %v", d.RecordKey, r.codec, err), onceflow.OutcomeInvalid.TemporalType(), err)
			}
			req.Response, req.Codec, req.Policy = b, r.codec, w.exec.Config().PolicyRevision
		}
	}
	_, err := w.exec.Resolve(ctx, req)
	switch {
	case err == nil, errors.Is(err, onceflow.OutcomeNoRecord):
		return nil
	}
	return toTemporal(err, ref, d.Operation, d.Checkpoint, handshake.RetryDetails{}, downstream{idempotent: d.IdempotentDownstream, key: d.DownstreamKey, retention: d.DownstreamRetention})
}
