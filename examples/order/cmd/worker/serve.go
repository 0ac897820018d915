package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/cmd/devserver"
	"github.com/onceflow/onceflow/cmd/devstate"
	"github.com/onceflow/onceflow/cmd/telemetry"
	"github.com/onceflow/onceflow/console"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/worker"
)

// appFlags are the example's flags, beside the worker's.
type appFlags struct {
	getenv    func(string) string
	ledgerDSN string
	gateway   order.GatewayConfig
	orderWait time.Duration
	console   string
	principal string
	devReset  bool
	devAddr   string
	devRemote bool
	errs      []error

	// webhookSecrets are the payment providers' signing secrets
	// (-webhook-secrets).
	webhookSecrets string
	// limits are the order API's rate limits (-api-*-limit), as given.
	accountLimit, keyLimit, failedAuthLimit string
}

func (a *appFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.ledgerDSN, "ledger-dsn", a.getenv("LEDGER_DSN"),
		"the order ledger: sqlite:<path> (created if missing) or postgres://… (LEDGER_DSN); required, except under -dev: ledger.db in the dev state directory")
	fs.StringVar(&a.console, "console-token", a.getenv("ONCEFLOW_CONSOLE_TOKEN"),
		"the operator console's token, at least 64 hex digits or 43 base64 characters (openssl rand -hex 32) (/console on -http; ONCEFLOW_CONSOLE_TOKEN; prefer the variable: flags show in ps); empty: the console is off, except under -dev")
	fs.StringVar(&a.principal, "console-principal-header", a.getenv("ONCEFLOW_CONSOLE_PRINCIPAL_HEADER"),
		"the request header that names the console's user for the decisions' audit, set by an authenticating proxy in front of it, such as X-Forwarded-User (ONCEFLOW_CONSOLE_PRINCIPAL_HEADER); empty: \"console\", or under -dev \"dev:$USER\"")
	fs.StringVar(&a.webhookSecrets, "webhook-secrets", a.getenv("ONCEFLOW_WEBHOOK_SECRETS"),
		"the payment providers whose signed deliveries POST /webhooks/payment-events takes: sender=secret[,sender=secret…], a sender twice while its secret rotates (ONCEFLOW_WEBHOOK_SECRETS); empty: every delivery is refused, except under -dev: "+order.DevWebhookSender+" with order.DevWebhookSecret")
	limit := func(what, env string, d order.RateLimit) string {
		return fmt.Sprintf("the order API's rate limit on %s, RATE/BURST (requests a second, and at once) or off (%s; default %g/%d); past it, 429 with Retry-After",
			what, env, d.Rate, d.Burst)
	}
	fs.StringVar(&a.accountLimit, "api-account-limit", a.getenv("ORDER_API_ACCOUNT_LIMIT"),
		limit("one account's requests", "ORDER_API_ACCOUNT_LIMIT", order.DefaultAccountLimit))
	fs.StringVar(&a.keyLimit, "api-key-limit", a.getenv("ORDER_API_KEY_LIMIT"),
		limit("the requests that present one API key", "ORDER_API_KEY_LIMIT", order.DefaultAPIKeyLimit))
	fs.StringVar(&a.failedAuthLimit, "api-failed-auth-limit", a.getenv("ORDER_API_FAILED_AUTH_LIMIT"),
		limit("one client address's requests without a valid API key", "ORDER_API_FAILED_AUTH_LIMIT", order.DefaultFailedAuthLimit))
	a.orderWait = order.DefaultAPIWait
	a.duration(fs, &a.orderWait, "order-wait", "ORDER_WAIT",
		"how long POST /orders waits for the order to end before it answers 202")
	fs.BoolVar(&a.devReset, "dev-reset", a.getenv("ONCEFLOW_DEV_RESET") == "true",
		"with -dev: delete the dev state (Temporal's workflows, Redis' records, the ledger) before starting (ONCEFLOW_DEV_RESET=true)")
	fs.StringVar(&a.devAddr, "dev-temporal-address", a.getenv("ONCEFLOW_DEV_TEMPORAL_ADDRESS"),
		"with -dev: where the embedded Temporal server listens, on loopback unless -dev-allow-remote (ONCEFLOW_DEV_TEMPORAL_ADDRESS; default "+devserver.DefaultTemporalAddress+")")
	fs.BoolVar(&a.devRemote, "dev-allow-remote", a.getenv("ONCEFLOW_DEV_ALLOW_REMOTE") == "true",
		"with -dev: let -dev-temporal-address be other than loopback; the embedded Temporal server has no authentication, so anyone who reaches it drives every workflow (ONCEFLOW_DEV_ALLOW_REMOTE=true)")
	a.registerGatewayKnobs(fs) // none in a production build (simulate_off.go)
}

func (a *appFlags) duration(fs *flag.FlagSet, dst *time.Duration, name, env, usage string) {
	if v := a.getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			a.errs = append(a.errs, fmt.Errorf("worker: %s must be a duration such as 200ms, got %q", env, v))
		}
		*dst = d
	}
	fs.DurationVar(dst, name, *dst, usage+" ("+env+")")
}

// errNoServeLedger: outside -dev the worker has no default ledger, so it
// never creates a database file where it happens to be started.
var errNoServeLedger = cli.Usagef("worker", "no order ledger: set -ledger-dsn (LEDGER_DSN) to sqlite:<path> or postgres://…; "+
	"only -dev has a default (ledger.db in the dev state directory)")

// serve runs the worker until ctx is done.
func serve(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	app := appFlags{getenv: getenv}
	cfg, err := cli.ParseWorkerFlags("worker", args, getenv, app.register, cli.Help{Out: out, Synopsis: workerSynopsis()})
	if err != nil {
		return err
	}
	api, err := app.check(cfg.Dev)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if cfg.Dev {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
		dev, err := devserver.Start(&cfg, devserver.Options{TemporalAddress: app.devAddr, Reset: app.devReset, AllowRemote: app.devRemote}, log)
		if err != nil {
			return err
		}
		defer dev.Stop()
		if app.ledgerDSN == "" {
			if app.ledgerDSN, err = devstate.LedgerDSN(); err != nil {
				return err
			}
		}
		log.Info("onceflow example: order ledger", "ledger", ledger.RedactDSN(app.ledgerDSN))
	}
	cfg.Logger = log
	tel, err := telemetry.Setup(ctx, getenv)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("onceflow: flushing telemetry", "err", err)
		}
	}()
	cfg.MeterProvider = tel.MeterProvider
	if tel.TracerProvider != nil {
		cfg.TracerProvider = tel.TracerProvider
	}
	hooks, err := parseWebhookSecrets(app.webhookSecrets, cfg.Dev)
	if err != nil {
		return err
	}
	api.Wait, api.Webhooks = app.orderWait, hooks
	l, err := app.openLedger(ctx, cfg.Dev, log)
	if err != nil {
		return err
	}
	defer l.Close()
	if len(hooks.Secrets) == 0 {
		log.Warn("onceflow example: no -webhook-secrets: POST /webhooks/payment-events refuses every delivery (401)")
	}
	app.wireGatewayCrash(log) // only in development and simulation builds (simulate.go)
	if simulation {
		log.Info("onceflow: this build has the gateway simulator's fault knobs (a development or -tags simulate build, not for production)")
	}
	gw, err := order.NewGateway(l, app.gateway)
	if err != nil {
		return fmt.Errorf("worker: %w (check the -gateway-* flags)", err)
	}
	if !cfg.Dev {
		log.Info("onceflow example: order ledger", "ledger", ledger.RedactDSN(app.ledgerDSN))
	}
	wr := &wiring{app: &app, dev: cfg.Dev, log: log, tel: tel, ledger: l, gateway: gw, provider: order.NewProvider(), api: api}
	cfg.Register = func(r worker.Registry) error { return wr.register(ctx, r) }
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-w.Started():
			announceConsole(log, w.HTTPAddr(), app.console != "", cfg.Dev)
		case <-done:
		}
	}()
	return w.Run(ctx)
}

// check checks the example's flags, with -dev on or not, and returns the
// order API's configuration with their rate limits.
func (a *appFlags) check(dev bool) (order.APIConfig, error) {
	var api order.APIConfig
	if err := errors.Join(a.errs...); err != nil {
		return api, err
	}
	for _, l := range []struct {
		dst     *order.RateLimit
		v, name string
	}{{&api.AccountLimit, a.accountLimit, "-api-account-limit"}, {&api.APIKeyLimit, a.keyLimit, "-api-key-limit"},
		{&api.FailedAuthLimit, a.failedAuthLimit, "-api-failed-auth-limit"}} {
		var err error
		if *l.dst, err = order.ParseRateLimit(l.v); err != nil {
			return api, cli.Usagef("worker", "%s: %v", l.name, err)
		}
	}
	if a.console != "" {
		if err := console.CheckToken(a.console); err != nil {
			return api, cli.Usagef("worker", "-console-token / ONCEFLOW_CONSOLE_TOKEN: %v", err)
		}
	}
	if a.ledgerDSN == "" && !dev {
		return api, errNoServeLedger
	}
	if !dev && (a.devReset || a.devAddr != "" || a.devRemote) {
		return api, cli.Usagef("worker", "-dev-reset, -dev-temporal-address and -dev-allow-remote go with -dev")
	}
	if a.devAddr != "" {
		if err := devserver.CheckListenAddress(a.devAddr, a.devRemote, "-dev-allow-remote (ONCEFLOW_DEV_ALLOW_REMOTE=true)"); err != nil {
			return api, cli.Usagef("worker", "-dev-temporal-address / ONCEFLOW_DEV_TEMPORAL_ADDRESS: %v", err)
		}
	}
	return api, nil
}

// openLedger opens the order ledger -ledger-dsn names and, under -dev,
// adds the order API's dev account to it.
func (a *appFlags) openLedger(ctx context.Context, dev bool, log *slog.Logger) (*ledger.Ledger, error) {
	l, err := ledger.Open(ctx, a.ledgerDSN)
	if err != nil {
		return nil, fmt.Errorf("worker: %w (check -ledger-dsn / LEDGER_DSN)", err)
	}
	if dev {
		if err := order.AddDevAccount(ctx, l); err != nil {
			l.Close()
			return nil, fmt.Errorf("worker: %w", err)
		}
		log.Info("onceflow example: the order API's dev account (public credentials, for this machine only)",
			"account", order.DevAccount, "authorization", "Bearer "+order.DevAPIKey,
			"webhook_sender", order.DevWebhookSender, "webhook_secret", order.DevWebhookSecret)
	}
	return l, nil
}

// wiring is what the worker's registration puts together: the order
// system on its ledger and gateway, its telemetry, the console and the
// order API.
type wiring struct {
	app      *appFlags
	dev      bool
	log      *slog.Logger
	tel      *telemetry.Telemetry
	ledger   *ledger.Ledger
	gateway  *order.Gateway
	provider *order.Provider
	api      order.APIConfig
}

// register registers the charge activity and the order workflows, checks
// the namespace has the pending search attribute, watches the pending
// recoveries, and serves /metrics, the console and the order API.
func (wr *wiring) register(ctx context.Context, r worker.Registry) error {
	if err := order.RegisterCharge(r, wr.provider); err != nil {
		return err
	}
	if err := order.Register(r, wr.ledger, wr.gateway); err != nil {
		return err
	}
	// The order workflows upsert idemwf.PendingSearchAttribute: a
	// namespace without it would fail their workflow tasks.
	if err := operator.CheckPendingAttribute(ctx, r.Client, r.Namespace); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if err := wr.tel.WatchPending(ctx, telemetry.PendingConfig{Count: func(ctx context.Context) (int64, error) {
		return operator.CountPending(ctx, r.Client, r.Namespace, r.TaskQueue)
	}}); err != nil {
		return err
	}
	r.HTTP.Handle("GET /metrics", wr.tel.Metrics)
	con, err := console.New(console.Config{
		Client: r.Client, Namespace: r.Namespace, TaskQueue: r.TaskQueue, Token: wr.app.console, Dev: wr.dev, Logger: wr.log,
		Principal: consolePrincipal(wr.app.principal, wr.dev, wr.app.getenv),
		Evidence:  order.ConsoleEvidence{Ledger: wr.ledger},
	})
	if err != nil {
		return err
	}
	con.Register(r.HTTP)
	// A browser pointed at the worker's address lands in the console.
	r.HTTP.Handle("GET /{$}", http.RedirectHandler("/console", http.StatusFound))
	wr.api.Ledger = wr.ledger
	return order.RegisterAPIConfig(r, wr.api)
}

// announceConsole logs where the console is, once the worker serves
// HTTP on addr ("" when -http-addr is off): the address to open, with
// the token to add when the console has one, or how to turn it on.
func announceConsole(log *slog.Logger, addr string, token, dev bool) {
	if addr == "" {
		return
	}
	u := consoleURL(addr)
	switch {
	case token:
		log.Info("onceflow console: open it in a browser with the token once (a cookie keeps it)", "url", u+"?token=$ONCEFLOW_CONSOLE_TOKEN")
	case dev:
		log.Info("onceflow console: open it in a browser", "url", u)
	default:
		log.Info("onceflow console: off; set -console-token (ONCEFLOW_CONSOLE_TOKEN) to serve it", "url", u)
	}
}

// consoleURL is the console's address on a worker that serves HTTP on
// addr: a host that listens on every interface (0.0.0.0, [::], none) is
// shown as localhost, which the console under -dev answers.
func consoleURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/console"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/console"
}

// consolePrincipal names who decides through the console, for the
// decisions' audit: the value of header (set by an authenticating proxy),
// else under -dev "dev:" and the user who runs the worker, else nil (the
// console's default, "console").
func consolePrincipal(header string, dev bool, getenv func(string) string) func(*http.Request) string {
	devUser := ""
	if dev {
		devUser = "dev:" + cli.User(getenv)
	}
	if header == "" && devUser == "" {
		return nil
	}
	return func(r *http.Request) string {
		if header != "" {
			if p := strings.TrimSpace(r.Header.Get(header)); p != "" {
				return p
			}
		}
		return devUser
	}
}
