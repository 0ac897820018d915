// Package devserver starts what `cmd/worker -dev` embeds, durable across
// restarts in the state directory (package devstate): a Temporal server
// on SQLite (temporal.db, as `temporal server start-dev --db-filename`,
// on 127.0.0.1:7233, namespace default), and a redis-server child with an
// append-only file (redis/; when redis-server is not on PATH an in-process
// miniredis, which runs the same scripts and keeps nothing). It holds the
// directory's lock while it runs and writes the endpoints file every
// command given -dev reads.
//
// A build with the nodev tag (go build -tags nodev) leaves the Temporal
// server out: the production binary does not carry a server it never
// starts, and -dev then says how to get a build that has one.
package devserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/onceflow/onceflow/cmd/devstate"
	"github.com/onceflow/onceflow/harness/redisproc"
	"github.com/onceflow/onceflow/worker"
)

// DefaultTemporalAddress is where the embedded Temporal server listens
// unless Options.TemporalAddress says otherwise.
const DefaultTemporalAddress = "127.0.0.1:7233"

// DefaultNamespace is the namespace it registers when the worker names
// none.
const DefaultNamespace = "default"

// Options say how -dev runs.
type Options struct {
	// TemporalAddress is where the embedded Temporal server listens.
	// Default DefaultTemporalAddress.
	TemporalAddress string
	// Reset deletes the state (Temporal's database, Redis' data, the
	// ledger) before anything starts.
	Reset bool
	// AllowRemote lets TemporalAddress be other than a loopback address
	// (-dev-allow-remote). The embedded server has no authentication: on
	// another address anyone who reaches it reads and drives every
	// workflow.
	AllowRemote bool
}

// CheckListenAddress refuses addr (host:port), where an embedded server
// without authentication is to listen, unless it is on loopback
// (127.0.0.0/8, ::1 or localhost; any port) or allowRemote; flag names the
// flag that allows it, for the error.
func CheckListenAddress(addr string, allowRemote bool, flag string) error {
	if allowRemote || LoopbackAddress(addr) {
		return nil
	}
	return fmt.Errorf("devserver: %q is not a loopback address, and the embedded Temporal server has no authentication: "+
		"listen on 127.0.0.1 (any port, such as 127.0.0.1:7233), or pass %s to serve it to every host that can reach %q", addr, flag, addr)
}

// LoopbackAddress: addr (host:port) names a loopback host: localhost or
// a loopback IP address. An empty host (":7233") is every interface.
func LoopbackAddress(addr string) bool {
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

// Dev is what Start started.
type Dev struct {
	dir    string
	stops  []func()
	ends   Endpoints
	logger *slog.Logger
}

// Endpoints are the running servers' addresses (devstate.Endpoints).
type Endpoints = devstate.Endpoints

// Start takes the state directory's lock, fills in cfg's TemporalAddress,
// Namespace and RedisURL when they are empty by starting embedded
// servers, writes the endpoints file, and logs one line saying what it
// started and where. Stop undoes it all but the state.
func Start(cfg *worker.Config, opts Options, log *slog.Logger) (_ *Dev, err error) {
	dir, err := devstate.Dir()
	if err != nil {
		return nil, err
	}
	d := &Dev{dir: dir, logger: log}
	defer func() {
		if err != nil {
			d.Stop() // what started before the failure
		}
	}()
	unlock, err := devstate.Lock(dir)
	if err != nil {
		return nil, err
	}
	d.stops = append(d.stops, unlock)
	if opts.Reset {
		if err := devstate.Reset(dir); err != nil {
			return nil, err
		}
		log.Info("onceflow: -dev-reset deleted the dev state", "dir", dir)
	}
	// A state of a build whose records are in another layout is refused:
	// its workflows would find none of their records.
	if err := devstate.CheckLayout(dir); err != nil {
		return nil, err
	}
	if err := devstate.WriteLayout(dir); err != nil {
		return nil, err
	}
	started := []any{"state", dir}
	if cfg.TemporalAddress == "" {
		if opts.TemporalAddress == "" {
			opts.TemporalAddress = DefaultTemporalAddress
		}
		if err := CheckListenAddress(opts.TemporalAddress, opts.AllowRemote, "-dev-allow-remote"); err != nil {
			return nil, err
		}
		if cfg.Namespace == "" {
			cfg.Namespace = DefaultNamespace
		}
		// The server's own log (noisy at start) goes to a file beside its
		// database.
		logPath := filepath.Join(dir, devstate.TemporalLog)
		logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("devserver: %w", err)
		}
		d.stops = append(d.stops, func() { _ = logFile.Close() })
		serverLog := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))
		addr, stop, err := startTemporal(opts.TemporalAddress, filepath.Join(dir, devstate.TemporalDB), []string{cfg.Namespace}, serverLog)
		if err != nil {
			return nil, err
		}
		d.stops = append(d.stops, stop)
		cfg.TemporalAddress = addr
		started = append(started, "temporal", addr, "namespace", cfg.Namespace, "temporal_log", logPath)
	}
	if cfg.RedisURL == "" && cfg.RedisOptions == nil {
		srv, err := redisproc.StartIn(filepath.Join(dir, devstate.RedisDir))
		switch {
		case err == nil:
			d.stops = append(d.stops, srv.Close)
			cfg.RedisURL = "redis://" + srv.Addr() + "/0"
			d.ends.RedisPID = srv.PID()
			started = append(started, "redis", "redis-server child process at "+srv.Addr()+" (data in "+srv.Dir()+")")
		case errors.Is(err, redisproc.ErrNotInstalled):
			mr := miniredis.NewMiniRedis()
			if err := mr.Start(); err != nil {
				return nil, fmt.Errorf("devserver: start in-process Redis: %w", err)
			}
			d.stops = append(d.stops, mr.Close)
			cfg.RedisURL = "redis://" + mr.Addr() + "/0"
			cfg.RedisOmitShebang = true
			started = append(started, "redis", "in-process miniredis at "+mr.Addr()+
				" (no redis-server on PATH: records are lost when the worker stops; install redis-server for a durable -dev)")
		default:
			return nil, err
		}
	}
	d.ends = Endpoints{TemporalAddress: cfg.TemporalAddress, Namespace: cfg.Namespace, RedisURL: cfg.RedisURL,
		HTTPAddr: cfg.HTTPAddr, PID: os.Getpid(), RedisPID: d.ends.RedisPID, Started: time.Now().UTC()}
	if d.ends.Namespace == "" {
		d.ends.Namespace = worker.DefaultConfig().Namespace
	}
	if d.ends.HTTPAddr == "" {
		d.ends.HTTPAddr = worker.DefaultConfig().HTTPAddr
	}
	if err := devstate.WriteEndpoints(dir, d.ends); err != nil {
		return nil, err
	}
	d.stops = append(d.stops, func() { _ = devstate.RemoveEndpoints(dir) })
	log.Info("onceflow: -dev started embedded servers", started...)
	return d, nil
}

// Endpoints are the addresses Start wrote to the endpoints file.
func (d *Dev) Endpoints() Endpoints { return d.ends }

// Stop stops what Start started, in reverse order, removes the endpoints
// file and releases the lock. The state stays for the next -dev.
func (d *Dev) Stop() {
	for i := len(d.stops) - 1; i >= 0; i-- {
		d.stops[i]()
	}
	d.stops = nil
}

// StartTemporal starts only the embedded Temporal server (`worker
// dev-server`): on addr, persisted to dbFile or in memory when it is
// empty, with namespaces registered; its own log goes to log. It returns
// the address it listens on and the function that stops it.
func StartTemporal(addr, dbFile string, namespaces []string, log *slog.Logger) (string, func(), error) {
	return startTemporal(addr, dbFile, namespaces, log)
}
