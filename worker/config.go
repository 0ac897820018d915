package worker

import (
	"errors"
	"flag"
	"fmt"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// Defaults.
const (
	DefaultTemporalAddress = "localhost:7233"
	DefaultNamespace       = "default"
	DefaultTaskQueue       = "onceflow"
	DefaultRedisURL        = "redis://localhost:6379/0"
	DefaultHTTPAddr        = "127.0.0.1:8080"
	DefaultKeyNamespace    = "onceflow"
	DefaultStopTimeout     = 30 * time.Second
	DefaultOutcomeTimeout  = 10 * time.Second
)

// Config configures a Worker. Empty fields take their defaults.
type Config struct {
	// TemporalAddress is the Temporal frontend, host:port. Default
	// "localhost:7233".
	TemporalAddress string
	// Namespace is the Temporal namespace. Default "default".
	Namespace string
	// TemporalTLS connects to Temporal over TLS with the system's root
	// certificates (Temporal Cloud with an API key). Any of the TLS files
	// or an API key imply it.
	TemporalTLS bool
	// TemporalTLSCertFile and TemporalTLSKeyFile are the client
	// certificate and key (PEM) for mutual TLS.
	TemporalTLSCertFile, TemporalTLSKeyFile string
	// TemporalTLSCAFile is the CA (PEM) that signed the server's
	// certificate, when it is not in the system's roots.
	TemporalTLSCAFile string
	// TemporalTLSServerName is the name the server's certificate is
	// checked against. Default: the host of TemporalAddress.
	TemporalTLSServerName string
	// TemporalAPIKey authenticates to Temporal Cloud (or any server that
	// takes API keys). Prefer the TEMPORAL_API_KEY variable: flags show in
	// ps.
	TemporalAPIKey string
	// ClientOptions are passed to the Temporal client as they are: set
	// DataConverter, Interceptors, ContextPropagators, Identity and the
	// like here. HostPort, Namespace, Logger, and ConnectionOptions.TLS and
	// Credentials when TLS or an API key is set above, are filled in from
	// the fields of this Config when they are empty.
	ClientOptions client.Options
	// WorkerOptions are passed to the Temporal worker as they are
	// (concurrency limits, sticky schedule-to-start timeout, interceptors,
	// …); WorkerStopTimeout is StopTimeout when it is zero.
	WorkerOptions sdkworker.Options
	// TaskQueue is the task queue the worker polls. Default "onceflow".
	TaskQueue string
	// RedisURL selects Redis: "redis://[user:pass@]host:port/db" or
	// "rediss://…" for one server, "redis+sentinel://host:26379?master_name=mymaster&addr=host2:26379"
	// for Sentinel, "redis+cluster://host:7000?addr=host2:7001" for
	// Cluster. Default "redis://localhost:6379/0".
	RedisURL string
	// RedisCommandTimeout bounds each Redis call of the idempotency store
	// (redisstore.Config.CommandTimeout). Default 200ms. The lease's
	// safety margin must be at least twice it (see
	// idemstore.ExecutorConfig.SafetyMargin), so a short Lease needs a
	// short timeout.
	RedisCommandTimeout time.Duration
	// AllowEviction lets the worker start on a Redis whose
	// maxmemory-policy may evict keys (with a warning). By default it
	// refuses: an evicted record is a lost guarantee.
	AllowEviction bool
	// KeyNamespace prefixes every Redis key. Default "onceflow".
	KeyNamespace string
	// Secret keys the scope digests and owner tokens. Required unless Dev;
	// use at least 32 random bytes and keep it stable: a new secret is a
	// new set of records (bump SecretVersion when you rotate it).
	Secret []byte
	// SecretVersion is the digest version of Secret. Default 1.
	SecretVersion int
	// Lease, ReplayTTL and FailureRetention tune the executor; see
	// idemstore.ExecutorConfig for their defaults (30s, 24h, 24h).
	Lease            time.Duration
	ReplayTTL        time.Duration
	FailureRetention time.Duration
	// StopTimeout is how long in-flight activities may run on after a stop
	// before their contexts are cancelled (an activity cancelled mid-action
	// ends ABANDONED). Default 30s.
	StopTimeout time.Duration
	// OutcomeTimeout is how long a stopping worker then waits for the
	// cancelled activities to record their outcome in Redis before it
	// closes its clients. Default 10s.
	OutcomeTimeout time.Duration
	// HTTPAddr is where /healthz and /readyz are served. Default
	// "127.0.0.1:8080"; "off" disables the listener.
	HTTPAddr string
	// Dev marks a development worker: an empty Secret is replaced by a
	// fixed, public one.
	Dev bool
	// Logger receives the worker's logs. Default: JSON to stderr.
	Logger *slog.Logger
	// TracerProvider, when set, traces the worker: Temporal's client and
	// activities (the SDK's OpenTelemetry interceptor), every executor
	// phase as children of the activity's or HTTP request's span, go-redis
	// (redisotel) and the HTTP server (otelhttp). Default: no tracing.
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, receives the executor's metrics
	// (idemstore.Metric*), the Temporal SDK's (including the workflows'
	// onceflow_recoveries_opened / _closed, whose difference is the pending
	// recoveries), go-redis' and the HTTP server's. Default: none.
	MeterProvider metric.MeterProvider
	// Register adds the application's workflows and activities. Optional.
	Register func(Registry) error
	// RedisOptions, when set, is used as is instead of RedisURL (tests and
	// programs that build their own options).
	RedisOptions *redis.UniversalOptions
	// RedisOmitShebang sends the scripts without the Redis 7 "#!lua"
	// header, for Redis before 7 and miniredis (redisstore.Config.OmitShebang).
	RedisOmitShebang bool
}

// devSecret is the secret of -dev mode: public, so never for real data.
const devSecret = "onceflow-dev-secret-not-for-production"

func (c *Config) setDefaults() error {
	if c.TemporalAddress == "" {
		c.TemporalAddress = DefaultTemporalAddress
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.TaskQueue == "" {
		c.TaskQueue = DefaultTaskQueue
	}
	if c.RedisURL == "" {
		c.RedisURL = DefaultRedisURL
	}
	if c.KeyNamespace == "" {
		c.KeyNamespace = DefaultKeyNamespace
	}
	if c.SecretVersion == 0 {
		c.SecretVersion = 1
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.RedisCommandTimeout == 0 {
		c.RedisCommandTimeout = redisstore.DefaultCommandTimeout
	}
	if c.RedisCommandTimeout < 0 {
		return fmt.Errorf("worker: RedisCommandTimeout (-redis-timeout) must be positive, got %v", c.RedisCommandTimeout)
	}
	if c.StopTimeout < 0 {
		return fmt.Errorf("worker: StopTimeout (-stop-timeout) must be positive, got %v", c.StopTimeout)
	}
	if c.OutcomeTimeout == 0 {
		c.OutcomeTimeout = DefaultOutcomeTimeout
	}
	if c.OutcomeTimeout < 0 {
		return fmt.Errorf("worker: OutcomeTimeout (-outcome-timeout) must be positive, got %v", c.OutcomeTimeout)
	}
	if (c.TemporalTLSCertFile == "") != (c.TemporalTLSKeyFile == "") {
		return errors.New("worker: give both -temporal-tls-cert and -temporal-tls-key (TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY), or neither")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if len(c.Secret) == 0 {
		if !c.Dev {
			return errors.New("worker: the digest secret is empty: set ONCEFLOW_SECRET (or -secret) to at least 32 random bytes; only -dev runs without one")
		}
		c.Secret = []byte(devSecret)
	}
	if c.SecretVersion < 0 {
		return fmt.Errorf("worker: SecretVersion must be positive, got %d", c.SecretVersion)
	}
	if c.RedisOptions == nil {
		if _, err := ParseRedisURL(c.RedisURL); err != nil {
			return err
		}
	}
	// The executor validates the lease against the TTLs and the store's
	// command timeout, and names the setting.
	_, err := idemstore.NewExecutor(idemstore.ExecutorConfig{
		Store: noStore{timeout: c.RedisCommandTimeout}, Lease: c.Lease, ReplayTTL: c.ReplayTTL, FailureRetention: c.FailureRetention,
	})
	if err != nil {
		return fmt.Errorf("worker: %w (flags -lease, -replay-ttl, -failure-retention, -redis-timeout)", err)
	}
	return nil
}

// noStore lets setDefaults validate an executor configuration without a
// store: it has the command timeout the real one will have.
type noStore struct {
	idemstore.Store
	timeout time.Duration
}

func (s noStore) CommandTimeout() time.Duration { return s.timeout }

// ParseRedisURL turns a RedisURL into go-redis options for a standalone
// server, Sentinel or Cluster.
func ParseRedisURL(raw string) (*redis.UniversalOptions, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("worker: RedisURL %q: %w", raw, err)
	}
	bad := func(err error) (*redis.UniversalOptions, error) {
		return nil, fmt.Errorf("worker: RedisURL %q: %w (want redis://host:port/db, redis+sentinel://host:port?master_name=NAME or redis+cluster://host:port?addr=host2:port)", raw, err)
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
		o, err := redis.ParseURL(raw)
		if err != nil {
			return bad(err)
		}
		return &redis.UniversalOptions{
			Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
			Protocol: o.Protocol, ClientName: o.ClientName,
		}, nil
	case "redis+sentinel", "rediss+sentinel":
		o, err := redis.ParseFailoverURL(strings.Replace(raw, "+sentinel", "", 1))
		if err != nil {
			return bad(err)
		}
		if o.MasterName == "" {
			return bad(errors.New("master_name is required for Sentinel"))
		}
		return &redis.UniversalOptions{
			Addrs: o.SentinelAddrs, MasterName: o.MasterName, SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
			Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
		}, nil
	case "redis+cluster", "rediss+cluster":
		o, err := redis.ParseClusterURL(strings.Replace(raw, "+cluster", "", 1))
		if err != nil {
			return bad(err)
		}
		return &redis.UniversalOptions{
			Addrs: o.Addrs, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig, IsClusterMode: true,
		}, nil
	}
	return bad(fmt.Errorf("unknown scheme %q", u.Scheme))
}

// ParseFlags reads a Config from command-line flags, each of which falls
// back to an environment variable, and then to its default. getenv is
// usually os.Getenv.
func ParseFlags(name string, args []string, getenv func(string) string) (Config, error) {
	return ParseFlagsWith(name, args, getenv, nil)
}

// ParseFlagsWith is ParseFlags with flags of the caller's own: extra
// defines them on the flag set before it is parsed (cmd/worker adds the
// example's ledger and gateway flags this way). Read their environment
// variables in extra, as the worker's flags do.
func ParseFlagsWith(name string, args []string, getenv func(string) string, extra func(*flag.FlagSet)) (Config, error) {
	var c Config
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	env := envOr(getenv)
	var secret, lease, replay, retention, stop, version, redisTimeout, outcome, sticky, maxActivities, maxWorkflowTasks string
	fs.BoolVar(&c.Dev, "dev", env("ONCEFLOW_DEV", "") == "true",
		"development mode: start an embedded Temporal server and Redis for whatever is not given (ONCEFLOW_DEV=true)")
	registerTemporalFlags(fs, &c, env)
	fs.StringVar(&c.TaskQueue, "task-queue", env("TEMPORAL_TASK_QUEUE", ""), "task queue (TEMPORAL_TASK_QUEUE; default "+DefaultTaskQueue+")")
	fs.StringVar(&c.RedisURL, "redis-url", env("REDIS_URL", ""), "Redis URL: redis://, redis+sentinel://, redis+cluster:// (REDIS_URL; default "+DefaultRedisURL+")")
	fs.BoolVar(&c.AllowEviction, "allow-eviction", env("ONCEFLOW_ALLOW_EVICTION", "") == "true",
		"start even if Redis' maxmemory-policy may evict records, with a warning (ONCEFLOW_ALLOW_EVICTION=true)")
	fs.StringVar(&c.KeyNamespace, "key-namespace", env("ONCEFLOW_KEY_NAMESPACE", ""), "prefix of every Redis key (ONCEFLOW_KEY_NAMESPACE; default "+DefaultKeyNamespace+")")
	fs.StringVar(&redisTimeout, "redis-timeout", env("REDIS_TIMEOUT", ""), "bound of each Redis call of the idempotency store (REDIS_TIMEOUT; default 200ms)")
	fs.StringVar(&secret, "secret", env("ONCEFLOW_SECRET", ""), "digest secret, at least 32 random bytes; required unless -dev (ONCEFLOW_SECRET; prefer the variable: flags show in ps)")
	fs.StringVar(&version, "secret-version", env("ONCEFLOW_SECRET_VERSION", "1"), "digest version of the secret; bump it when rotating (ONCEFLOW_SECRET_VERSION)")
	fs.StringVar(&lease, "lease", env("ONCEFLOW_LEASE", ""), "processing lease (ONCEFLOW_LEASE; default 30s)")
	fs.StringVar(&replay, "replay-ttl", env("ONCEFLOW_REPLAY_TTL", ""), "how long results are replayed (ONCEFLOW_REPLAY_TTL; default 24h)")
	fs.StringVar(&retention, "failure-retention", env("ONCEFLOW_FAILURE_RETENTION", ""), "how long failed and abandoned records are kept (ONCEFLOW_FAILURE_RETENTION; default 24h)")
	fs.StringVar(&stop, "stop-timeout", env("ONCEFLOW_STOP_TIMEOUT", ""), "how long in-flight activities may finish after SIGTERM (ONCEFLOW_STOP_TIMEOUT; default 30s)")
	fs.StringVar(&outcome, "outcome-timeout", env("ONCEFLOW_OUTCOME_TIMEOUT", ""), "then, how long cancelled activities may take to record their outcome (ONCEFLOW_OUTCOME_TIMEOUT; default 10s)")
	fs.StringVar(&maxActivities, "max-concurrent-activities", env("ONCEFLOW_MAX_CONCURRENT_ACTIVITIES", ""), "activities run at once (ONCEFLOW_MAX_CONCURRENT_ACTIVITIES; default the SDK's)")
	fs.StringVar(&maxWorkflowTasks, "max-concurrent-workflow-tasks", env("ONCEFLOW_MAX_CONCURRENT_WORKFLOW_TASKS", ""), "workflow tasks run at once (ONCEFLOW_MAX_CONCURRENT_WORKFLOW_TASKS; default the SDK's)")
	fs.StringVar(&sticky, "sticky-schedule-to-start-timeout", env("ONCEFLOW_STICKY_SCHEDULE_TO_START_TIMEOUT", ""), "sticky workflow task schedule-to-start timeout (ONCEFLOW_STICKY_SCHEDULE_TO_START_TIMEOUT; default the SDK's)")
	fs.StringVar(&c.HTTPAddr, "http", env("HTTP_ADDR", ""), "listen address of /healthz and /readyz, or off (HTTP_ADDR; default "+DefaultHTTPAddr+")")
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("worker: unexpected arguments %q", fs.Args())
	}
	c.Secret = []byte(secret)
	var err error
	if c.SecretVersion, err = strconv.Atoi(version); err != nil || c.SecretVersion <= 0 {
		return Config{}, fmt.Errorf("worker: -secret-version / ONCEFLOW_SECRET_VERSION must be a positive integer, got %q", version)
	}
	for _, d := range []struct {
		flag, val string
		dst       *time.Duration
	}{{"-lease / ONCEFLOW_LEASE", lease, &c.Lease}, {"-replay-ttl / ONCEFLOW_REPLAY_TTL", replay, &c.ReplayTTL}, {"-failure-retention / ONCEFLOW_FAILURE_RETENTION", retention, &c.FailureRetention},
		{"-stop-timeout / ONCEFLOW_STOP_TIMEOUT", stop, &c.StopTimeout}, {"-redis-timeout / REDIS_TIMEOUT", redisTimeout, &c.RedisCommandTimeout},
		{"-outcome-timeout / ONCEFLOW_OUTCOME_TIMEOUT", outcome, &c.OutcomeTimeout},
		{"-sticky-schedule-to-start-timeout / ONCEFLOW_STICKY_SCHEDULE_TO_START_TIMEOUT", sticky, &c.WorkerOptions.StickyScheduleToStartTimeout}} {
		if d.val == "" {
			continue
		}
		if *d.dst, err = time.ParseDuration(d.val); err != nil || *d.dst <= 0 {
			return Config{}, fmt.Errorf("worker: %s must be a positive duration such as 30s, got %q", d.flag, d.val)
		}
	}
	for _, n := range []struct {
		flag, val string
		dst       *int
	}{{"-max-concurrent-activities / ONCEFLOW_MAX_CONCURRENT_ACTIVITIES", maxActivities, &c.WorkerOptions.MaxConcurrentActivityExecutionSize},
		{"-max-concurrent-workflow-tasks / ONCEFLOW_MAX_CONCURRENT_WORKFLOW_TASKS", maxWorkflowTasks, &c.WorkerOptions.MaxConcurrentWorkflowTaskExecutionSize}} {
		if n.val == "" {
			continue
		}
		if *n.dst, err = strconv.Atoi(n.val); err != nil || *n.dst <= 0 {
			return Config{}, fmt.Errorf("worker: %s must be a positive integer, got %q", n.flag, n.val)
		}
	}
	return c, nil
}
