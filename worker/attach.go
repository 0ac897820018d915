package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/workflow"
)

// AttachConfig configures Attach. Only Secret is required.
type AttachConfig struct {
	// Secret keys the digests of scopes and owner tokens: at least 32
	// random bytes, the same on every worker of the service. Required.
	Secret []byte
	// SecretVersion numbers Secret. Default 1.
	SecretVersion int
	// KeyNamespace prefixes the Redis keys. Default "onceflow".
	KeyNamespace string
	// RedisCommandTimeout bounds each Redis call. Default 200ms
	// (redisstore.DefaultCommandTimeout).
	RedisCommandTimeout time.Duration
	// RedisOmitShebang: see Config.RedisOmitShebang.
	RedisOmitShebang bool
	// RedisNoAutoPipeline: see Config.RedisNoAutoPipeline.
	RedisNoAutoPipeline bool
	// AllowEviction: Attach refuses a Redis whose maxmemory-policy may
	// evict records, unless this is set (Config.AllowEviction).
	AllowEviction bool
	// Lease, ReplayTTL and FailureRetention: see idemstore.ExecutorConfig.
	Lease            time.Duration
	ReplayTTL        time.Duration
	FailureRetention time.Duration
	// NoPendingSearchAttribute turns off what Attach does by default:
	// workflows upsert workflow.PendingSearchAttribute ("OnceflowPending")
	// as incidents open and close, so `worker pending`, the console and
	// the onceflow_pending_recoveries gauge find them, and Attach checks
	// that the namespace has it registered as an Int, refusing to start
	// without it (its error names the command that registers it;
	// docs/operations.md). With it set nothing is upserted or checked,
	// and no tool finds this service's incidents: ask a workflow you know
	// (operator.Pending).
	NoPendingSearchAttribute bool
	// OutcomeTimeout bounds Close's wait for the wrapped activities that
	// are still recording their outcome. Default 10s.
	OutcomeTimeout time.Duration
	// Logger receives onceflow's lines. Default: discard.
	Logger *slog.Logger
	// MeterProvider, when set, measures the executor.
	MeterProvider metric.MeterProvider
}

// Attached is onceflow attached to a service's own Temporal client and
// Redis client: Register the activities on Activities, and install
// Interceptors on the SDK worker.
type Attached struct {
	// Activities wraps and registers activities (activity.Register).
	Activities *activity.Wrapper
	// Executor, Digester and Store are there for HTTP handlers and tools
	// that need them.
	Executor *idemstore.Executor
	Digester *onceflow.Digester
	Store    *redisstore.Store

	interceptor *workflow.Interceptor
	cfg         AttachConfig
}

// Attach plugs onceflow into a service that already has its Temporal
// client and makes its own SDK worker: it builds the idempotency store on
// rdb (which it checks: scripting, eviction policy), the executor and the
// activity Wrapper, with the Temporal client c confirming each attempt's
// checkpoint. It checks that c's namespace has
// workflow.PendingSearchAttribute registered (unless
// AttachConfig.NoPendingSearchAttribute), and refuses to start without it
// with the command that registers it. It does not close c or rdb, which
// stay the service's.
//
// Then, where the service makes its SDK worker:
//
//	w := sdkworker.New(c, taskQueue, sdkworker.Options{Interceptors: once.Interceptors()})
//	onceactivity.Register(w, once.Activities, Withdraw)
//
// The interceptors are fixed when the SDK worker is made, so Attach comes
// first. Close it after the worker stopped.
func Attach(ctx context.Context, c client.Client, rdb redis.UniversalClient, cfg AttachConfig) (*Attached, error) {
	if c == nil || rdb == nil {
		return nil, errors.New("worker: Attach needs the Temporal client and the Redis client")
	}
	cfg = cfg.withDefaults()
	store, err := redisstore.New(redisstore.Config{Client: rdb, Namespace: cfg.KeyNamespace, CommandTimeout: cfg.RedisCommandTimeout,
		Logger: cfg.Logger, OmitShebang: cfg.RedisOmitShebang, NoAutoPipeline: cfg.RedisNoAutoPipeline})
	if err != nil {
		return nil, err
	}
	if err := store.CheckCapabilities(ctx); err != nil {
		return nil, fmt.Errorf("worker: the Redis client passed to Attach is not usable: %w", err)
	}
	if err := store.LoadScripts(ctx); err != nil {
		cfg.Logger.Warn("onceflow: could not load the scripts into Redis' cache; each is sent whole on its first use", "err", err)
	}
	if err := store.CheckEvictionPolicy(ctx); err != nil {
		if errors.Is(err, redisstore.ErrEvictionPolicy) && !cfg.AllowEviction {
			return nil, fmt.Errorf("worker: %w; or set AttachConfig.AllowEviction to run anyway", err)
		}
		cfg.Logger.Warn("onceflow: Redis may evict idempotency records, or its policy could not be read", "err", err)
	}
	if !cfg.NoPendingSearchAttribute {
		if err := checkPendingAttribute(ctx, c); err != nil {
			return nil, err
		}
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: cfg.Lease, ReplayTTL: cfg.ReplayTTL,
		FailureRetention: cfg.FailureRetention, Logger: cfg.Logger, MeterProvider: cfg.MeterProvider})
	if err != nil {
		return nil, err
	}
	dig, err := onceflow.NewDigester(cfg.Secret, cfg.SecretVersion)
	if err != nil {
		return nil, fmt.Errorf("worker: AttachConfig.Secret: %w", err)
	}
	wrapper, err := activity.New(activity.Config{Executor: exec, Digester: dig, Logger: cfg.Logger, Client: c})
	if err != nil {
		return nil, err
	}
	return &Attached{Activities: wrapper, Executor: exec, Digester: dig, Store: store, cfg: cfg,
		interceptor: workflow.NewInterceptor(workflow.InterceptorOptions{Activities: wrapper, PendingSearchAttribute: !cfg.NoPendingSearchAttribute}),
	}, nil
}

// pendingCheckTimeout bounds Attach's check of the search attribute.
const pendingCheckTimeout = 30 * time.Second

// checkPendingAttribute refuses a namespace (c's) without
// workflow.PendingSearchAttribute registered as an Int: its workflows'
// upserts would fail their workflow tasks.
func checkPendingAttribute(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, pendingCheckTimeout)
	defer cancel()
	err := operator.CheckPendingAttribute(ctx, c, "")
	switch {
	case errors.Is(err, operator.ErrPendingAttributeMissing):
		return fmt.Errorf("worker: %w; or set AttachConfig.NoPendingSearchAttribute to run without it (then no tool finds this service's incidents)", err)
	case err != nil:
		return fmt.Errorf("worker: checking that the namespace has the search attribute %s failed (is Temporal reachable with the client given to Attach?): %w", workflow.PendingSearchAttribute, err)
	}
	return nil
}

// withDefaults fills in the documented defaults.
func (c AttachConfig) withDefaults() AttachConfig {
	if c.SecretVersion == 0 {
		c.SecretVersion = 1
	}
	if c.KeyNamespace == "" {
		c.KeyNamespace = defaultKeyNamespace
	}
	if c.RedisCommandTimeout == 0 {
		c.RedisCommandTimeout = redisstore.DefaultCommandTimeout
	}
	if c.OutcomeTimeout == 0 {
		c.OutcomeTimeout = defaultOutcomeTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Interceptors are onceflow's worker interceptors, for
// sdkworker.Options.Interceptors: the workflow package's Interceptor, which
// gives every workflow of the worker its recovery and schedules the
// registered activities with a heartbeat timeout when the workflow sets
// none. A service with interceptors of its own appends them.
func (a *Attached) Interceptors() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{a.interceptor}
}

// Close waits, up to AttachConfig.OutcomeTimeout, for the wrapped
// activities that have started to record their outcome and for the
// executor's lease renewals: call it after the SDK worker stopped and
// before the Redis client is closed. It closes neither client.
func (a *Attached) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.OutcomeTimeout)
	defer cancel()
	return errors.Join(a.Activities.Wait(ctx), a.Executor.Drain(ctx))
}
