package main

import (
	"context"
	"errors"
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
	"github.com/onceflow/onceflow/console"
	"github.com/onceflow/onceflow/worker"
)

// serveFlags are the console's flags.
type serveFlags struct {
	cfg       worker.Config
	httpAddr  string
	token     string
	principal string
	dev       bool
	devReset  bool
	devAddr   string
	devRemote bool
}

func (s *serveFlags) parse(args []string, getenv func(string) string, out io.Writer) error {
	fs := cli.NewFlagSet("worker")
	env := cli.Env(getenv)
	cli.TemporalFlags(fs, &s.cfg, getenv)
	fs.StringVar(&s.cfg.TaskQueue, "task-queue", env("TEMPORAL_TASK_QUEUE", ""),
		"the task queue whose workflows the console lists (TEMPORAL_TASK_QUEUE; default: every task queue of the namespace)")
	fs.StringVar(&s.httpAddr, "http", env("HTTP_ADDR", worker.DefaultConfig().HTTPAddr), "where the console listens; on loopback under -dev (HTTP_ADDR)")
	fs.StringVar(&s.token, "console-token", env("ONCEFLOW_CONSOLE_TOKEN", ""),
		"the console's token, at least 64 hex digits or 43 base64 characters (openssl rand -hex 32) (ONCEFLOW_CONSOLE_TOKEN; prefer the variable: flags show in ps); required, except under -dev")
	fs.StringVar(&s.principal, "console-principal-header", env("ONCEFLOW_CONSOLE_PRINCIPAL_HEADER", ""),
		"the request header that names the console's user for the decisions' audit, set by an authenticating proxy (ONCEFLOW_CONSOLE_PRINCIPAL_HEADER); empty: \"console\", or under -dev \"dev:$USER\"")
	fs.BoolVar(&s.dev, "dev", env("ONCEFLOW_DEV", "") == "true",
		"development mode: start an embedded Temporal server and Redis, durable in the dev state directory, for whatever address is not given (ONCEFLOW_DEV=true)")
	fs.BoolVar(&s.devReset, "dev-reset", env("ONCEFLOW_DEV_RESET", "") == "true", "with -dev: delete the dev state before starting (ONCEFLOW_DEV_RESET=true)")
	fs.StringVar(&s.devAddr, "dev-temporal-address", env("ONCEFLOW_DEV_TEMPORAL_ADDRESS", ""),
		"with -dev: where the embedded Temporal server listens, on loopback unless -dev-allow-remote (ONCEFLOW_DEV_TEMPORAL_ADDRESS; default "+devserver.DefaultTemporalAddress+")")
	fs.BoolVar(&s.devRemote, "dev-allow-remote", env("ONCEFLOW_DEV_ALLOW_REMOTE", "") == "true",
		"with -dev: let -dev-temporal-address be other than loopback; the embedded Temporal server has no authentication (ONCEFLOW_DEV_ALLOW_REMOTE=true)")
	if err := cli.Parse(fs, args, cli.Help{Out: out, Synopsis: workerSynopsis()}); err != nil {
		return err
	}
	if !s.dev && (s.devReset || s.devAddr != "" || s.devRemote) {
		return cli.Usagef("worker", "-dev-reset, -dev-temporal-address and -dev-allow-remote go with -dev")
	}
	if s.token == "" && !s.dev {
		return cli.Usagef("worker", "the console needs -console-token (ONCEFLOW_CONSOLE_TOKEN) outside -dev: make one with `openssl rand -hex 32`")
	}
	if s.token != "" {
		if err := console.CheckToken(s.token); err != nil {
			return cli.Usagef("worker", "-console-token / ONCEFLOW_CONSOLE_TOKEN: %v", err)
		}
	}
	if s.dev && !devserver.LoopbackAddress(s.httpAddr) {
		return cli.Usagef("worker", "-http must be on loopback under -dev (the console asks no token there), got %q", s.httpAddr)
	}
	if s.devAddr != "" {
		if err := devserver.CheckListenAddress(s.devAddr, s.devRemote, "-dev-allow-remote (ONCEFLOW_DEV_ALLOW_REMOTE=true)"); err != nil {
			return cli.Usagef("worker", "-dev-temporal-address / ONCEFLOW_DEV_TEMPORAL_ADDRESS: %v", err)
		}
	}
	return nil
}

// serve runs the operator console for the namespace's workflows (of one
// task queue, or every one) until ctx is done; with -dev it first starts
// the embedded Temporal server and Redis, which a service's workers
// connect to (their addresses are logged and written to the endpoints
// file, where the commands' -dev finds them).
func serve(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	var s serveFlags
	if err := s.parse(args, getenv, out); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	s.cfg.HTTPAddr = s.httpAddr // the endpoints file names it
	if s.dev {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
		s.cfg.Dev = true
		dev, err := devserver.Start(&s.cfg, devserver.Options{TemporalAddress: s.devAddr, Reset: s.devReset, AllowRemote: s.devRemote}, log)
		if err != nil {
			return err
		}
		defer dev.Stop()
	}
	queue := s.cfg.TaskQueue // empty: every task queue, not Defaults' one
	cli.Defaults(&s.cfg)
	s.cfg.TaskQueue = queue
	tc, err := cli.Dial(ctx, s.cfg, "worker")
	if err != nil {
		return err
	}
	defer tc.Close()
	con, err := console.New(console.Config{Client: tc, Namespace: s.cfg.Namespace, TaskQueue: s.cfg.TaskQueue, Path: consolePath, Token: s.token, Dev: s.dev,
		Logger: log, Principal: consolePrincipal(s.principal, s.dev, getenv)})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	con.Register(mux)
	mux.Handle("GET /{$}", http.RedirectHandler(consolePath, http.StatusFound))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	ln, err := net.Listen("tcp", s.httpAddr)
	if err != nil {
		return fmt.Errorf("worker: listen on -http %s: %w", s.httpAddr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	announceConsole(log, ln.Addr().String(), s.token != "", s.dev)
	select {
	case err := <-done:
		return fmt.Errorf("worker: the console's server stopped: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// announceConsole logs where the console is: the address to open, with
// the token to add when the console has one.
func announceConsole(log *slog.Logger, addr string, token, dev bool) {
	u := consoleURL(addr)
	switch {
	case token:
		log.Info("onceflow console: open it in a browser with the token once (a cookie keeps it)", "url", u+"?token=$ONCEFLOW_CONSOLE_TOKEN")
	case dev:
		log.Info("onceflow console: open it in a browser", "url", u)
	}
}

// consolePath is where the console is mounted: "/" redirects there.
const consolePath = "/console"

// consoleURL is the console's address on a server listening on addr: a
// host that listens on every interface (0.0.0.0, [::], none) is shown as
// localhost, which the console under -dev answers.
func consoleURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + consolePath
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + consolePath
}

// consolePrincipal names who decides through the console, for the
// decisions' audit: the value of header (set by an authenticating proxy),
// else under -dev "dev:" and the user who runs it, else nil (the
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
