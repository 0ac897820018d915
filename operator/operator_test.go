package operator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/internal/redistest"
	"github.com/onceflow/onceflow/operator"
)

// TestReopenAnAbandonedRecord: an ABANDONED record no workflow waits on
// (an HTTP key whose handler's outcome was unknown) is refused until an
// operator reopens it; then the next request runs. A COMPLETED record is
// not reopened, a missing one is ErrNoRecord.
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
	if _, err := exec.Execute(t.Context(), req, ok); !errors.Is(err, idemstore.ErrEffectUnknown) || runs != 1 {
		t.Fatalf("before reopen: err %v, %d runs", err, runs)
	}
	was, err := operator.Reopen(t.Context(), store, ref, "no charge at the provider")
	if err != nil || was.State != onceflow.StateAbandoned {
		t.Fatalf("reopen: %+v, %v", was, err)
	}
	if res, err := exec.Execute(t.Context(), req, ok); err != nil || string(res.Response) != "done" || runs != 2 {
		t.Fatalf("after reopen: %+v, %v, %d runs", res, err, runs)
	}
	if _, err := operator.Reopen(t.Context(), store, ref, ""); !errors.Is(err, operator.ErrNotReopenable) {
		t.Fatalf("reopening a COMPLETED record: %v", err)
	}
	missing := onceflow.Ref{Code: "http", Digest: dig.Digest("never used")}
	if _, err := operator.Reopen(t.Context(), store, missing, ""); !errors.Is(err, operator.ErrNoRecord) {
		t.Fatalf("reopening a missing record: %v", err)
	}
}

// TestInspectReportsARecordAndACorruptOne: Inspect reads a business key's
// record (BusinessRef), a missing one without an error, and reports a
// corrupt one with an error matching onceflow.ErrCorruptRecord.
func TestInspectReportsARecordAndACorruptOne(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redistest.NewClient(t, srv.Addr())
	store, err := redisstore.New(redisstore.Config{Client: rdb, Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("inspect test secret, 32 bytes..."), 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := operator.BusinessRef(dig, "default", "charge-card", "order-1/charge")
	if rep, err := operator.Inspect(t.Context(), store, ref); err != nil || rep.Found || rep.Key != ref.String() {
		t.Fatalf("before the claim: %+v, %v", rep, err)
	}
	req := idemstore.Request{Ref: ref, Operation: dig.Operation("op"), Fingerprint: onceflow.FingerprintOf([]byte("body"))}
	if _, err := exec.Execute(t.Context(), req, func(context.Context) ([]byte, error) { return []byte("ch_1"), nil }); err != nil {
		t.Fatal(err)
	}
	rep, err := operator.Inspect(t.Context(), store, ref)
	if err != nil || !rep.Found || rep.State != onceflow.StateCompleted || rep.Attempt != 1 || rep.Rev != 2 || rep.Response != 4 {
		t.Fatalf("inspect: %+v, %v", rep, err)
	}
	if err := rdb.HSet(t.Context(), store.Key(ref), "state", "BOGUS").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err = operator.Inspect(t.Context(), store, ref)
	if !errors.Is(err, onceflow.ErrCorruptRecord) || rep.Corrupt == "" || !rep.Found {
		t.Fatalf("a corrupt record: %+v, %v", rep, err)
	}
}
