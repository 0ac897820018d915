package idemhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// TestA202IsCountedAsNotStored: a handler that answers 202 Accepted (the
// order API while an order runs) leaves the key to the next request, and
// the executor counts it as not_stored; a 503 is the handler's failure,
// counted as retryable. Before, both were "retryable", so a dashboard of
// failures counted every normal 202.
func TestA202IsCountedAsNotStored(t *testing.T) {
	t.Parallel()
	store, err := redisstore.New(redisstore.Config{Client: redistest.NewClient(t, redistest.Addr(t)), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("idemhttp test secret, 32 bytes.."), 1)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, Code: "orders", Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	status := http.StatusAccepted
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) })))
	t.Cleanup(srv.Close)
	post := func(key string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for range 2 {
		if got := post("k-202"); got != http.StatusAccepted {
			t.Fatalf("status %d, want 202 both times (a 202 is not stored, so it runs again)", got)
		}
	}
	status = http.StatusServiceUnavailable
	if got := post("k-503"); got != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", got)
	}
	counts := map[string]int64{}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "onceflow.executions" {
				for _, p := range sum.DataPoints {
					v, _ := p.Attributes.Value("outcome")
					counts[v.AsString()] += p.Value
				}
			}
		}
	}
	if counts[string(onceflow.OutcomeNotStored)] != 2 || counts[string(onceflow.OutcomeRetryable)] != 1 {
		t.Fatalf("onceflow.executions by outcome = %v, want not_stored 2 (the 202s) and retryable 1 (the 503)", counts)
	}
}
