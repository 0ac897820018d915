// Package telemetry sets up the OpenTelemetry SDK for cmd/worker: metrics
// in a Prometheus registry served on /metrics, and OTLP export of traces
// and metrics when the standard OTEL_EXPORTER_OTLP_* variables say where.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
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
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(prom)}
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

func otlp(getenv func(string) string, signal string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

func serviceName(getenv func(string) string) string {
	if n := getenv("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return "onceflow-worker"
}
