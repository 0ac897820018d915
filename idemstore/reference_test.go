package idemstore_test

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestCheckReferenceFlagsAndRefuses: a business reference's first
// operation key holds it; the same key again is no reuse; a second key is
// flagged (metric action=flagged, an entry in the store's trail of reuses)
// or, with Refuse, refused with a *onceflow.Error naming both keys.
// A reference in another operation code is another reference.
func TestCheckReferenceFlagsAndRefuses(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	store, err := redisstore.New(redisstore.Config{Client: rdb, Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	te := telemetryEnv{reader: reader}
	ref := storetest.NewFixture().Ref // the reference's code and digest
	check := func(key string, refuse bool) (bool, error) {
		return exec.CheckReference(t.Context(), idemstore.ReferenceCheck{Reference: ref, Key: key, Window: time.Hour, Refuse: refuse})
	}
	if ok, err := check("charge:d1:aaaa", true); !ok || err != nil {
		t.Fatalf("first key: %v, %v", ok, err)
	}
	if _, err := check("charge:d1:aaaa", true); err != nil {
		t.Fatalf("the same key again: %v, want no reuse", err)
	}
	if _, err := check("charge:d1:bbbb", false); err != nil {
		t.Fatalf("a second key, flag only: %v", err)
	}
	_, err = check("charge:d1:cccc", true)
	var reused *onceflow.Error
	if !errors.As(err, &reused) || !errors.Is(err, onceflow.OutcomeReferenceReused) || reused.Holder != "charge:d1:aaaa" || reused.Key != "charge:d1:cccc" {
		t.Fatalf("a third key, refused: %v", err)
	}
	other := ref
	other.Code = onceflow.OperationCode("refund")
	if _, err := exec.CheckReference(t.Context(), idemstore.ReferenceCheck{Reference: other, Key: "refund:d1:dddd", Window: time.Hour, Refuse: true}); err != nil {
		t.Fatalf("another operation code: %v, want another reference", err)
	}
	if n := te.counter(t, "onceflow.reference_reuses", attribute.String("action", "flagged")); n != 1 {
		t.Errorf("flagged = %d, want 1", n)
	}
	if n := te.counter(t, "onceflow.reference_reuses", attribute.String("action", "refused")); n != 1 {
		t.Errorf("refused = %d, want 1", n)
	}
	entries, err := rdb.XRange(t.Context(), store.ReusesKey(), "-", "+").Result()
	if err != nil || len(entries) != 2 || entries[0].Values["action"] != "flagged" || entries[1].Values["holder"] != "charge:d1:aaaa" {
		t.Fatalf("trail of reuses %+v, %v; want the two reuses", entries, err)
	}
	if ttl := rdb.PTTL(t.Context(), store.ReferenceKey(ref)).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("the index entry's TTL is %v, want the window", ttl)
	}
}
