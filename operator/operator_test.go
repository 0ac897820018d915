package operator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/operator"
)

// TestInspectReportsARecordAndACorruptOne: Inspect reads a business key's
// record (BusinessRef), a missing one without an error, and reports a
// corrupt one with an error matching onceflow.OutcomeCorrupt.
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
	if !errors.Is(err, onceflow.OutcomeCorrupt) || rep.Corrupt == "" || !rep.Found {
		t.Fatalf("a corrupt record: %+v, %v", rep, err)
	}
}
