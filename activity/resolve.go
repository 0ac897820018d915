package activity

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// ResolveRecord is an activity that settles an ABANDONED record with a
// decision taken in a workflow (compare-and-set on its attempt and rev). A
// completed result (JSON) is stored with the Codec of the activity Wrap
// registered for the record's operation code, or as it is under the
// executor's codec when this worker wraps none.
// A record that is gone (expired) is nothing to settle; the decision stands
// in the workflow's history.
func (w *Wrapper) ResolveRecord(ctx context.Context, in onceflow.ResolveRecordInput) error {
	cfg := w.exec.Config()
	d := in.Details
	ref := onceflow.Ref{Code: onceflow.OperationCode(d.OperationCode), Digest: onceflow.ScopeDigest{Version: d.DigestVersion, Hex: d.ScopeDigest}}
	req := driver.ResolveRequest{
		Ref: ref, Attempt: d.Attempt, Rev: d.Rev, Target: onceflow.State(in.Target), Reason: onceflow.SanitizeReason(in.Reason), // an operator's text: never a NUL the schema refuses
		TTL: cfg.FailureRetention,
	}
	if req.Target == onceflow.StateCompleted {
		req.Response, req.Codec, req.Policy, req.TTL = in.Response, cfg.Codec, cfg.PolicyRevision, cfg.ReplayTTL
		// Stored under the codec of the activity that owns the operation
		// code (Wrap registers it), so its next claim replays the result.
		if r, ok := w.resolvers.Load(ref.Code); ok {
			r := r.(resolver)
			b, err := r.encode(in.Response)
			if err != nil {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"onceflow: the decided result of %s does not encode with codec %s: %v", d.RecordKey, r.codec, err), onceflow.TypeInvalidInput, err)
			}
			req.Response, req.Codec = b, r.codec
		}
	}
	out, err := cfg.Store.Resolve(ctx, req)
	if err != nil {
		var ve *onceflow.ValidationError
		if errors.As(err, &ve) {
			return temporal.NewNonRetryableApplicationError(err.Error(), onceflow.TypeInvalidInput, err)
		}
		return temporal.NewApplicationError(err.Error(), onceflow.TypeStoreUnavailable)
	}
	switch o := out.(type) {
	case driver.Transitioned, driver.AlreadyTransitioned, driver.Missing:
		return nil
	case driver.Refused:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"onceflow: resolving %s refused (%s): the record is now attempt %d rev %d in %s",
			d.RecordKey, o.Reason, o.Record.Attempt, o.Record.Rev, o.Record.State), onceflow.TypeResolveRefused, nil)
	}
	return fmt.Errorf("onceflow: resolve %s: unexpected outcome %T", d.RecordKey, out)
}
