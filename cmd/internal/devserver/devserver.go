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

	"github.com/alicebob/miniredis/v2"

	"github.com/onceflow/onceflow/internal/redisproc"
	"github.com/onceflow/onceflow/worker"
)

// Start fills in cfg's TemporalAddress, Namespace and RedisURL when they
// are empty by starting embedded servers, logs one line saying what it
// started and where, and returns a function that stops them.
func Start(cfg *worker.Config, log *slog.Logger) (_ func(), err error) {
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
	if len(started) > 0 {
		log.Info("onceflow: -dev started embedded servers", started...)
	}
	return stopAll, nil
}
