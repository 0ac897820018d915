package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// Registry is what Config.Register gets to add workflows and activities.
type Registry struct {
	// Worker is the Temporal worker's registry.
	Worker sdkworker.Registry
	// Activities wraps activities into idempotent ones: pass it to
	// activity.Register with Worker.
	Activities *activity.Wrapper
	// Executor, Digester, Store and Client are there for activities and
	// HTTP handlers that need them (an idemhttp.Middleware takes the
	// Executor and the Digester).
	Executor *idemstore.Executor
	Digester *onceflow.Digester
	Store    *redisstore.Store
	Client   client.Client
	// Namespace and TaskQueue are the Temporal namespace and the task
	// queue the worker polls.
	Namespace string
	TaskQueue string
	// HTTP is the worker's HTTP mux, for extra endpoints.
	HTTP   *http.ServeMux
	Logger *slog.Logger
	// MeterProvider is Config.MeterProvider, for the application's own
	// metrics; nil when the worker has none.
	MeterProvider metric.MeterProvider
}

// Worker is a onceflow worker: a Temporal worker whose activities are
// idempotent through Redis, with health endpoints.
type Worker struct {
	cfg     Config
	started chan struct{}
	mu      sync.Mutex
	httpLn  net.Listener
}

// New fills in cfg's defaults, validates it and returns a Worker. It
// connects to nothing: Run does.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
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

// startTimeout bounds Run's connecting steps (Redis' scripts, the eviction
// check, the Temporal dial).
const startTimeout = 10 * time.Second

// parts are what Run assembles, in the order it assembles them; close
// releases them in reverse.
type parts struct {
	rdb     redis.UniversalClient
	store   *redisstore.Store
	exec    *idemstore.Executor
	dig     *onceflow.Digester
	tc      client.Client
	wrapper *activity.Wrapper
	tw      sdkworker.Worker
	mux     *http.ServeMux
	srv     *http.Server // nil when HTTPAddr is "off"
	ln      net.Listener
}

func (p *parts) close() {
	if p.ln != nil {
		_ = p.ln.Close()
	}
	if p.tc != nil {
		p.tc.Close()
	}
	if p.rdb != nil {
		_ = p.rdb.Close()
	}
}

// Run connects to Redis and Temporal, registers the workflows and
// activities, serves the health endpoints and polls until ctx is done; then
// it stops cleanly (in-flight activities get the SDK's stop timeout) and
// returns nil. Errors at startup say which setting to check.
func (w *Worker) Run(ctx context.Context) error {
	p := &parts{}
	defer p.close()
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := w.connectRedis(p); err != nil {
		return err
	}
	if err := w.openStore(startCtx, p); err != nil {
		return err
	}
	if err := w.newExecutor(p); err != nil {
		return err
	}
	if err := w.dialTemporal(startCtx, p); err != nil {
		return err
	}
	if err := w.newWrapper(p); err != nil {
		return err
	}
	w.newTemporalWorker(p)
	w.newHealthMux(p)
	if err := w.register(p); err != nil {
		return err
	}
	if err := w.listenHTTP(p); err != nil {
		return err
	}
	if err := p.tw.Start(); err != nil {
		return fmt.Errorf("worker: start polling task queue %q: %w", w.cfg.TaskQueue, err)
	}
	served := w.serveHTTP(p)
	w.announce()
	runErr := w.waitForStop(ctx, served)
	w.stop(p, served)
	return runErr
}

// connectRedis makes the Redis client (standalone, Sentinel or Cluster),
// traced and measured when the Config asks for it.
func (w *Worker) connectRedis(p *parts) error {
	c := w.cfg
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
	p.rdb = redis.NewUniversalClient(&opts)
	if c.TracerProvider != nil {
		if err := redisotel.InstrumentTracing(p.rdb, redisotel.WithTracerProvider(c.TracerProvider), redisotel.WithDBStatement(false)); err != nil {
			return fmt.Errorf("worker: trace Redis: %w", err)
		}
	}
	if c.MeterProvider != nil {
		if err := redisotel.InstrumentMetrics(p.rdb, redisotel.WithMeterProvider(c.MeterProvider)); err != nil {
			return fmt.Errorf("worker: measure Redis: %w", err)
		}
	}
	return nil
}

// openStore makes the idempotency store, checks that Redis runs what it
// sends (scripting above all), loads its scripts, and checks that Redis
// will not evict records nor lose them.
func (w *Worker) openStore(ctx context.Context, p *parts) error {
	c, log := w.cfg, w.cfg.Logger
	store, err := redisstore.New(redisstore.Config{Client: p.rdb, Namespace: c.KeyNamespace, CommandTimeout: c.RedisCommandTimeout,
		Logger: log, OmitShebang: c.RedisOmitShebang, Durability: c.RedisDurability, DurableReplicas: c.RedisDurableReplicas,
		NoAutoPipeline: c.RedisNoAutoPipeline})
	if err != nil {
		return err
	}
	if err := store.CheckCapabilities(ctx); err != nil {
		return fmt.Errorf("worker: Redis at %s is not usable (check -redis-url / REDIS_URL): %w", redactURL(c.RedisURL), err)
	}
	// Optional: a script missing from the server's cache is sent whole on
	// its first use (an ACL user may run scripts without SCRIPT LOAD).
	if err := store.LoadScripts(ctx); err != nil {
		log.Warn("onceflow: could not load the scripts into Redis' cache; each is sent whole on its first use", "err", err)
	}
	if err := store.CheckEvictionPolicy(ctx); err != nil {
		switch {
		case errors.Is(err, redisstore.ErrEvictionPolicy) && !c.AllowEviction:
			return fmt.Errorf("worker: %w; or pass -allow-eviction (ONCEFLOW_ALLOW_EVICTION=true) to run anyway", err)
		case errors.Is(err, redisstore.ErrEvictionPolicy):
			log.Warn("onceflow: Redis may evict idempotency records (-allow-eviction is set)", "err", err)
		default:
			log.Warn("onceflow: could not check Redis' maxmemory-policy; make sure it is noeviction", "err", err)
		}
	}
	// A persistence that can lose an acknowledged record is a warning
	// unless RequirePersistence: what it loses, workflow history recovers
	// (docs/recovery.md), and a durable write the server cannot confirm
	// fails as unknown.
	if _, err := store.CheckPersistence(ctx); err != nil {
		switch {
		case errors.Is(err, redisstore.ErrPersistence) && c.RequirePersistence:
			return fmt.Errorf("worker: %w; fix the settings named, or leave out -require-persistence (ONCEFLOW_REQUIRE_PERSISTENCE) to start with a warning", err)
		case errors.Is(err, redisstore.ErrPersistence):
			log.Warn("onceflow: Redis may lose acknowledged idempotency records (docs/production.md#redis-settings)", "err", err, "durability", string(c.RedisDurability))
		default:
			log.Warn("onceflow: could not check Redis' persistence settings; check appendonly and appendfsync by other means", "err", err)
		}
	}
	p.store = store
	return nil
}

// newExecutor makes the executor on the store, and the digester of the
// secret.
func (w *Worker) newExecutor(p *parts) error {
	c := w.cfg
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{
		Store: p.store, Lease: c.Lease, ReplayTTL: c.ReplayTTL, FailureRetention: c.FailureRetention, Logger: c.Logger,
		MeterProvider: c.MeterProvider,
	})
	if err != nil {
		return err
	}
	dig, err := onceflow.NewDigester(c.Secret, c.SecretVersion)
	if err != nil {
		return err
	}
	p.exec, p.dig = exec, dig
	return nil
}

// dialTemporal connects to Temporal with TemporalClientOptions.
func (w *Worker) dialTemporal(ctx context.Context, p *parts) error {
	copts, err := w.cfg.TemporalClientOptions()
	if err != nil {
		return err
	}
	tc, err := client.DialContext(ctx, copts)
	if err != nil {
		return fmt.Errorf("worker: Temporal at %s is not reachable (check -temporal-address / TEMPORAL_ADDRESS): %w", w.cfg.TemporalAddress, err)
	}
	p.tc = tc
	return nil
}

// newWrapper makes the activity wrapper. It confirms each attempt's
// checkpoint through the Temporal client before the action starts:
// evidence that outlives the Redis record.
func (w *Worker) newWrapper(p *parts) error {
	wrapper, err := activity.New(activity.Config{Executor: p.exec, Digester: p.dig, Logger: w.cfg.Logger, Client: p.tc})
	if err != nil {
		return err
	}
	p.wrapper = wrapper
	return nil
}

// newTemporalWorker makes the Temporal worker of the task queue; its stop
// timeout is StopTimeout unless WorkerOptions set one.
// Unlike Attach, it installs no workflow interceptor: its workflows
// recover with the workflow package's Execute, or handle
// onceflow.OutcomeEffectUnknown.TemporalType() themselves; WorkerOptions.Interceptors may add
// the workflow package's Interceptor.
func (w *Worker) newTemporalWorker(p *parts) {
	p.tw = sdkworker.New(p.tc, w.cfg.TaskQueue, w.workerOptions())
}

func (w *Worker) workerOptions() sdkworker.Options {
	o := w.cfg.WorkerOptions
	if o.WorkerStopTimeout == 0 {
		o.WorkerStopTimeout = w.cfg.StopTimeout
	}
	return o
}

// newHealthMux makes the HTTP mux with /healthz (the process is up) and
// /readyz (Redis and Temporal answer).
func (w *Worker) newHealthMux(p *parts) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = rw.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var errs []error
		if err := p.rdb.Ping(ctx).Err(); err != nil {
			errs = append(errs, fmt.Errorf("redis: %w", err))
		}
		if _, err := p.tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
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
	p.mux = mux
}

// register registers onceflow's own activity (the recovery's record
// resolution) and then the application's, through Config.Register.
func (w *Worker) register(p *parts) error {
	c := w.cfg
	p.wrapper.RegisterResolve(p.tw)
	if c.Register == nil {
		return nil
	}
	err := c.Register(Registry{Worker: p.tw, Activities: p.wrapper, Executor: p.exec, Digester: p.dig, Store: p.store, Client: p.tc,
		Namespace: c.Namespace, TaskQueue: c.TaskQueue, HTTP: p.mux, Logger: c.Logger, MeterProvider: c.MeterProvider})
	if err != nil {
		return fmt.Errorf("worker: register: %w", err)
	}
	return nil
}

// listenHTTP listens on HTTPAddr (unless "off"), at most HTTPMaxConns
// connections at once of which HTTPMaxIdleConns idle (connLimiter), and
// makes the server of the mux with the HTTP* bounds, traced and measured
// when the Config asks for it. From the outside in, a request meets
// guardRequest (nosniff, the body's deadlines, no wait for an unread
// body), the -dev Host check, otelhttp, limitBody (413 on a declared
// length) and the active requests' limits (503), then the mux.
func (w *Worker) listenHTTP(p *parts) error {
	c := w.cfg
	if c.HTTPAddr == "off" {
		return nil
	}
	metrics, err := newHTTPMetrics(c.MeterProvider)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("worker: listen on %s (check -http / HTTP_ADDR): %w", c.HTTPAddr, err)
	}
	limited := newConnLimiter(ln, c.HTTPMaxConns, c.HTTPMaxIdleConns, c.HTTPMaxConnsPerClient)
	ln = limited
	p.ln = ln
	w.mu.Lock()
	w.httpLn = ln
	w.mu.Unlock()
	active := newActiveLimiter(c.HTTPMaxActiveRequests, c.HTTPMaxActiveRequestsPerClient, p.mux, c.HTTPProbeRoutes, metrics)
	var h http.Handler = limitBody(active.handler(p.mux), c.HTTPMaxBodyBytes)
	if c.TracerProvider != nil || c.MeterProvider != nil {
		// The server's name is its listener's address: spans never name a
		// Host a client sent.
		oo := []otelhttp.Option{otelhttp.WithServerName(ln.Addr().String())}
		if c.TracerProvider != nil {
			oo = append(oo, otelhttp.WithTracerProvider(c.TracerProvider))
		}
		if c.MeterProvider != nil {
			// Labels of ours only: no series per Host, port or protocol
			// version a client sends (boundedLabels).
			oo = append(oo, otelhttp.WithMeterProvider(boundedLabels{c.MeterProvider}))
		}
		// Spans are named by the route pattern the mux matched (otelhttp
		// renames the span once it is known), never by the path: it
		// may carry IDs.
		h = otelhttp.NewHandler(h, "onceflow.http", append(oo, otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.Method
		}))...)
	}
	if c.Dev {
		h = loopbackHostOnly(h)
	}
	h = w.guardRequest(h, metrics)
	p.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.HTTPReadHeaderTimeout,
		ReadTimeout:       c.HTTPReadTimeout,
		IdleTimeout:       c.HTTPIdleTimeout,
		MaxHeaderBytes:    c.HTTPMaxHeaderBytes,
		ConnState:         limited.connState,
		ErrorLog:          slog.NewLogLogger(c.Logger.Handler(), slog.LevelWarn),
	}
	return nil
}

// loopbackHostOnly answers 421 to a request whose Host is not a loopback
// name or address, on every route of a Dev worker's server (the order
// API, /metrics, the console): a page of evil.example whose name was
// rebound to 127.0.0.1 (DNS rebinding) is same-origin to the browser, and
// only its Host header tells it apart. A loopback IP literal is never a
// rebound name.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if loopbackHost(r.Host) {
			next.ServeHTTP(rw, r)
			return
		}
		port := "PORT"
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if _, p, err := net.SplitHostPort(a.String()); err == nil {
				port = p
			}
		}
		rw.Header().Set("Cache-Control", "no-store")
		http.Error(rw, fmt.Sprintf("this -dev worker answers only requests for localhost, 127.0.0.1 or [::1] (protection against DNS rebinding): "+
			"open http://localhost:%s%s instead; a worker for other hosts runs without -dev", port, r.URL.Path), http.StatusMisdirectedRequest)
	})
}

// loopbackHost: host (a Host header, with or without a port) is localhost
// or a loopback IP address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// problemBodyTooLarge is idemhttp.ProblemBodyTooLarge (worker does not
// import idemhttp; a test checks they agree).
const problemBodyTooLarge = "urn:onceflow:problem:body-too-large"

// limitBody answers 413 to a request that declares a body over limit before
// anything reads it, so before net/http sends "100 Continue" (it does on
// the first read of the body), and cuts a chunked body off at limit.
func limitBody(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			rw.Header().Set("Content-Type", "application/problem+json")
			rw.Header().Set("Cache-Control", "no-store")
			rw.WriteHeader(http.StatusRequestEntityTooLarge)
			_ = json.NewEncoder(rw).Encode(map[string]any{
				"type": problemBodyTooLarge, "title": "Request body too large", "status": http.StatusRequestEntityTooLarge,
				"detail": fmt.Sprintf("the body is over %d bytes: send a smaller one", limit),
			})
			return
		}
		if r.ContentLength < 0 { // chunked: its length is known at its end
			r.Body = http.MaxBytesReader(rw, r.Body, limit)
		}
		next.ServeHTTP(rw, r)
	})
}

// serveHTTP serves the HTTP server in a goroutine and returns the channel
// that gets what Serve returned; Run waits for it before returning, so
// the goroutine never outlives the worker. Nil without a server: a nil
// channel never receives.
func (w *Worker) serveHTTP(p *parts) chan error {
	if p.srv == nil {
		return nil
	}
	served := make(chan error, 1)
	go func() { served <- p.srv.Serve(p.ln) }()
	return served
}

// announce logs that the worker runs and closes Started.
func (w *Worker) announce() {
	c := w.cfg
	c.Logger.Info("onceflow: worker started", "temporal", c.TemporalAddress, "namespace", c.Namespace,
		"task_queue", c.TaskQueue, "redis", redactURL(c.RedisURL), "http", w.HTTPAddr())
	close(w.started)
}

// waitForStop waits until ctx is done, or the HTTP server fails by
// itself: then the worker stops, in order, and says why, rather than go
// on without its health endpoints. It returns Run's error.
func (w *Worker) waitForStop(ctx context.Context, served chan error) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		served <- err // for stop, which waits for it
		return fmt.Errorf("worker: the HTTP server on %s stopped: %w (check -http / HTTP_ADDR)", w.HTTPAddr(), err)
	}
}

// stop stops in order: the HTTP listener, then polling (in-flight
// activities get StopTimeout to finish, then their contexts are
// cancelled), then waits for the cancelled ones to record their outcome
// in Redis and for the executor's renewals (Executor.Drain); Run's
// deferred close then closes the Temporal client and
// Redis.
func (w *Worker) stop(p *parts, served chan error) {
	log := w.cfg.Logger
	log.Info("onceflow: worker stopping", "stop_timeout", w.workerOptions().WorkerStopTimeout, "outcome_timeout", w.cfg.OutcomeTimeout)
	if p.srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := p.srv.Shutdown(shutdownCtx); err != nil {
			_ = p.srv.Close() // connections that outlived the shutdown's timeout
		}
		cancel()
		<-served // http.ErrServerClosed, or the error waitForStop put back
	}
	p.tw.Stop()
	waitCtx, cancel := context.WithTimeout(context.Background(), w.cfg.OutcomeTimeout)
	defer cancel()
	if err := p.wrapper.Wait(waitCtx); err != nil {
		log.Warn("onceflow: stopping before every activity recorded its outcome; their records stay EXECUTING until their leases run out", "err", err)
	}
	// A renewal an Execute left behind (its Store ignored the
	// cancellation) must not outlive the Redis client closed next.
	if err := p.exec.Drain(waitCtx); err != nil {
		log.Warn("onceflow: stopping with a lease renewal still running", "err", err)
	}
	log.Info("onceflow: worker stopped")
}

// redactURL hides a password in a Redis URL for logs and errors.
func redactURL(raw string) string {
	o, err := ParseRedisURL(raw)
	if err != nil || o.Password == "" {
		return raw
	}
	return "(redacted URL with password) " + fmt.Sprint(o.Addrs)
}
