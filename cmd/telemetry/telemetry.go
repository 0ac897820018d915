// Package telemetry sets up the OpenTelemetry SDK for cmd/worker: metrics
// in a Prometheus registry served on /metrics, and OTLP export of traces
// and metrics when the standard OTEL_EXPORTER_OTLP_* variables say where.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	idemwf "github.com/onceflow/onceflow/workflow"
)

// Telemetry is the worker's OpenTelemetry SDK.
type Telemetry struct {
	// MeterProvider feeds the Prometheus registry (and OTLP when set).
	MeterProvider *sdkmetric.MeterProvider
	// TracerProvider exports spans over OTLP; nil when no OTLP endpoint
	// is set (nothing is traced then).
	TracerProvider *sdktrace.TracerProvider
	// Metrics serves the registry in the Prometheus text format.
	Metrics http.Handler
}

// Setup builds the SDK. getenv reads the OTEL_* variables: with
// OTEL_EXPORTER_OTLP_ENDPOINT (or its _TRACES_ / _METRICS_ variants) set,
// traces and metrics are also exported over OTLP/gRPC, configured by the
// standard variables. OTEL_SERVICE_NAME names the service (default
// onceflow-worker).
func Setup(ctx context.Context, getenv func(string) string) (*Telemetry, error) {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(serviceName(getenv))))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	prom, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: Prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(prom), sdkmetric.WithView(describe)}
	if otlp(getenv, "METRICS") {
		exp, err := otlpmetricgrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP metrics (check OTEL_EXPORTER_OTLP_*): %w", err)
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	t := &Telemetry{MeterProvider: sdkmetric.NewMeterProvider(mopts...), Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	if otlp(getenv, "TRACES") {
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("telemetry: OTLP traces (check OTEL_EXPORTER_OTLP_*): %w", err), t.MeterProvider.Shutdown(ctx))
		}
		t.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))
	}
	return t, nil
}

// Shutdown flushes and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	err := t.MeterProvider.Shutdown(ctx)
	if t.TracerProvider != nil {
		err = errors.Join(err, t.TracerProvider.Shutdown(ctx))
	}
	return err
}

// describe gives the instruments that come without a description their
// Prometheus HELP text: the workflows' recovery counters (named as
// docs/operations.md lists them) and the Temporal SDK's metrics, whose
// handler registers none.
func describe(inst sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if inst.Description != "" {
		return sdkmetric.Stream{}, false
	}
	var d string
	switch {
	case inst.Name == "onceflow_recoveries_opened":
		d = "Incidents that began waiting for an operator's decision (counted as they happen, not during replay; for the number waiting now see onceflow_pending_recoveries)."
	case inst.Name == "onceflow_recoveries_closed":
		d = "Incidents that stopped waiting for a decision: a decision applied, or the workflow ended."
	case inst.Name == "onceflow_recoveries_decided_automatically":
		d = "Unknown effects a workflow decided by itself, by decision and basis (idempotent downstream, a reconcile's proof, a settled lookup): no incident, no page."
	case inst.Name == "onceflow_recovery_decisions_refused":
		d = "Decisions a workflow refused: stale, duplicate, unknown incident, or a result that does not decode."
	case inst.Name == "onceflow_recovery_retention_refusals":
		d = "Retries of an unknown effect withheld past the downstream's retention, by who asked: automatic, operator."
	case strings.HasPrefix(inst.Name, "temporal_"):
		d = "Temporal Go SDK metric " + inst.Name + ": https://docs.temporal.io/references/sdk-metrics"
	default:
		return sdkmetric.Stream{}, false
	}
	return sdkmetric.Stream{Name: inst.Name, Description: d, Unit: inst.Unit}, true
}

// MetricPendingRecoveries is the gauge WatchPending keeps: the running
// workflows that wait on at least one recovery decision, as visibility
// counts them (idemwf.PendingSearchAttribute > 0).
const MetricPendingRecoveries = "onceflow.pending_recoveries"

// MetricPendingCountErrors counts the visibility counts behind
// MetricPendingRecoveries that failed; while the last one failed the gauge
// is not exported, so an alert on its absence fires.
const MetricPendingCountErrors = "onceflow.pending_recoveries.count_errors"

// PendingConfig configures WatchPending.
type PendingConfig struct {
	// Count counts the workflows waiting on a decision
	// (operator.CountPending, one visibility request). Required.
	Count func(context.Context) (int64, error)
	// Every is how often it counts. Default 15 s (a scrape interval).
	Every time.Duration
	// Timeout bounds one count. Default 5 s.
	Timeout time.Duration
}

// WatchPending exports MetricPendingRecoveries: it counts at once, then
// every cfg.Every, until ctx is done. The gauge reads the last count, so
// a scrape never waits on Temporal, and it is right after a restart:
// visibility keeps the figure, not the process. It returns once the
// instruments are registered.
func (t *Telemetry) WatchPending(ctx context.Context, cfg PendingConfig) error {
	if cfg.Count == nil {
		return errors.New("telemetry: WatchPending needs PendingConfig.Count")
	}
	if cfg.Every <= 0 {
		cfg.Every = 15 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	m := t.MeterProvider.Meter("github.com/onceflow/onceflow/cmd/telemetry")
	errs, err := m.Int64Counter(MetricPendingCountErrors,
		metric.WithDescription("Visibility counts behind onceflow_pending_recoveries that failed (the gauge is absent while the last one failed)."))
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	var last atomic.Int64 // the last count; -1: none, or the last one failed
	last.Store(-1)
	gauge, err := m.Int64ObservableGauge(MetricPendingRecoveries,
		metric.WithDescription("Running workflows waiting on at least one recovery decision, counted by visibility ("+idemwf.PendingSearchAttribute+" > 0): right after restarts."))
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if n := last.Load(); n >= 0 {
			o.ObserveInt64(gauge, n)
		}
		return nil
	}, gauge)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	count := func() {
		cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		n, err := cfg.Count(cctx)
		if err != nil {
			last.Store(-1)
			errs.Add(context.WithoutCancel(ctx), 1)
			return
		}
		last.Store(n)
	}
	count()
	go func() {
		defer func() { _ = reg.Unregister() }()
		tick := time.NewTicker(cfg.Every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				count()
			}
		}
	}()
	return nil
}

func otlp(getenv func(string) string, signal string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

func serviceName(getenv func(string) string) string {
	if n := getenv("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return "onceflow-worker"
}
