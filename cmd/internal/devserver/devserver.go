// Package devserver starts what `cmd/worker -dev` embeds: an in-process
// Temporal server and a Redis (a redis-server child process when the binary
// is on PATH, otherwise miniredis, an in-process Redis that runs the same
// scripts).
//
// A build with the nodev tag (go build -tags nodev) leaves the Temporal
// server out: the production binary does not carry a server it never
// starts, and -dev then says how to get a build that has one.
package devserver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/alicebob/miniredis/v2"

	"github.com/onceflow/onceflow/internal/redisproc"
	"github.com/onceflow/onceflow/worker"
)

// StateDir is the directory -dev keeps what outlives a run in (the
// example's SQLite ledger): $ONCEFLOW_DEV_STATE_DIR, else
// $XDG_STATE_HOME/onceflow/dev, else ~/.local/state/onceflow/dev. It is
// created if missing.
func StateDir() (string, error) {
	dir, err := stateDirPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("devserver: create the state directory: %w", err)
	}
	return dir, nil
}

// stateDirPath is StateDir's path, not created.
func stateDirPath() (string, error) {
	dir := os.Getenv("ONCEFLOW_DEV_STATE_DIR")
	if dir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("devserver: no state directory (set ONCEFLOW_DEV_STATE_DIR): %w", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(base, "onceflow", "dev")
	}
	return dir, nil
}

// LedgerDSN is the ledger -dev uses when none is given: a SQLite file in
// StateDir, which it creates.
func LedgerDSN() (string, error) {
	dir, err := StateDir()
	if err != nil {
		return "", err
	}
	return "sqlite:" + filepath.Join(dir, "ledger.db"), nil
}

// ReadLedgerDSN is LedgerDSN for commands that only read: the same DSN,
// without creating the state directory.
func ReadLedgerDSN() (string, error) {
	dir, err := stateDirPath()
	if err != nil {
		return "", err
	}
	return "sqlite:" + filepath.Join(dir, "ledger.db"), nil
}

// Start fills in cfg's TemporalAddress, Namespace and RedisURL when they
// are empty by starting embedded servers, logs one line saying what it
// started and where (with attrs, the caller's own, such as the ledger it
// uses), and returns a function that stops them.
func Start(cfg *worker.Config, log *slog.Logger, attrs ...any) (_ func(), err error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stopAll() // what started before the failure
		}
	}()
	var started []any
	if cfg.TemporalAddress == "" {
		addr, namespace, stopTemporal, err := startTemporal()
		if err != nil {
			return nil, err
		}
		stops = append(stops, stopTemporal)
		cfg.TemporalAddress = addr
		if cfg.Namespace == "" {
			cfg.Namespace = namespace
		}
		started = append(started, "temporal", cfg.TemporalAddress, "namespace", cfg.Namespace)
	}
	if cfg.RedisURL == "" && cfg.RedisOptions == nil {
		srv, err := redisproc.Start()
		switch {
		case err == nil:
			stops = append(stops, srv.Close)
			cfg.RedisURL = "redis://" + srv.Addr() + "/0"
			started = append(started, "redis", "redis-server child process at "+srv.Addr())
		case errors.Is(err, redisproc.ErrNotInstalled):
			mr := miniredis.NewMiniRedis()
			if err := mr.Start(); err != nil {
				return nil, fmt.Errorf("devserver: start in-process Redis: %w", err)
			}
			stops = append(stops, mr.Close)
			cfg.RedisURL = "redis://" + mr.Addr() + "/0"
			cfg.RedisOmitShebang = true
			started = append(started, "redis", "in-process miniredis at "+mr.Addr()+" (no redis-server on PATH)")
		default:
			return nil, err
		}
	}
	log.Info("onceflow: -dev started embedded servers", append(started, attrs...)...)
	return stopAll, nil
}
