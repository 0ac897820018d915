package worker_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/internal/redistest"
	"github.com/onceflow/onceflow/worker"
)

// TestReopenAnAbandonedRecord: an ABANDONED record no workflow waits on
// (an HTTP key whose handler's outcome was unknown) is refused until an
// operator reopens it; then the next request runs.
func TestReopenAnAbandonedRecord(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ns := redistest.Namespace(t)
	store, err := redisstore.New(redisstore.Config{Client: redistest.NewClient(t, srv.Addr()), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := idemstore.NewDigester([]byte("operator test secret, 32 bytes.."), 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := idemstore.Ref{Code: "http", Digest: dig.Digest("k")}
	req := idemstore.Request{Ref: ref, Operation: dig.Operation("op"), Fingerprint: idemstore.FingerprintOf([]byte("body")), Codec: "raw"}
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
	var out bytes.Buffer
	args := []string{"-record", ref.String(), "-redis-url", "redis://" + srv.Addr() + "/0", "-key-namespace", ns, "-reason", "no charge at the provider"}
	if err := worker.RunOperator(t.Context(), "reopen", args, func(string) string { return "" }, &out); err != nil ||
		!strings.Contains(out.String(), "reopened") || !strings.Contains(out.String(), "ABANDONED") {
		t.Fatalf("reopen: %q, %v", out.String(), err)
	}
	if res, err := exec.Execute(t.Context(), req, ok); err != nil || string(res.Response) != "done" || runs != 2 {
		t.Fatalf("after reopen: %+v, %v, %d runs", res, err, runs)
	}
	out.Reset()
	if err := worker.RunOperator(t.Context(), "reopen", args, func(string) string { return "" }, &out); err == nil || !strings.Contains(err.Error(), "COMPLETED") {
		t.Fatalf("reopening a COMPLETED record: %v", err)
	}
}
