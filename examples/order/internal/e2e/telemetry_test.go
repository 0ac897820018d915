package e2e_test

// The worker's telemetry end to end: the executor's spans as children of
// the HTTP server's and of Temporal's activity spans, and its metrics on
// /metrics, through the same SDK set-up as cmd/worker.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/onceflow/onceflow/cmd/telemetry"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/worker"
)

func TestTelemetryOfAnOrder(t *testing.T) {
	t.Parallel()
	tel, err := telemetry.Setup(t.Context(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = tel.Shutdown(context.Background()) })

	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.configure = func(c *worker.Config) { c.MeterProvider, c.TracerProvider = tel.MeterProvider, tp }
	w, _ := a.startStoppableWorker(func(r worker.Registry) error {
		gw, err := order.NewGateway(a.l, order.GatewayConfig{})
		if err != nil {
			return err
		}
		if err := order.Register(r, a.l, gw); err != nil {
			return err
		}
		r.HTTP.Handle("GET /metrics", tel.Metrics)
		return order.RegisterAPI(r, a.l, 0, e2eWebhooks())
	})
	a.base = "http://" + w.HTTPAddr()

	principal := "Bearer " + a.key
	first := a.post("raw-key-e2e", a.orderBody(), "Authorization", principal)
	o := first.order(t)
	if first.status != http.StatusCreated {
		t.Fatalf("order: %v", first)
	}
	if r := a.post("raw-key-e2e", a.orderBody(), "Authorization", principal); r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replay: %v", r)
	}

	resp, err := http.Get(a.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(body)
	for _, want := range []string{
		`onceflow_executions_total{operation_code="orders-api",outcome="ran"} 1`,
		`onceflow_executions_total{operation_code="orders-api",outcome="replayed"} 1`,
		`onceflow_executions_total{operation_code="charge-card",outcome="ran"} 1`,
		`onceflow_phase_duration_seconds_bucket{operation_code="charge-card",phase="action"`,
		`onceflow_phase_duration_seconds_count{operation_code="charge-card",phase="claim"}`,
		// The SDK's counters are counters, its latencies in seconds.
		"# TYPE temporal_request_total counter",
		"# TYPE temporal_workflow_completed_total counter",
		"# TYPE temporal_activity_execution_latency_seconds histogram",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Every family has HELP text, and one label vocabulary: no
	// onceflow_-prefixed label.
	for _, l := range strings.Split(metrics, "\n") {
		if name, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			if !strings.Contains(metrics, "# HELP "+name+" ") || strings.Contains(metrics, "# HELP "+name+" \n") {
				t.Errorf("%s has no HELP text", name)
			}
		}
		if i := strings.IndexByte(l, '{'); !strings.HasPrefix(l, "#") && i >= 0 && strings.Contains(l[i:], "onceflow_") {
			t.Errorf("a label of another vocabulary: %s", l)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepLines(metrics, "onceflow_"))
	}

	got := spans.GetSpans()
	names := map[string]string{}
	for _, s := range got {
		names[s.SpanContext.SpanID().String()] = s.Name
	}
	parents := map[string]map[string]bool{} // execute span's code -> parent names
	children := map[string]bool{}
	for _, s := range got {
		parent := names[s.Parent.SpanID().String()]
		if strings.HasPrefix(s.Name, "onceflow.") {
			children[parent+">"+s.Name] = true
			for _, kv := range s.Attributes {
				v := kv.Value.String()
				if strings.Contains(v, o.WorkflowID) || strings.Contains(v, o.OrderID) {
					t.Errorf("span %s attribute %s = %q names the workflow or order", s.Name, kv.Key, v)
				}
			}
		}
		if s.Name == "onceflow.execute" {
			for _, kv := range s.Attributes {
				if kv.Key == "onceflow.operation_code" {
					if parents[kv.Value.AsString()] == nil {
						parents[kv.Value.AsString()] = map[string]bool{}
					}
					parents[kv.Value.AsString()][parent] = true
				}
			}
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "raw-key-e2e") || strings.Contains(v, a.key) || strings.Contains(v, a.account) {
				t.Errorf("span %s attribute %s = %q carries the raw key or principal", s.Name, kv.Key, v)
			}
		}
	}
	if !parents["orders-api"]["/orders"] && !parents["orders-api"]["POST /orders"] {
		t.Errorf("the orders-api execute span's parents are %v, want the HTTP server span", parents["orders-api"])
	}
	if !parents["charge-card"]["RunActivity:"+order.ChargeCardActivity] {
		t.Errorf("the charge-card execute span's parents are %v, want Temporal's activity span", parents["charge-card"])
	}
	for _, want := range []string{"onceflow.execute>onceflow.claim", "onceflow.execute>onceflow.action", "onceflow.execute>onceflow.complete"} {
		if !children[want] {
			t.Errorf("no span %s in %v", want, children)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
