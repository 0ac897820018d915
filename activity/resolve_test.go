package activity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/handshake"
)

// TestResolveRecordClassifiesItsErrors: ResolveRecord's errors are
// classified by the executor's one classifier, as a wrapped activity's
// are. It turned every store error into a retryable StoreUnavailable, so a
// corrupt record was retried for ever instead of failing for an operator
// to repair.
func TestResolveRecordClassifiesItsErrors(t *testing.T) {
	t.Parallel()
	store, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	faulty := storetest.NewFaultyStore(store)
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: faulty, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("test secret"), 1)
	if err != nil {
		t.Fatal(err)
	}
	w, err := onceactivity.New(onceactivity.Config{Executor: exec, Digester: dig})
	if err != nil {
		t.Fatal(err)
	}
	// abandoned makes an ABANDONED record and returns the details a
	// workflow's decision about it carries.
	abandoned := func(t *testing.T) onceflow.EffectUnknownDetails {
		t.Helper()
		ref := onceflow.Ref{Code: "charge-payment", Digest: dig.Digest(storetest.RandomHex(8))}
		req := idemstore.Request{Ref: ref, Operation: dig.Operation("op"), Fingerprint: onceflow.FingerprintOf([]byte("in"))}
		_, err := exec.Execute(t.Context(), req, func(context.Context) ([]byte, error) { return nil, errors.New("read timeout") })
		var eu *onceflow.Error
		if !errors.As(err, &eu) || !eu.Recorded {
			t.Fatalf("err = %v, want a recorded unknown effect", err)
		}
		return onceflow.EffectUnknownDetails{RecordKey: ref.String(), OperationCode: string(ref.Code), ScopeDigest: ref.Digest.Hex,
			DigestVersion: ref.Digest.Version, Attempt: eu.Attempt, Rev: eu.Rev, State: string(eu.State), Recorded: true}
	}
	for _, tc := range []struct {
		name      string
		fault     storetest.Fault // injected into the resolution, if any
		stale     bool            // the decision was taken on an older rev
		missing   bool            // the record is gone
		typ       string          // "": no error
		retryable bool
	}{
		{name: "applied"},
		{name: "gone", missing: true},
		{name: "refused", stale: true, typ: onceflow.OutcomeResolveRefused.TemporalType()},
		{name: "corrupt reply", fault: storetest.CorruptReplyAfterApply, typ: onceflow.OutcomeCorrupt.TemporalType()},
		{name: "no reply", fault: storetest.ErrorBeforeApply, typ: onceflow.OutcomeStoreUnavailable.TemporalType(), retryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := abandoned(t)
			if tc.stale {
				d.Rev--
			}
			if tc.missing {
				d.ScopeDigest = dig.Digest("never used").Hex
			}
			if tc.fault != 0 {
				faulty.Inject(storetest.MethodResolve, tc.fault)
			}
			err := w.ResolveRecord(t.Context(), handshake.ResolveRecordInput{Details: d, Target: "FAILED_RETRYABLE", Reason: "no charge"})
			if tc.typ == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if ae := appError(t, err); ae.Type() != tc.typ || ae.NonRetryable() == tc.retryable {
				t.Fatalf("err = %v (%s, non-retryable %v), want %s, retryable %v", err, ae.Type(), ae.NonRetryable(), tc.typ, tc.retryable)
			}
		})
	}
}
