package worker

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"

	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	sdklog "go.temporal.io/sdk/log"
)

// TemporalClientOptions returns the options Run dials Temporal with, and the
// operator commands too: c.ClientOptions, with HostPort, Namespace and the
// Logger filled in from c when they are empty, and the TLS configuration
// and API key credentials c asks for.
func (c Config) TemporalClientOptions() (client.Options, error) {
	o := c.ClientOptions
	if o.HostPort == "" {
		o.HostPort = c.TemporalAddress
	}
	if o.HostPort == "" {
		o.HostPort = defaultTemporalAddress
	}
	if o.Namespace == "" {
		o.Namespace = c.Namespace
	}
	if o.Namespace == "" {
		o.Namespace = defaultNamespace
	}
	if o.Logger == nil {
		l := c.Logger
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		o.Logger = sdklog.NewStructuredLogger(l)
	}
	if c.TracerProvider != nil {
		ti, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: c.TracerProvider.Tracer("go.temporal.io/sdk")})
		if err != nil {
			return client.Options{}, fmt.Errorf("worker: Temporal tracing: %w", err)
		}
		o.Interceptors = append(o.Interceptors, ti)
	}
	if c.MeterProvider != nil && o.MetricsHandler == nil {
		// Monotonic counters: the SDK's counters (and the workflows',
		// onceflow_recoveries_opened and the like) are counters to
		// Prometheus (_total), not gauges.
		o.MetricsHandler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter: c.MeterProvider.Meter("go.temporal.io/sdk"), UseMonotonicCounters: true,
		})
	}
	tlsConfig, err := c.temporalTLS(o.HostPort)
	if err != nil {
		return client.Options{}, err
	}
	if tlsConfig != nil && o.ConnectionOptions.TLS == nil {
		o.ConnectionOptions.TLS = tlsConfig
	}
	if c.TemporalAPIKey != "" && o.Credentials == nil {
		o.Credentials = client.NewAPIKeyStaticCredentials(c.TemporalAPIKey)
	}
	return o, nil
}

// temporalTLS builds the TLS configuration the settings ask for, or nil
// for a plaintext connection.
func (c Config) temporalTLS(hostPort string) (*tls.Config, error) {
	if !c.TemporalTLS && c.TemporalTLSCertFile == "" && c.TemporalTLSKeyFile == "" && c.TemporalTLSCAFile == "" &&
		c.TemporalTLSServerName == "" && c.TemporalAPIKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TemporalTLSServerName}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(hostPort); err == nil {
			cfg.ServerName = host
		}
	}
	if (c.TemporalTLSCertFile == "") != (c.TemporalTLSKeyFile == "") {
		return nil, errTLSPair
	}
	if c.TemporalTLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TemporalTLSCertFile, c.TemporalTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("worker: load the Temporal client certificate (-temporal-tls-cert, -temporal-tls-key): %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if c.TemporalTLSCAFile != "" {
		pem, err := os.ReadFile(c.TemporalTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("worker: read the Temporal CA (-temporal-tls-ca): %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("worker: -temporal-tls-ca %s holds no PEM certificate", c.TemporalTLSCAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
