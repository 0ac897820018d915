package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/worker"
)

func noEnv(string) string { return "" }

func TestParseWorkerFlagsPrefersFlagsThenEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"TEMPORAL_ADDRESS": "temporal:7233", "REDIS_URL": "redis://env:6379/1", "ONCEFLOW_SECRET": "from-env",
		"HTTP_ADDR": "0.0.0.0:9000", "ONCEFLOW_LEASE": "20s",
	}
	cfg, err := cli.ParseWorkerFlags("worker", []string{"-redis-url", "redis://flag:6379/2", "-namespace", "payments"}, func(k string) string { return env[k] }, nil, cli.Help{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TemporalAddress != "temporal:7233" || cfg.RedisURL != "redis://flag:6379/2" || cfg.Namespace != "payments" ||
		string(cfg.Secret) != "from-env" || cfg.HTTPAddr != "0.0.0.0:9000" || cfg.Lease != 20*time.Second || cfg.Dev {
		t.Fatalf("cfg = %+v", cfg)
	}
}

func TestParseWorkerFlagsAutoPipelineReads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{{nil, "", true}, {[]string{"-redis-auto-pipeline=false"}, "", false}, {nil, "false", false}, {[]string{"-redis-auto-pipeline"}, "false", true}, {[]string{"-redis-auto-pipeline=false"}, "true", false}} {
		env := map[string]string{"ONCEFLOW_REDIS_AUTO_PIPELINE": tc.env}
		cfg, err := cli.ParseWorkerFlags("worker", tc.args, func(k string) string { return env[k] }, nil, cli.Help{})
		if err != nil {
			t.Fatal(err)
		}
		if got := !cfg.RedisNoAutoPipeline; got != tc.want {
			t.Fatalf("%v with ONCEFLOW_REDIS_AUTO_PIPELINE=%q: auto-pipelined = %t, want %t", tc.args, tc.env, got, tc.want)
		}
	}
}

func TestParseWorkerFlagsNamesABadValue(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-lease", "soon"}, {"-max-concurrent-activities", "many"}, {"-secret-version", "0"}, {"extra"}} {
		if _, err := cli.ParseWorkerFlags("worker", args, noEnv, nil, cli.Help{}); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("%q: err = %v, want it to name the flag", args, err)
		}
	}
}

// The Temporal connection flags and the SDK's worker options reach the
// Config, and through it the client options.
func TestTemporalFlagsAndWorkerOptions(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TEMPORAL_API_KEY": "key-123", "TEMPORAL_ADDRESS": "ns.tmprl.cloud:7233", "TEMPORAL_NAMESPACE": "ns.acct"}
	cfg, err := cli.ParseWorkerFlags("worker", []string{"-max-concurrent-activities", "7", "-sticky-schedule-to-start-timeout", "3s",
		"-temporal-tls-server-name", "temporal.test"}, func(k string) string { return env[k] }, nil, cli.Help{})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cfg.TemporalClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials == nil || opts.ConnectionOptions.TLS == nil || opts.ConnectionOptions.TLS.ServerName != "temporal.test" ||
		opts.Namespace != "ns.acct" || opts.HostPort != "ns.tmprl.cloud:7233" {
		t.Fatalf("options = %+v", opts)
	}
	if cfg.WorkerOptions.MaxConcurrentActivityExecutionSize != 7 || cfg.WorkerOptions.StickyScheduleToStartTimeout != 3*time.Second {
		t.Fatalf("worker options = %+v", cfg.WorkerOptions)
	}
	// What the flags leave empty, New fills in.
	cfg.Secret = nil
	cfg.Dev = true
	w, err := worker.New(cfg)
	if err != nil || w.Config().TaskQueue != worker.DefaultConfig().TaskQueue {
		t.Fatalf("New: %v", err)
	}
}

// The HTTP server's bounds come from flags or their variables; a bad one
// is named.
func TestParseWorkerFlagsHTTPBounds(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HTTP_READ_TIMEOUT": "10s", "HTTP_MAX_CONNS": "64", "HTTP_MAX_IDLE_CONNS": "32"}
	cfg, err := cli.ParseWorkerFlags("worker", []string{"-http-read-header-timeout", "2s", "-http-idle-timeout", "15s", "-http-max-body-bytes", "65536",
		"-http-max-conns-per-client", "8", "-http-max-header-bytes", "16384"},
		func(k string) string { return env[k] }, nil, cli.Help{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPReadHeaderTimeout != 2*time.Second || cfg.HTTPReadTimeout != 10*time.Second || cfg.HTTPIdleTimeout != 15*time.Second ||
		cfg.HTTPMaxConns != 64 || cfg.HTTPMaxBodyBytes != 65536 || cfg.HTTPMaxIdleConns != 32 || cfg.HTTPMaxConnsPerClient != 8 || cfg.HTTPMaxHeaderBytes != 16384 {
		t.Fatalf("cfg = %+v", cfg)
	}
	for _, args := range [][]string{{"-http-read-timeout", "0s"}, {"-http-idle-timeout", "soon"}, {"-http-read-header-timeout", "-1s"},
		{"-http-max-conns", "0"}, {"-http-max-body-bytes", "1MiB"}, {"-http-max-idle-conns", "-1"}, {"-http-max-conns-per-client", "x"},
		{"-http-max-header-bytes", "64KiB"}} {
		if _, err := cli.ParseWorkerFlags("worker", args, noEnv, nil, cli.Help{}); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("%q: err = %v, want it to name the flag", args, err)
		}
	}
}

// Under -dev the HTTP listener (with the console, open without a token)
// stays on loopback.
func TestParseWorkerFlagsDevListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"", "off", "127.0.0.1:8080", "127.0.0.1:0", "[::1]:8080", "localhost:9000"} {
		if _, err := cli.ParseWorkerFlags("worker", []string{"-dev", "-http", addr}, noEnv, nil, cli.Help{}); err != nil {
			t.Errorf("-dev -http %q: %v", addr, err)
		}
	}
	for _, addr := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "192.168.1.10:8080", "evil.example:8080", "localhost"} {
		_, err := cli.ParseWorkerFlags("worker", []string{"-dev"}, func(k string) string { return map[string]string{"HTTP_ADDR": addr}[k] }, nil, cli.Help{})
		if err == nil || !strings.Contains(err.Error(), "loopback") || !strings.Contains(err.Error(), "-http") {
			t.Errorf("-dev with HTTP_ADDR=%q: err = %v, want a refusal naming -http and loopback", addr, err)
		}
	}
	// Outside -dev the address is the operator's choice.
	if _, err := cli.ParseWorkerFlags("worker", []string{"-http", "0.0.0.0:8080"}, noEnv, nil, cli.Help{}); err != nil {
		t.Fatal(err)
	}
}
