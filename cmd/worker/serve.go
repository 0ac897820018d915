package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/cmd/internal/console"
	"github.com/onceflow/onceflow/cmd/internal/devserver"
	"github.com/onceflow/onceflow/cmd/internal/telemetry"
	"github.com/onceflow/onceflow/cmd/internal/trail"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/worker"
)

// DefaultLedgerDSN is the ledger outside -dev: a SQLite file in the
// working directory.
const DefaultLedgerDSN = "sqlite:onceflow-ledger.db"

// exitCrash is the status the gateway's crash-after-charge exits with.
const exitCrash = 3

// appFlags are the example's flags, beside the worker's.
type appFlags struct {
	getenv    func(string) string
	ledgerDSN string
	gateway   order.GatewayConfig
	orderWait time.Duration
	console   string
	errs      []error
}

func (a *appFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.ledgerDSN, "ledger-dsn", a.getenv("LEDGER_DSN"),
		"the order ledger: sqlite:<path> or postgres://… (LEDGER_DSN; default "+DefaultLedgerDSN+", under -dev a file in the dev state directory)")
	fs.StringVar(&a.console, "console-token", a.getenv("ONCEFLOW_CONSOLE_TOKEN"),
		"the operator console's token (/console on -http; ONCEFLOW_CONSOLE_TOKEN); empty: the console is off, except under -dev")
	a.orderWait = order.DefaultAPIWait
	a.duration(fs, &a.orderWait, "order-wait", "ORDER_WAIT",
		"how long POST /orders waits for the order to end before it answers 202")
	a.duration(fs, &a.gateway.Latency, "gateway-latency", "GATEWAY_LATENCY", "how long each gateway call takes")
	a.rate(fs, &a.gateway.DeclineRate, "gateway-decline-rate", "GATEWAY_DECLINE_RATE", "share of charges the gateway declines, 0–1")
	a.rate(fs, &a.gateway.FailBeforeCharge, "gateway-fail-before-charge", "GATEWAY_FAIL_BEFORE_CHARGE",
		"share of calls that fail with a 503 before charging (certainly no effect), 0–1")
	a.rate(fs, &a.gateway.TimeoutBeforeCharge, "gateway-timeout-before-charge", "GATEWAY_TIMEOUT_BEFORE_CHARGE",
		"share of calls that time out before charging (effect unknown to the caller, but nothing taken), 0–1")
	a.rate(fs, &a.gateway.TimeoutAfterCharge, "gateway-timeout-after-charge", "GATEWAY_TIMEOUT_AFTER_CHARGE",
		"share of charges that time out after the money is taken (effect unknown to the caller), 0–1")
	a.rate(fs, &a.gateway.CrashAfterCharge, "gateway-crash-after-charge", "GATEWAY_CRASH_AFTER_CHARGE",
		"share of charges after which the worker process exits at once (status 3), before the activity returns, 0–1")
}

func (a *appFlags) rate(fs *flag.FlagSet, dst *float64, name, env, usage string) {
	if v := a.getenv(env); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			a.errs = append(a.errs, fmt.Errorf("worker: %s must be a number from 0 to 1, got %q", env, v))
		}
		*dst = f
	}
	fs.Float64Var(dst, name, *dst, usage+" ("+env+")")
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

// serve runs the worker until ctx is done.
func serve(ctx context.Context, args []string, getenv func(string) string) error {
	app := appFlags{getenv: getenv}
	cfg, err := worker.ParseFlagsWith("worker", args, getenv, app.register)
	if err != nil {
		return err
	}
	if err := errors.Join(app.errs...); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if cfg.Dev {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
		if app.ledgerDSN == "" {
			if app.ledgerDSN, err = devserver.LedgerDSN(); err != nil {
				return err
			}
		}
		stop, err := devserver.Start(&cfg, log, "ledger", ledger.RedactDSN(app.ledgerDSN))
		if err != nil {
			return err
		}
		defer stop()
	}
	if app.ledgerDSN == "" {
		app.ledgerDSN = DefaultLedgerDSN
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
	l, err := ledger.Open(ctx, app.ledgerDSN)
	if err != nil {
		return fmt.Errorf("worker: %w (check -ledger-dsn / LEDGER_DSN)", err)
	}
	defer l.Close()
	app.gateway.Crash = func() {
		log.Error("onceflow example: the gateway charged and the worker crashes now (-gateway-crash-after-charge)")
		os.Exit(exitCrash)
	}
	gw, err := order.NewGateway(l, app.gateway)
	if err != nil {
		return fmt.Errorf("worker: %w (check the -gateway-* flags)", err)
	}
	if !cfg.Dev {
		log.Info("onceflow example: order ledger", "ledger", ledger.RedactDSN(app.ledgerDSN))
	}
	provider := order.NewProvider()
	cfg.Register = func(r worker.Registry) error {
		if err := order.RegisterCharge(r, provider); err != nil {
			return err
		}
		if err := order.Register(r, l, gw); err != nil {
			return err
		}
		r.HTTP.Handle("GET /metrics", tel.Metrics)
		con, err := console.New(console.Config{
			Client: r.Client, Namespace: r.Namespace, TaskQueue: r.TaskQueue, Token: app.console, Dev: cfg.Dev, Logger: log,
			Trail: trail.Sources{Store: r.Store, Client: r.Client, Ledger: l, Digester: r.Digester, Namespace: r.Namespace},
		})
		if err != nil {
			return err
		}
		con.Register(r.HTTP)
		return order.RegisterAPI(r, l, app.orderWait)
	}
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
