package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/onceflow/onceflow/cmd/temporalproc"
)

// temporalServer is the dev Temporal server (`worker dev-server`, a
// process of its own) on one loopback address and one SQLite file for the
// whole run: the temporal-kill phase kills it with SIGKILL and starts it
// again on both, so the workflows' history outlives the kill.
type temporalServer struct {
	bin, addr, namespace, db string

	mu  sync.Mutex
	srv *temporalproc.Server // nil while it is down
}

// startTemporal starts the dev Temporal server on a free port with its
// state in dir/temporal.db: the development build of cmd/worker is
// $ONCEFLOW_DEV_WORKER, else one built into dir once (a restart does not
// build again).
func startTemporal(ctx context.Context, dir string) (*temporalServer, error) {
	bin := os.Getenv(temporalproc.EnvBinary)
	if bin == "" {
		var err error
		if bin, err = temporalproc.Build(ctx, filepath.Join(dir, "dev")); err != nil {
			return nil, err
		}
	}
	t := &temporalServer{bin: bin, db: filepath.Join(dir, "temporal.db"), namespace: "onceflow-chaos"}
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// start starts the server, on the address and file it had before, unless
// it runs.
func (t *temporalServer) start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv != nil {
		return nil
	}
	srv, err := temporalproc.StartWith(ctx, temporalproc.Options{Binary: t.bin, Address: t.addr, DBFile: t.db, Namespace: t.namespace})
	if err != nil {
		return fmt.Errorf("start the dev Temporal server (its state in %s): %w", t.db, err)
	}
	t.srv, t.addr = srv, srv.Address()
	return nil
}

// kill stops the server with SIGKILL and waits until it is gone.
func (t *temporalServer) kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv != nil {
		t.srv.Kill()
		t.srv = nil
	}
}

// stop stops the server for good (closing its stdin).
func (t *temporalServer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv != nil {
		t.srv.Stop()
		t.srv = nil
	}
}

// injectTemporalKill kills the Temporal server with SIGKILL twice a phase
// and starts it again a second later on the same address and SQLite file.
// The workers' and the load's SDK clients retry meanwhile.
func injectTemporalKill(ctx context.Context, in *injector, end time.Time) error {
	return in.every(ctx, end, in.c.cfg.phaseDuration/2, func() error {
		in.c.log.Info("chaos: Temporal kill -9; restarting it on its SQLite file in 1s")
		in.c.temporal.kill()
		in.c.tl.inject("Temporal kill -9, restarted on its SQLite file")
		sleepCtx(ctx, time.Second)
		began := time.Now()
		if err := in.c.temporal.start(ctx); err != nil {
			return fmt.Errorf("restart the Temporal server: %w", err)
		}
		in.c.log.Info("chaos: Temporal back", "after", time.Since(began).Round(time.Millisecond))
		return nil
	})
}
