package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// The defaults of Config's fields, which withDefaults applies and
// DefaultConfig returns.
const (
	defaultTemporalAddress = "localhost:7233"
	defaultNamespace       = "default"
	defaultTaskQueue       = "onceflow"
	defaultRedisURL        = "redis://localhost:6379/0"
	defaultHTTPAddr        = "127.0.0.1:8080"
	defaultKeyNamespace    = "onceflow"
	defaultStopTimeout     = 30 * time.Second
	defaultOutcomeTimeout  = 10 * time.Second

	// The HTTP server's bounds (Config.HTTP*).
	defaultHTTPReadHeaderTimeout       = 5 * time.Second
	defaultHTTPReadTimeout             = 30 * time.Second
	defaultHTTPIdleTimeout             = 60 * time.Second
	defaultHTTPMaxConns                = 512
	defaultHTTPMaxIdleConns            = 256
	defaultHTTPMaxHeaderBytes          = 64 << 10
	defaultHTTPMaxBodyBytes      int64 = 1 << 20 // idemhttp's default MaxBodyBytes
	defaultHTTPBodyStartTimeout        = 2 * time.Second
	defaultHTTPMinBodyRate       int64 = 1 << 10 // bytes a second
	// defaultHTTPMaxActiveRequests and defaultHTTPMaxActiveRequestsPerClient
	// are the defaults of a server with the default HTTPMaxConns; a
	// smaller HTTPMaxConns lowers them (Config.HTTPMaxActiveRequests).
	defaultHTTPMaxActiveRequests          = 256
	defaultHTTPMaxActiveRequestsPerClient = 64
)

// defaultHTTPProbeRoutes are the routes the HTTP server never sheds nor
// counts among the active requests (Config.HTTPProbeRoutes): the
// worker's /healthz and /readyz, and the /metrics an application serves.
// A function, so that no caller shares (and can change) another's slice.
func defaultHTTPProbeRoutes() []string {
	return []string{"GET /healthz", "GET /readyz", "GET /metrics"}
}

// minSecretBytes is the shortest Secret New accepts outside Dev.
const minSecretBytes = 32

// Config configures a Worker. Empty fields take the default each field's
// comment names (DefaultConfig returns them all); New checks the result
// and refuses a configuration that cannot work with an error naming the
// setting. Only Secret is required, unless Dev.
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
	// RequirePersistence makes the worker refuse to start on a Redis whose
	// persistence can lose a record it acknowledged
	// (redisstore.Store.CheckPersistence: appendonly no, appendfsync other
	// than always without durability, fewer replicas than
	// RedisDurableReplicas). By default it starts with a warning: what Redis
	// loses, the workflow's history recovers (docs/recovery.md), at the cost
	// of a reconcile or an operator's decision.
	RequirePersistence bool
	// RedisDurability is what the store waits for after the writes a later
	// attempt relies on (redisstore.Config.Durability): "none" (the
	// default: the primary's reply), "replicas" (WAIT for
	// RedisDurableReplicas replicas) or "aof" (WAITAOF, Redis 7.2+). A
	// write it cannot confirm is an unknown outcome, never a success.
	// docs/production.md says what each keeps under which topology.
	RedisDurability redisstore.Durability
	// RedisDurableReplicas is how many replicas RedisDurability waits for.
	// Default 1 with "replicas" (the store's; DefaultConfig leaves it 0,
	// as "none" needs); under Sentinel, wait for every replica
	// (docs/production.md: WAIT 1 of 2 lost acknowledged completions in a
	// failover).
	RedisDurableReplicas int
	// KeyNamespace prefixes every Redis key. Default "onceflow".
	KeyNamespace string
	// Secret keys the scope digests and owner tokens. Required unless Dev,
	// and at least 32 bytes long (`openssl rand -hex 32` makes one); use
	// random bytes and keep it stable: a new secret is a new set of
	// records (bump SecretVersion when you rotate it).
	Secret []byte
	// SecretVersion is the digest version of Secret. Default 1.
	SecretVersion int
	// Lease, ReplayTTL and FailureRetention tune the executor
	// (idemstore.ExecutorConfig says what each does). Default 30s, 24h
	// and 24h, the executor's defaults.
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
	// HTTPReadHeaderTimeout bounds the reading of a request's headers.
	// Default 5s, or HTTPReadTimeout when that is shorter.
	HTTPReadHeaderTimeout time.Duration
	// HTTPReadTimeout bounds the reading of a whole request, headers and
	// body: a body still arriving after it is cut off (the handler's read
	// fails and the connection is closed). It does not bound the handler
	// once the body is read. Default 30s.
	HTTPReadTimeout time.Duration
	// HTTPIdleTimeout closes a keep-alive connection that waits this long
	// for its next request. Default 60s.
	HTTPIdleTimeout time.Duration
	// HTTPMaxConns is the most connections the HTTP server holds at once.
	// A new connection that finds them all open closes the one that has
	// waited longest for its next request (an idle keep-alive), or else
	// the one that has waited longest, 100 ms at least, for its request's
	// headers, and is served; it waits to be accepted only while every one
	// of them is inside a request, which HTTPMaxActiveRequests keeps below
	// HTTPMaxConns. Default 512.
	HTTPMaxConns int
	// HTTPMaxIdleConns is the most keep-alive connections the HTTP server
	// leaves waiting for their next request: over it, the one idle the
	// longest is closed (its client opens another when it needs one).
	// With HTTPMaxConns it keeps one client that holds many idle
	// connections from starving the others, whatever its address.
	// Default 256.
	HTTPMaxIdleConns int
	// HTTPMaxConnsPerClient is the most connections one client address
	// (an IPv4 address, an IPv6 /64) may hold: one more closes that
	// client's longest-idle connection, or, when all of its connections
	// are busy, is closed at once. Default 0: no limit, for behind a proxy
	// or a load balancer every connection has its address; set it when
	// clients reach the worker directly.
	HTTPMaxConnsPerClient int
	// HTTPMaxHeaderBytes bounds the size of a request's headers (the
	// request line included; http.Server.MaxHeaderBytes): a request over
	// it is answered 431. Default 64 KiB.
	HTTPMaxHeaderBytes int
	// HTTPBodyStartTimeout bounds the wait for a declared request body:
	// its first byte must arrive within it once a handler reads the body
	// (after the "100 Continue" a client that sent Expect: 100-continue
	// gets then), and the rest at HTTPMinBodyRate, or the handler's read
	// fails (onceflow.http.slow_bodies counts it) and the connection is
	// closed: a client that declares a body and sends none holds a
	// connection for this long, not HTTPReadTimeout. Default 2s.
	HTTPBodyStartTimeout time.Duration
	// HTTPMinBodyRate is the least average rate, in bytes a second, at
	// which a request body must keep arriving after HTTPBodyStartTimeout
	// (a body of n bytes may take HTTPBodyStartTimeout + n/HTTPMinBodyRate,
	// never more than HTTPReadTimeout). Default 1024.
	HTTPMinBodyRate int64
	// HTTPMaxActiveRequests is the most requests the HTTP server's
	// handlers hold at once; one more is answered 503 (problem
	// ProblemServerBusy) with Retry-After: 1 before anything reads its
	// body, and the connection is closed (onceflow.http.requests_shed
	// counts it, limit "total"). Kept below HTTPMaxConns, it leaves
	// connections that a fresh client's request may take from idle ones
	// and ones still sending their headers. Default 256, or half of
	// HTTPMaxConns when that is less. The routes of HTTPProbeRoutes are
	// never shed nor counted.
	HTTPMaxActiveRequests int
	// HTTPMaxActiveRequestsPerClient is the most requests of one client
	// address (an IPv4 address, an IPv6 /64) the handlers hold at once;
	// one more is shed as over HTTPMaxActiveRequests (limit "client").
	// Default 64, or HTTPMaxActiveRequests when that is less. Behind a
	// proxy every request has the proxy's address: set it to
	// HTTPMaxActiveRequests there.
	HTTPMaxActiveRequestsPerClient int
	// HTTPProbeRoutes are the route patterns (as registered on the mux,
	// such as "GET /healthz") never shed nor counted among the active
	// requests, so that probes and liveness never wait behind other
	// traffic. Default "GET /healthz", "GET /readyz" and "GET /metrics"
	// (the worker's probes and the /metrics an application serves); give
	// an empty, non-nil slice to exempt none.
	HTTPProbeRoutes []string
	// HTTPMaxBodyBytes is the largest request body the HTTP server takes,
	// on every route: a request that declares a longer one
	// (Content-Length) is answered 413 (application/problem+json, type
	// urn:onceflow:problem:body-too-large, as idemhttp's) before any of it
	// is read, so before any "100 Continue"; a chunked one is cut off
	// there. Default 1 MiB, idemhttp's default MaxBodyBytes: raise both
	// together.
	HTTPMaxBodyBytes int64
	// Dev marks a development worker: an empty Secret is replaced by
	// DevSecret, a fixed, public one, and a short Secret is accepted.
	Dev bool
	// Logger receives the worker's logs, the Temporal SDK's included.
	// Default: JSON lines (slog.JSONHandler) on standard error, at Info
	// and above; pass slog.New(slog.DiscardHandler) to drop them.
	Logger *slog.Logger
	// TracerProvider, when set, traces the worker: Temporal's client and
	// activities (the SDK's OpenTelemetry interceptor), every executor
	// phase as children of the activity's or HTTP request's span, go-redis
	// (redisotel) and the HTTP server (otelhttp). Default: no tracing.
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, receives the executor's metrics
	// (docs/operations.md lists them), the Temporal SDK's (with monotonic counters,
	// including the workflows' onceflow_recoveries_opened / _closed),
	// go-redis' and the HTTP server's. Default: none.
	MeterProvider metric.MeterProvider
	// Register adds the application's workflows and activities. Optional.
	Register func(Registry) error
	// RedisOptions, when set, is used as is instead of RedisURL (tests and
	// programs that build their own options).
	RedisOptions *redis.UniversalOptions
	// RedisOmitShebang sends the scripts without the Redis 7 "#!lua"
	// header, for Redis before 7 and miniredis (redisstore.Config.OmitShebang).
	RedisOmitShebang bool
	// RedisNoAutoPipeline turns off what the worker does by default: the
	// replay reads, claims and transitions of concurrent activities go to
	// Redis as pipelines, through go-redis' auto-pipeliner
	// (redisstore.Config.NoAutoPipeline says what it does and costs).
	// Default false: they are auto-pipelined.
	RedisNoAutoPipeline bool
}

// DevSecret is the digest secret a Dev worker uses when Secret is empty:
// public, so never for real data. Operator tools that read a -dev
// worker's records digest their keys with it.
const DevSecret = "onceflow-dev-secret-not-for-production"

// DefaultConfig returns the Config whose every field that has a default
// holds it, as New fills them in: TemporalAddress "localhost:7233",
// Namespace "default", TaskQueue and KeyNamespace "onceflow", RedisURL
// "redis://localhost:6379/0", HTTPAddr "127.0.0.1:8080", the executor's
// Lease, ReplayTTL and FailureRetention, the timeouts and HTTP bounds
// each field's comment names, SecretVersion 1 and the Logger (JSON lines
// on standard error). Secret stays empty: it has no default outside Dev.
// Start from it to show or change a default; a field left empty in a
// Config passed to New takes the same value.
func DefaultConfig() Config { return Config{}.withDefaults() }

// withDefaults returns c with every empty field set to its default (the
// Logger to JSON on standard error, the Secret of a Dev worker to
// DevSecret). It is the one place the defaults are applied: New and
// DefaultConfig both call it.
func (c Config) withDefaults() Config {
	if c.TemporalAddress == "" {
		c.TemporalAddress = defaultTemporalAddress
	}
	if c.Namespace == "" {
		c.Namespace = defaultNamespace
	}
	if c.TaskQueue == "" {
		c.TaskQueue = defaultTaskQueue
	}
	if c.RedisURL == "" {
		c.RedisURL = defaultRedisURL
	}
	if c.KeyNamespace == "" {
		c.KeyNamespace = defaultKeyNamespace
	}
	if c.SecretVersion == 0 {
		c.SecretVersion = 1
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = defaultHTTPAddr
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = defaultStopTimeout
	}
	if c.OutcomeTimeout == 0 {
		c.OutcomeTimeout = defaultOutcomeTimeout
	}
	if c.RedisCommandTimeout == 0 {
		c.RedisCommandTimeout = redisstore.DefaultCommandTimeout
	}
	if c.Lease == 0 || c.ReplayTTL == 0 || c.FailureRetention == 0 {
		e := executorDefaults()
		c.Lease = cmp.Or(c.Lease, e.Lease)
		c.ReplayTTL = cmp.Or(c.ReplayTTL, e.ReplayTTL)
		c.FailureRetention = cmp.Or(c.FailureRetention, e.FailureRetention)
	}
	if c.HTTPReadTimeout == 0 {
		c.HTTPReadTimeout = defaultHTTPReadTimeout
	}
	if c.HTTPReadHeaderTimeout == 0 {
		c.HTTPReadHeaderTimeout = min(defaultHTTPReadHeaderTimeout, max(c.HTTPReadTimeout, 0))
	}
	if c.HTTPIdleTimeout == 0 {
		c.HTTPIdleTimeout = defaultHTTPIdleTimeout
	}
	if c.HTTPMaxConns == 0 {
		c.HTTPMaxConns = defaultHTTPMaxConns
	}
	if c.HTTPMaxIdleConns == 0 {
		c.HTTPMaxIdleConns = defaultHTTPMaxIdleConns
	}
	if c.HTTPMaxHeaderBytes == 0 {
		c.HTTPMaxHeaderBytes = defaultHTTPMaxHeaderBytes
	}
	if c.HTTPMaxBodyBytes == 0 {
		c.HTTPMaxBodyBytes = defaultHTTPMaxBodyBytes
	}
	if c.HTTPBodyStartTimeout == 0 {
		c.HTTPBodyStartTimeout = defaultHTTPBodyStartTimeout
	}
	if c.HTTPMinBodyRate == 0 {
		c.HTTPMinBodyRate = defaultHTTPMinBodyRate
	}
	if c.HTTPMaxActiveRequests == 0 {
		c.HTTPMaxActiveRequests = min(defaultHTTPMaxActiveRequests, max(c.HTTPMaxConns/2, 1))
	}
	if c.HTTPMaxActiveRequestsPerClient == 0 {
		c.HTTPMaxActiveRequestsPerClient = min(defaultHTTPMaxActiveRequestsPerClient, max(c.HTTPMaxActiveRequests, 1))
	}
	if c.HTTPProbeRoutes == nil {
		c.HTTPProbeRoutes = defaultHTTPProbeRoutes()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if len(c.Secret) == 0 && c.Dev {
		c.Secret = []byte(DevSecret)
	}
	return c
}

// executorDefaults is the executor's configuration with its defaults
// filled in, where withDefaults takes the defaults of Lease, ReplayTTL and
// FailureRetention from: idemstore holds them.
func executorDefaults() idemstore.ExecutorConfig {
	e, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: noStore{}})
	if err != nil {
		panic("worker: the executor refuses its own defaults: " + err.Error())
	}
	return e.Config()
}

// validate refuses a configuration (with its defaults) that cannot work,
// naming the setting and its cmd/worker flag. It is the one place a
// Config is checked; New calls it.
func (c Config) validate() error {
	var errs []error
	switch {
	case len(c.Secret) == 0:
		errs = append(errs, fmt.Errorf("worker: the digest secret is empty: set ONCEFLOW_SECRET (or -secret) to at least %d random bytes, such as the output of `openssl rand -hex 32`; only -dev runs without one", minSecretBytes))
	case len(c.Secret) < minSecretBytes && !c.Dev:
		errs = append(errs, fmt.Errorf("worker: the digest secret is %d bytes, shorter than %d: set ONCEFLOW_SECRET (or -secret) to at least %d random bytes, such as the output of `openssl rand -hex 32`", len(c.Secret), minSecretBytes, minSecretBytes))
	}
	if c.SecretVersion < 0 {
		errs = append(errs, fmt.Errorf("worker: SecretVersion must be positive, got %d", c.SecretVersion))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RedisCommandTimeout (-redis-timeout)", c.RedisCommandTimeout}, {"StopTimeout (-stop-timeout)", c.StopTimeout}, {"OutcomeTimeout (-outcome-timeout)", c.OutcomeTimeout},
		{"HTTPReadHeaderTimeout (-http-read-header-timeout)", c.HTTPReadHeaderTimeout}, {"HTTPReadTimeout (-http-read-timeout)", c.HTTPReadTimeout},
		{"HTTPIdleTimeout (-http-idle-timeout)", c.HTTPIdleTimeout}, {"HTTPBodyStartTimeout", c.HTTPBodyStartTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("worker: %s must be positive, got %v", d.name, d.v))
		}
	}
	if c.HTTPReadTimeout > 0 && c.HTTPReadHeaderTimeout > c.HTTPReadTimeout {
		errs = append(errs, fmt.Errorf("worker: HTTPReadHeaderTimeout (-http-read-header-timeout) %v is longer than HTTPReadTimeout (-http-read-timeout) %v, which bounds the headers too",
			c.HTTPReadHeaderTimeout, c.HTTPReadTimeout))
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"HTTPMaxConns (-http-max-conns)", c.HTTPMaxConns}, {"HTTPMaxIdleConns (-http-max-idle-conns)", c.HTTPMaxIdleConns},
		{"HTTPMaxConnsPerClient (-http-max-conns-per-client)", c.HTTPMaxConnsPerClient}, {"HTTPMaxHeaderBytes (-http-max-header-bytes)", c.HTTPMaxHeaderBytes},
		{"HTTPMaxActiveRequests", c.HTTPMaxActiveRequests}, {"HTTPMaxActiveRequestsPerClient", c.HTTPMaxActiveRequestsPerClient}} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("worker: %s must be positive, got %d", n.name, n.v))
		}
	}
	if c.HTTPMaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("worker: HTTPMaxBodyBytes (-http-max-body-bytes) must be positive, got %d", c.HTTPMaxBodyBytes))
	}
	if c.HTTPMinBodyRate < 0 {
		errs = append(errs, fmt.Errorf("worker: HTTPMinBodyRate must be positive, got %d", c.HTTPMinBodyRate))
	}
	if c.HTTPMaxActiveRequestsPerClient > c.HTTPMaxActiveRequests {
		errs = append(errs, fmt.Errorf("worker: HTTPMaxActiveRequestsPerClient %d is over HTTPMaxActiveRequests %d, which bounds every client's together: lower it, or raise HTTPMaxActiveRequests",
			c.HTTPMaxActiveRequestsPerClient, c.HTTPMaxActiveRequests))
	}
	if (c.TemporalTLSCertFile == "") != (c.TemporalTLSKeyFile == "") {
		errs = append(errs, errTLSPair)
	}
	switch c.RedisDurability {
	case "", redisstore.DurabilityNone:
		if c.RedisDurableReplicas != 0 {
			errs = append(errs, fmt.Errorf("worker: RedisDurableReplicas (-redis-durable-replicas) needs RedisDurability (-redis-durability) %q or %q",
				redisstore.DurabilityReplicas, redisstore.DurabilityAOF))
		}
	case redisstore.DurabilityReplicas, redisstore.DurabilityAOF:
		if c.RedisDurableReplicas < 0 {
			errs = append(errs, fmt.Errorf("worker: RedisDurableReplicas (-redis-durable-replicas) must be positive, got %d", c.RedisDurableReplicas))
		}
	default:
		errs = append(errs, fmt.Errorf("worker: RedisDurability (-redis-durability) must be %q, %q or %q, got %q",
			redisstore.DurabilityNone, redisstore.DurabilityReplicas, redisstore.DurabilityAOF, c.RedisDurability))
	}
	if c.RedisOptions == nil {
		if _, err := ParseRedisURL(c.RedisURL); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
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

// errTLSPair: a client certificate without its key, or a key without its
// certificate.
var errTLSPair = errors.New("worker: give both -temporal-tls-cert and -temporal-tls-key (TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY), or neither")

// noStore lets validate check an executor configuration without a
// store: it has the command timeout the real one will have.
type noStore struct {
	driver.Store
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
