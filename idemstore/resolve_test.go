package idemstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// TestReopenAnAbandonedRecord: an ABANDONED record no workflow waits on
// (an HTTP key whose handler's outcome was unknown) is refused until an
// operator reopens it (Executor.Reopen); then the next request runs. A COMPLETED record is
// not reopened, a missing one is onceflow.OutcomeNoRecord.
func TestReopenAnAbandonedRecord(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	store, err := redisstore.New(redisstore.Config{Client: redistest.NewClient(t, srv.Addr()), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("operator test secret, 32 bytes.."), 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := onceflow.Ref{Code: "http", Digest: dig.Digest("k")}
	req := idemstore.Request{Ref: ref, Operation: dig.Operation("op"), Fingerprint: onceflow.FingerprintOf([]byte("body")), Codec: "raw"}
	runs := 0
	unknown := func(context.Context) ([]byte, error) {
		runs++
		return nil, idemstore.EffectUnknown(errors.New("the handler answered 502"))
	}
	ok := func(context.Context) ([]byte, error) { runs++; return []byte("done"), nil }
	if _, err := exec.Execute(t.Context(), req, unknown); err == nil {
		t.Fatal("an unknown effect was not reported")
	}
	if _, err := exec.Execute(t.Context(), req, ok); !errors.Is(err, onceflow.OutcomeEffectUnknown) || runs != 1 {
		t.Fatalf("before reopen: err %v, %d runs", err, runs)
	}
	was, err := exec.Reopen(t.Context(), ref, "no charge at the provider")
	if err != nil || was.State != onceflow.StateAbandoned {
		t.Fatalf("reopen: %+v, %v", was, err)
	}
	if res, err := exec.Execute(t.Context(), req, ok); err != nil || string(res.Response) != "done" || runs != 2 {
		t.Fatalf("after reopen: %+v, %v, %d runs", res, err, runs)
	}
	if _, err := exec.Reopen(t.Context(), ref, ""); !errors.Is(err, onceflow.OutcomeResolveRefused) {
		t.Fatalf("reopening a COMPLETED record: %v", err)
	}
	missing := onceflow.Ref{Code: "http", Digest: dig.Digest("never used")}
	if _, err := exec.Reopen(t.Context(), missing, ""); !errors.Is(err, onceflow.OutcomeNoRecord) {
		t.Fatalf("reopening a missing record: %v", err)
	}
}
