// Package cli is the command-line glue of cmd/worker that more than the
// binary needs: the worker's flags (each falling back to an environment
// variable) mapped onto a worker.Config, the Temporal and Redis
// connections of the operator commands, and the operator commands
// themselves (pending, resolve, reopen, inspect) on package operator,
// which the end-to-end tests and cmd/chaos drive as an operator would.
package cli

import (
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/worker"
)

// ParseWorkerFlags reads a worker.Config from command-line flags, each of
// which falls back to an environment variable, and then to its default
// (left empty: worker.New fills it in). getenv is usually os.Getenv. extra,
// when set, defines flags of the caller's own on the flag set before it is
// parsed (cmd/worker adds the example's ledger and gateway flags this
// way); read their environment variables in extra, as these flags do.
// -h prints help to help.Out and returns flag.ErrHelp; a bad flag or value
// is a *UsageError.
func ParseWorkerFlags(name string, args []string, getenv func(string) string, extra func(*flag.FlagSet), help Help) (worker.Config, error) {
	var c worker.Config
	d := worker.DefaultConfig() // the defaults the help names
	fs := NewFlagSet(name)
	env := Env(getenv)
	var secret, lease, replay, retention, stop, version, redisTimeout, outcome, sticky, maxActivities, maxWorkflowTasks string
	var readHeader, read, idle, maxConns, maxIdle, perClient, maxHeader, maxBody, durableReplicas string
	fs.BoolVar(&c.Dev, "dev", env("ONCEFLOW_DEV", "") == "true",
		"development mode: start an embedded Temporal server and Redis for whatever is not given (ONCEFLOW_DEV=true)")
	temporalFlags(fs, &c, env)
	fs.StringVar(&c.TaskQueue, "task-queue", env("TEMPORAL_TASK_QUEUE", ""), "task queue (TEMPORAL_TASK_QUEUE; default "+d.TaskQueue+")")
	fs.StringVar(&c.RedisURL, "redis-url", env("REDIS_URL", ""), "Redis URL: redis://, redis+sentinel://, redis+cluster:// (REDIS_URL; default "+d.RedisURL+")")
	fs.BoolVar(&c.AllowEviction, "allow-eviction", env("ONCEFLOW_ALLOW_EVICTION", "") == "true",
		"start even if Redis' maxmemory-policy may evict records, with a warning (ONCEFLOW_ALLOW_EVICTION=true)")
	fs.BoolVar(&c.RequirePersistence, "require-persistence", env("ONCEFLOW_REQUIRE_PERSISTENCE", "") == "true",
		"refuse to start when Redis' persistence can lose an acknowledged record (appendonly, appendfsync, replicas), instead of warning (ONCEFLOW_REQUIRE_PERSISTENCE=true)")
	autoPipeline := fs.Bool("redis-auto-pipeline", env("ONCEFLOW_REDIS_AUTO_PIPELINE", "") != "false",
		"send the replay reads, claims and transitions of concurrent activities as pipelines, through go-redis' auto-pipeliner; =false turns it off (ONCEFLOW_REDIS_AUTO_PIPELINE=false)")
	fs.StringVar(&c.KeyNamespace, "key-namespace", env("ONCEFLOW_KEY_NAMESPACE", ""), "prefix of every Redis key (ONCEFLOW_KEY_NAMESPACE; default "+d.KeyNamespace+")")
	var durability string
	fs.StringVar(&durability, "redis-durability", env("ONCEFLOW_REDIS_DURABILITY", ""), "what a store write waits for: none, replicas (WAIT) or aof (WAITAOF, Redis 7.2+) (ONCEFLOW_REDIS_DURABILITY; default none)")
	fs.StringVar(&durableReplicas, "redis-durable-replicas", env("ONCEFLOW_REDIS_DURABLE_REPLICAS", ""), "how many replicas -redis-durability waits for (ONCEFLOW_REDIS_DURABLE_REPLICAS; default 1; under Sentinel: all of them)")
	fs.StringVar(&redisTimeout, "redis-timeout", env("REDIS_TIMEOUT", ""), "bound of each Redis call of the idempotency store (REDIS_TIMEOUT; default "+d.RedisCommandTimeout.String()+")")
	fs.StringVar(&secret, "secret", env("ONCEFLOW_SECRET", ""), "digest secret, at least 32 random bytes (openssl rand -hex 32); required unless -dev (ONCEFLOW_SECRET; prefer the variable: flags show in ps)")
	fs.StringVar(&version, "secret-version", env("ONCEFLOW_SECRET_VERSION", "1"), "digest version of the secret; bump it when rotating (ONCEFLOW_SECRET_VERSION)")
	fs.StringVar(&lease, "lease", env("ONCEFLOW_LEASE", ""), "processing lease (ONCEFLOW_LEASE; default "+d.Lease.String()+")")
	fs.StringVar(&replay, "replay-ttl", env("ONCEFLOW_REPLAY_TTL", ""), "how long results are replayed (ONCEFLOW_REPLAY_TTL; default 24h)")
	fs.StringVar(&retention, "failure-retention", env("ONCEFLOW_FAILURE_RETENTION", ""), "how long failed and abandoned records are kept (ONCEFLOW_FAILURE_RETENTION; default 24h)")
	fs.StringVar(&stop, "stop-timeout", env("ONCEFLOW_STOP_TIMEOUT", ""), "how long in-flight activities may finish after SIGTERM (ONCEFLOW_STOP_TIMEOUT; default "+d.StopTimeout.String()+")")
	fs.StringVar(&outcome, "outcome-timeout", env("ONCEFLOW_OUTCOME_TIMEOUT", ""), "then, how long cancelled activities may take to record their outcome (ONCEFLOW_OUTCOME_TIMEOUT; default "+d.OutcomeTimeout.String()+")")
	fs.StringVar(&maxActivities, "max-concurrent-activities", env("ONCEFLOW_MAX_CONCURRENT_ACTIVITIES", ""), "activities run at once (ONCEFLOW_MAX_CONCURRENT_ACTIVITIES; default the SDK's)")
	fs.StringVar(&maxWorkflowTasks, "max-concurrent-workflow-tasks", env("ONCEFLOW_MAX_CONCURRENT_WORKFLOW_TASKS", ""), "workflow tasks run at once (ONCEFLOW_MAX_CONCURRENT_WORKFLOW_TASKS; default the SDK's)")
	fs.StringVar(&sticky, "sticky-schedule-to-start-timeout", env("ONCEFLOW_STICKY_SCHEDULE_TO_START_TIMEOUT", ""), "sticky workflow task schedule-to-start timeout (ONCEFLOW_STICKY_SCHEDULE_TO_START_TIMEOUT; default the SDK's)")
	fs.StringVar(&c.HTTPAddr, "http", env("HTTP_ADDR", ""), "listen address of /healthz and /readyz, or off; on loopback under -dev (HTTP_ADDR; default "+d.HTTPAddr+")")
	fs.StringVar(&readHeader, "http-read-header-timeout", env("HTTP_READ_HEADER_TIMEOUT", ""),
		"how long the HTTP server waits for a request's headers (HTTP_READ_HEADER_TIMEOUT; default "+d.HTTPReadHeaderTimeout.String()+")")
	fs.StringVar(&read, "http-read-timeout", env("HTTP_READ_TIMEOUT", ""),
		"how long it waits for a whole request, headers and body (HTTP_READ_TIMEOUT; default "+d.HTTPReadTimeout.String()+")")
	fs.StringVar(&idle, "http-idle-timeout", env("HTTP_IDLE_TIMEOUT", ""),
		"how long a keep-alive connection may wait for its next request (HTTP_IDLE_TIMEOUT; default "+d.HTTPIdleTimeout.String()+")")
	fs.StringVar(&maxConns, "http-max-conns", env("HTTP_MAX_CONNS", ""),
		"connections the HTTP server holds at once; a new one closes the longest-idle keep-alive, and waits only while all are busy (HTTP_MAX_CONNS; default "+
			strconv.Itoa(d.HTTPMaxConns)+")")
	fs.StringVar(&maxIdle, "http-max-idle-conns", env("HTTP_MAX_IDLE_CONNS", ""),
		"keep-alive connections left waiting for a next request; over it the longest-idle one is closed (HTTP_MAX_IDLE_CONNS; default "+
			strconv.Itoa(d.HTTPMaxIdleConns)+")")
	fs.StringVar(&perClient, "http-max-conns-per-client", env("HTTP_MAX_CONNS_PER_CLIENT", ""),
		"connections one client address (IPv4 address, IPv6 /64) may hold; leave it unset behind a proxy, whose connections share its address (HTTP_MAX_CONNS_PER_CLIENT; default no limit)")
	fs.StringVar(&maxHeader, "http-max-header-bytes", env("HTTP_MAX_HEADER_BYTES", ""),
		"largest request headers, the request line included: 431 over it (HTTP_MAX_HEADER_BYTES; default "+strconv.Itoa(d.HTTPMaxHeaderBytes)+")")
	fs.StringVar(&maxBody, "http-max-body-bytes", env("HTTP_MAX_BODY_BYTES", ""),
		"largest request body, on every route: 413 over it (HTTP_MAX_BODY_BYTES; default "+strconv.FormatInt(d.HTTPMaxBodyBytes, 10)+")")
	if extra != nil {
		extra(fs)
	}
	if err := Parse(fs, args, help); err != nil {
		return worker.Config{}, err
	}
	c.RedisDurability = redisstore.Durability(durability)
	c.RedisNoAutoPipeline = !*autoPipeline
	c, err := checkWorkerFlags(c, secret, version, lease, replay, retention, stop, redisTimeout, outcome, sticky, maxActivities, maxWorkflowTasks, readHeader, read, idle, maxConns, maxIdle, perClient, maxHeader, maxBody, durableReplicas)
	if err != nil {
		return worker.Config{}, &UsageError{Command: name, Err: err}
	}
	return c, nil
}

// checkWorkerFlags reads the flags' values that need parsing into c.
func checkWorkerFlags(c worker.Config, secret, version, lease, replay, retention, stop, redisTimeout, outcome, sticky, maxActivities, maxWorkflowTasks,
	readHeader, read, idle, maxConns, maxIdle, perClient, maxHeader, maxBody, durableReplicas string,
) (worker.Config, error) {
	c.Secret = []byte(secret)
	var err error
	if c.SecretVersion, err = strconv.Atoi(version); err != nil || c.SecretVersion <= 0 {
		return worker.Config{}, fmt.Errorf("worker: -secret-version / ONCEFLOW_SECRET_VERSION must be a positive integer, got %q", version)
	}
	for _, d := range []struct {
		flag, val string
		dst       *time.Duration
	}{{"-lease / ONCEFLOW_LEASE", lease, &c.Lease}, {"-replay-ttl / ONCEFLOW_REPLAY_TTL", replay, &c.ReplayTTL}, {"-failure-retention / ONCEFLOW_FAILURE_RETENTION", retention, &c.FailureRetention},
		{"-stop-timeout / ONCEFLOW_STOP_TIMEOUT", stop, &c.StopTimeout}, {"-redis-timeout / REDIS_TIMEOUT", redisTimeout, &c.RedisCommandTimeout},
		{"-outcome-timeout / ONCEFLOW_OUTCOME_TIMEOUT", outcome, &c.OutcomeTimeout},
		{"-sticky-schedule-to-start-timeout / ONCEFLOW_STICKY_SCHEDULE_TO_START_TIMEOUT", sticky, &c.WorkerOptions.StickyScheduleToStartTimeout},
		{"-http-read-header-timeout / HTTP_READ_HEADER_TIMEOUT", readHeader, &c.HTTPReadHeaderTimeout}, {"-http-read-timeout / HTTP_READ_TIMEOUT", read, &c.HTTPReadTimeout},
		{"-http-idle-timeout / HTTP_IDLE_TIMEOUT", idle, &c.HTTPIdleTimeout}} {
		if d.val == "" {
			continue
		}
		if *d.dst, err = time.ParseDuration(d.val); err != nil || *d.dst <= 0 {
			return worker.Config{}, fmt.Errorf("worker: %s must be a positive duration such as 30s, got %q", d.flag, d.val)
		}
	}
	for _, n := range []struct {
		flag, val string
		dst       *int
	}{{"-max-concurrent-activities / ONCEFLOW_MAX_CONCURRENT_ACTIVITIES", maxActivities, &c.WorkerOptions.MaxConcurrentActivityExecutionSize},
		{"-max-concurrent-workflow-tasks / ONCEFLOW_MAX_CONCURRENT_WORKFLOW_TASKS", maxWorkflowTasks, &c.WorkerOptions.MaxConcurrentWorkflowTaskExecutionSize},
		{"-http-max-conns / HTTP_MAX_CONNS", maxConns, &c.HTTPMaxConns},
		{"-http-max-idle-conns / HTTP_MAX_IDLE_CONNS", maxIdle, &c.HTTPMaxIdleConns},
		{"-http-max-conns-per-client / HTTP_MAX_CONNS_PER_CLIENT", perClient, &c.HTTPMaxConnsPerClient},
		{"-http-max-header-bytes / HTTP_MAX_HEADER_BYTES", maxHeader, &c.HTTPMaxHeaderBytes},
		{"-redis-durable-replicas / ONCEFLOW_REDIS_DURABLE_REPLICAS", durableReplicas, &c.RedisDurableReplicas}} {
		if n.val == "" {
			continue
		}
		if *n.dst, err = strconv.Atoi(n.val); err != nil || *n.dst <= 0 {
			return worker.Config{}, fmt.Errorf("worker: %s must be a positive integer, got %q", n.flag, n.val)
		}
	}
	if maxBody != "" {
		if c.HTTPMaxBodyBytes, err = strconv.ParseInt(maxBody, 10, 64); err != nil || c.HTTPMaxBodyBytes <= 0 {
			return worker.Config{}, fmt.Errorf("worker: -http-max-body-bytes / HTTP_MAX_BODY_BYTES must be a positive number of bytes, got %q", maxBody)
		}
	}
	if c.Dev && !loopbackAddr(c.HTTPAddr) {
		return worker.Config{}, fmt.Errorf("worker: under -dev -http / HTTP_ADDR must be on loopback (127.0.0.1, [::1] or localhost, any port), or off; got %q: "+
			"a -dev worker's console needs no token", c.HTTPAddr)
	}
	return c, nil
}

// loopbackAddr: addr (-http) listens on loopback only, or not at all. The
// empty address is the default, 127.0.0.1:8080.
func loopbackAddr(addr string) bool {
	if addr == "" || addr == "off" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TemporalFlags defines the Temporal connection flags of the worker
// (-temporal-address, -namespace, the TLS files, the API key) on fs, each
// falling back to its environment variable through getenv: the worker,
// the operator commands and cmd/worker's order and trace share them.
func TemporalFlags(fs *flag.FlagSet, c *worker.Config, getenv func(string) string) {
	temporalFlags(fs, c, Env(getenv))
}

// Env returns a lookup of getenv with a default.
func Env(getenv func(string) string) func(key, def string) string {
	return func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
}

// temporalFlags defines the flags of the Temporal connection, each
// falling back to an environment variable (the Temporal CLI's names where
// it has one), on fs.
func temporalFlags(fs *flag.FlagSet, c *worker.Config, env func(key, def string) string) {
	d := worker.DefaultConfig()
	fs.StringVar(&c.TemporalAddress, "temporal-address", env("TEMPORAL_ADDRESS", ""), "Temporal frontend host:port (TEMPORAL_ADDRESS; default "+d.TemporalAddress+")")
	fs.StringVar(&c.Namespace, "namespace", env("TEMPORAL_NAMESPACE", ""), "Temporal namespace (TEMPORAL_NAMESPACE; default "+d.Namespace+")")
	tlsDefault, _ := strconv.ParseBool(env("TEMPORAL_TLS", "false"))
	fs.BoolVar(&c.TemporalTLS, "temporal-tls", tlsDefault, "connect to Temporal over TLS with the system's roots (TEMPORAL_TLS=true); the TLS files and an API key imply it")
	fs.StringVar(&c.TemporalTLSCertFile, "temporal-tls-cert", env("TEMPORAL_TLS_CERT", ""), "client certificate (PEM) for mutual TLS with Temporal (TEMPORAL_TLS_CERT)")
	fs.StringVar(&c.TemporalTLSKeyFile, "temporal-tls-key", env("TEMPORAL_TLS_KEY", ""), "its private key (PEM) (TEMPORAL_TLS_KEY)")
	fs.StringVar(&c.TemporalTLSCAFile, "temporal-tls-ca", env("TEMPORAL_TLS_CA", ""), "CA (PEM) of the Temporal server's certificate (TEMPORAL_TLS_CA)")
	fs.StringVar(&c.TemporalTLSServerName, "temporal-tls-server-name", env("TEMPORAL_TLS_SERVER_NAME", ""), "name to check the server's certificate against (TEMPORAL_TLS_SERVER_NAME; default the address's host)")
	fs.StringVar(&c.TemporalAPIKey, "temporal-api-key", env("TEMPORAL_API_KEY", ""), "API key for Temporal Cloud (TEMPORAL_API_KEY; prefer the variable: flags show in ps)")
}
