package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// Registry is what Config.Register gets to add workflows and activities.
type Registry struct {
	// Worker is the Temporal worker's registry.
	Worker sdkworker.Registry
	// Activities wraps activity functions into idempotent ones
	// (activity.Wrap).
	Activities *activity.Wrapper
	// Executor, Digester, Store and Client are there for activities and
	// HTTP handlers that need them (an idemhttp.Middleware takes the
	// Executor and the Digester).
	Executor *idemstore.Executor
	Digester *idemstore.Digester
	Store    *redisstore.Store
	Client   client.Client
	// Namespace and TaskQueue are the Temporal namespace and the task
	// queue the worker polls.
	Namespace string
	TaskQueue string
	// HTTP is the worker's HTTP mux, for extra endpoints.
	HTTP   *http.ServeMux
	Logger *slog.Logger
}

// Worker is a onceflow worker: a Temporal worker whose activities are
// idempotent through Redis, with health endpoints.
type Worker struct {
	cfg     Config
	started chan struct{}
	mu      sync.Mutex
	httpLn  net.Listener
}

// New validates cfg and returns a Worker. It connects to nothing: Run does.
func New(cfg Config) (*Worker, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Worker{cfg: cfg, started: make(chan struct{})}, nil
}

// Config returns the configuration with defaults filled in.
func (w *Worker) Config() Config { return w.cfg }

// Started is closed once Run has connected and the worker polls.
func (w *Worker) Started() <-chan struct{} { return w.started }

// HTTPAddr is the address /healthz and /readyz are served on, once
// Started; "" when disabled.
func (w *Worker) HTTPAddr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.httpLn == nil {
		return ""
	}
	return w.httpLn.Addr().String()
}

// Run connects to Redis and Temporal, registers the workflows and
// activities, serves the health endpoints and polls until ctx is done; then
// it stops cleanly (in-flight activities get the SDK's stop timeout) and
// returns nil. Errors at startup say which setting to check.
func (w *Worker) Run(ctx context.Context) error {
	c, log := w.cfg, w.cfg.Logger
	var opts redis.UniversalOptions
	if c.RedisOptions != nil {
		opts = *c.RedisOptions
	} else {
		parsed, err := ParseRedisURL(c.RedisURL)
		if err != nil {
			return err
		}
		opts = *parsed
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewUniversalClient(&opts)
	defer rdb.Close()
	if c.TracerProvider != nil {
		if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(c.TracerProvider), redisotel.WithDBStatement(false)); err != nil {
			return fmt.Errorf("worker: trace Redis: %w", err)
		}
	}
	if c.MeterProvider != nil {
		if err := redisotel.InstrumentMetrics(rdb, redisotel.WithMeterProvider(c.MeterProvider)); err != nil {
			return fmt.Errorf("worker: measure Redis: %w", err)
		}
	}
	store, err := redisstore.New(redisstore.Config{Client: rdb, Namespace: c.KeyNamespace, CommandTimeout: c.RedisCommandTimeout,
		Logger: log, OmitShebang: c.RedisOmitShebang})
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := store.LoadScripts(startCtx); err != nil {
		return fmt.Errorf("worker: Redis at %s is not usable (check -redis-url / REDIS_URL): %w", redactURL(c.RedisURL), err)
	}
	if err := store.CheckEvictionPolicy(startCtx); err != nil {
		switch {
		case errors.Is(err, redisstore.ErrEvictionPolicy) && !c.AllowEviction:
			return fmt.Errorf("worker: %w; or pass -allow-eviction (ONCEFLOW_ALLOW_EVICTION=true) to run anyway", err)
		case errors.Is(err, redisstore.ErrEvictionPolicy):
			log.Warn("onceflow: Redis may evict idempotency records (-allow-eviction is set)", "err", err)
		default:
			log.Warn("onceflow: could not check Redis' maxmemory-policy; make sure it is noeviction", "err", err)
		}
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{
		Store: store, Lease: c.Lease, ReplayTTL: c.ReplayTTL, FailureRetention: c.FailureRetention, Logger: log,
		MeterProvider: c.MeterProvider,
	})
	if err != nil {
		return err
	}
	dig, err := idemstore.NewDigester(c.Secret, c.SecretVersion)
	if err != nil {
		return err
	}
	copts, err := c.TemporalClientOptions()
	if err != nil {
		return err
	}
	tc, err := client.DialContext(startCtx, copts)
	if err != nil {
		return fmt.Errorf("worker: Temporal at %s is not reachable (check -temporal-address / TEMPORAL_ADDRESS): %w", c.TemporalAddress, err)
	}
	defer tc.Close()
	// The wrapper confirms each attempt's checkpoint through the client
	// before the action starts: evidence that outlives the Redis record.
	wrapper, err := activity.New(activity.Config{Executor: exec, Digester: dig, Logger: log, Client: tc})
	if err != nil {
		return err
	}

	wopts := c.WorkerOptions
	if wopts.WorkerStopTimeout == 0 {
		wopts.WorkerStopTimeout = c.StopTimeout
	}
	tw := sdkworker.New(tc, c.TaskQueue, wopts)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = rw.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var errs []error
		if err := rdb.Ping(ctx).Err(); err != nil {
			errs = append(errs, fmt.Errorf("redis: %w", err))
		}
		if _, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			errs = append(errs, fmt.Errorf("temporal: %w", err))
		}
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := errors.Join(errs...); err != nil {
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(rw, "not ready: %v\n", err)
			return
		}
		_, _ = rw.Write([]byte("ready\n"))
	})
	tw.RegisterActivityWithOptions(wrapper.ResolveRecord, sdkactivity.RegisterOptions{Name: activity.ResolveRecordActivity})
	if c.Register != nil {
		err := c.Register(Registry{Worker: tw, Activities: wrapper, Executor: exec, Digester: dig, Store: store, Client: tc, Namespace: c.Namespace, TaskQueue: c.TaskQueue, HTTP: mux, Logger: log})
		if err != nil {
			return fmt.Errorf("worker: register: %w", err)
		}
	}
	var srv *http.Server
	if c.HTTPAddr != "off" {
		ln, err := net.Listen("tcp", c.HTTPAddr)
		if err != nil {
			return fmt.Errorf("worker: listen on %s (check -http / HTTP_ADDR): %w", c.HTTPAddr, err)
		}
		w.mu.Lock()
		w.httpLn = ln
		w.mu.Unlock()
		var h http.Handler = mux
		if c.TracerProvider != nil || c.MeterProvider != nil {
			var oo []otelhttp.Option
			if c.TracerProvider != nil {
				oo = append(oo, otelhttp.WithTracerProvider(c.TracerProvider))
			}
			if c.MeterProvider != nil {
				oo = append(oo, otelhttp.WithMeterProvider(c.MeterProvider))
			}
			// Spans are named by the route pattern the mux matched (otelhttp
			// renames the span once it is known), never by the path: it
			// may carry IDs.
			h = otelhttp.NewHandler(mux, "onceflow.http", append(oo, otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
				if r.Pattern != "" {
					return r.Pattern
				}
				return r.Method
			}))...)
		}
		srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		defer ln.Close()
	}
	if err := tw.Start(); err != nil {
		return fmt.Errorf("worker: start polling task queue %q: %w", c.TaskQueue, err)
	}

	// served gets what Serve returned; Run waits for it before returning,
	// so the server's goroutine never outlives the worker. Nil without a
	// server: a nil channel never receives.
	var served chan error
	if srv != nil {
		served = make(chan error, 1)
		go func() { served <- srv.Serve(w.httpLn) }()
	}
	log.Info("onceflow: worker started", "temporal", c.TemporalAddress, "namespace", c.Namespace,
		"task_queue", c.TaskQueue, "redis", redactURL(c.RedisURL), "http", w.HTTPAddr())
	close(w.started)

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-served:
		// The HTTP server failed by itself: the worker stops, in order,
		// and says why, rather than go on without its health endpoints.
		runErr = fmt.Errorf("worker: the HTTP server on %s stopped: %w (check -http / HTTP_ADDR)", w.HTTPAddr(), err)
		served = nil
	}
	// Stop in order: the HTTP listener, then polling (in-flight activities
	// get StopTimeout to finish, then their contexts are cancelled), then
	// wait for the cancelled ones to record their outcome in Redis, and
	// only then (the deferred calls) close the Temporal client and Redis.
	log.Info("onceflow: worker stopping", "stop_timeout", wopts.WorkerStopTimeout, "outcome_timeout", c.OutcomeTimeout)
	if srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			_ = srv.Close() // connections that outlived the shutdown's timeout
		}
		if served != nil {
			<-served // http.ErrServerClosed
		}
	}
	tw.Stop()
	waitCtx, cancel := context.WithTimeout(context.Background(), c.OutcomeTimeout)
	defer cancel()
	if err := wrapper.Wait(waitCtx); err != nil {
		log.Warn("onceflow: stopping before every activity recorded its outcome; their records stay EXECUTING until their leases run out", "err", err)
	}
	log.Info("onceflow: worker stopped")
	return runErr
}

// redactURL hides a password in a Redis URL for logs and errors.
func redactURL(raw string) string {
	o, err := ParseRedisURL(raw)
	if err != nil || o.Password == "" {
		return raw
	}
	return "(redacted URL with password) " + fmt.Sprint(o.Addrs)
}
