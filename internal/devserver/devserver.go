// Package devserver starts what `cmd/worker -dev` embeds: an in-process
// Temporal server and a Redis (a redis-server child process when the binary
// is on PATH, otherwise miniredis, an in-process Redis that runs the same
// scripts).
package devserver

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/alicebob/miniredis/v2"
	"go.temporal.io/server/temporaltest"

	"github.com/onceflow/onceflow/internal/redisproc"
	"github.com/onceflow/onceflow/worker"
)

// Start fills in cfg's TemporalAddress, Namespace and RedisURL when they
// are empty by starting embedded servers, logs one line saying what it
// started and where, and returns a function that stops them.
func Start(cfg *worker.Config, log *slog.Logger) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	var started []any
	if cfg.TemporalAddress == "" {
		ts, err := startTemporal()
		if err != nil {
			return nil, err
		}
		stops = append(stops, ts.Stop)
		cfg.TemporalAddress = ts.GetFrontendHostPort()
		if cfg.Namespace == "" {
			cfg.Namespace = ts.GetDefaultNamespace()
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
	if len(started) > 0 {
		log.Info("onceflow: -dev started embedded servers", started...)
	}
	return stop, nil
}

// startTemporal starts the in-process Temporal dev server; it panics
// instead of failing a test, so turn that into an error.
func startTemporal() (ts *temporaltest.TestServer, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("devserver: start the embedded Temporal server: %v", p)
		}
	}()
	return temporaltest.NewServer(), nil
}
