package worker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

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
		o.HostPort = DefaultTemporalAddress
	}
	if o.Namespace == "" {
		o.Namespace = c.Namespace
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
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
		o.MetricsHandler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{Meter: c.MeterProvider.Meter("go.temporal.io/sdk")})
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
		return nil, errors.New("worker: give both -temporal-tls-cert and -temporal-tls-key (TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY), or neither")
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

// RegisterTemporalFlags defines the Temporal connection flags of the worker
// (-temporal-address, -namespace, the TLS files, the API key) on fs, each
// falling back to its environment variable through getenv: for commands of
// your own that talk to the same Temporal as the worker, with Dial.
func RegisterTemporalFlags(fs *flag.FlagSet, c *Config, getenv func(string) string) {
	registerTemporalFlags(fs, c, envOr(getenv))
}

// Dial connects to Temporal with c's TemporalClientOptions; the error says
// which flags to check.
func Dial(ctx context.Context, c Config) (client.Client, error) { return dial(ctx, c, "worker") }

// envOr returns a lookup of getenv with a default.
func envOr(getenv func(string) string) func(key, def string) string {
	return func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
}

// registerTemporalFlags defines the flags of the Temporal connection, each
// falling back to an environment variable (the Temporal CLI's names where
// it has one), on fs: the worker and the operator commands share them.
func registerTemporalFlags(fs *flag.FlagSet, c *Config, env func(key, def string) string) {
	fs.StringVar(&c.TemporalAddress, "temporal-address", env("TEMPORAL_ADDRESS", ""), "Temporal frontend host:port (TEMPORAL_ADDRESS; default "+DefaultTemporalAddress+")")
	fs.StringVar(&c.Namespace, "namespace", env("TEMPORAL_NAMESPACE", ""), "Temporal namespace (TEMPORAL_NAMESPACE; default "+DefaultNamespace+")")
	tlsDefault, _ := strconv.ParseBool(env("TEMPORAL_TLS", "false"))
	fs.BoolVar(&c.TemporalTLS, "temporal-tls", tlsDefault, "connect to Temporal over TLS with the system's roots (TEMPORAL_TLS=true); the TLS files and an API key imply it")
	fs.StringVar(&c.TemporalTLSCertFile, "temporal-tls-cert", env("TEMPORAL_TLS_CERT", ""), "client certificate (PEM) for mutual TLS with Temporal (TEMPORAL_TLS_CERT)")
	fs.StringVar(&c.TemporalTLSKeyFile, "temporal-tls-key", env("TEMPORAL_TLS_KEY", ""), "its private key (PEM) (TEMPORAL_TLS_KEY)")
	fs.StringVar(&c.TemporalTLSCAFile, "temporal-tls-ca", env("TEMPORAL_TLS_CA", ""), "CA (PEM) of the Temporal server's certificate (TEMPORAL_TLS_CA)")
	fs.StringVar(&c.TemporalTLSServerName, "temporal-tls-server-name", env("TEMPORAL_TLS_SERVER_NAME", ""), "name to check the server's certificate against (TEMPORAL_TLS_SERVER_NAME; default the address's host)")
	fs.StringVar(&c.TemporalAPIKey, "temporal-api-key", env("TEMPORAL_API_KEY", ""), "API key for Temporal Cloud (TEMPORAL_API_KEY; prefer the variable: flags show in ps)")
}
