package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// runChaos is one run: start the cluster, place the orders through the
// phases, settle, check, report. It returns an error when a check failed.
func runChaos(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	began := time.Now()
	out, err := outputDir(cfg.out)
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(out, "chaos.log"))
	if err != nil {
		return fmt.Errorf("create chaos.log (check -out): %w", err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewMultiHandler(slog.NewTextHandler(stderr, nil), slog.NewTextHandler(logFile, nil)))
	log.Info("chaos: starting", "out", out, "seed", cfg.seed, "orders", cfg.orders, "workers", cfg.workers,
		"phases", len(cfg.phases), "phase_duration", cfg.phaseDuration)

	tl := newTimeline(began)
	c, err := startCluster(ctx, cfg, log, tl, out)
	if err != nil {
		return fmt.Errorf("start the cluster: %w", err)
	}
	defer c.close()
	// Two streams from the seed: the orders do not depend on the faults'
	// timing, nor the faults on the number of orders.
	l, err := newLoad(c, rand.New(rand.NewPCG(uint64(cfg.seed), 1)))
	if err != nil {
		return err
	}
	defer l.close()

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer func() {
		stopLoad()
		l.wg.Wait()
	}()
	budgets := make(chan budget, len(cfg.phases)+1)
	l.wg.Go(func() { l.dispatch(loadCtx, budgets) })
	in := &injector{c: c, rng: rand.New(rand.NewPCG(uint64(cfg.seed), 2)), budgets: budgets}
	if err := in.run(ctx); err != nil {
		return interrupted(ctx, out, fmt.Errorf("inject faults: %w", err))
	}
	settled, err := c.settle(ctx, l)
	if err != nil {
		return interrupted(ctx, out, fmt.Errorf("%w (the logs are in %s)", err, out))
	}
	stopLoad()
	l.wg.Wait()

	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	s, err := checkRun(cctx, c, l, settled)
	if err != nil {
		return fmt.Errorf("check the ledger: %w", err)
	}
	s.WallSeconds = time.Since(began).Seconds()
	if err := printSummary(stdout, s); err != nil {
		return err
	}
	if cfg.json {
		if err := writeJSON(filepath.Join(out, "summary.json"), s); err != nil {
			return err
		}
	}
	if len(s.FailedChecks) > 0 {
		return fmt.Errorf("%d checks failed (%s): see the table above, %s and the worker logs in %s",
			len(s.FailedChecks), strings.Join(s.FailedChecks, "; "), filepath.Join(out, "summary.json"), out)
	}
	return nil
}

// interrupted is err, or, when ctx was cancelled (SIGINT, SIGTERM), a
// plainer word for it.
func interrupted(ctx context.Context, out string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: every child process is stopped; the logs so far are in %s", out)
	}
	return err
}

// outputDir creates -out, or a new temporary directory when it is empty.
func outputDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "onceflow-chaos-out-")
		if err != nil {
			return "", fmt.Errorf("create the output directory (check TMPDIR, or give -out): %w", err)
		}
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create -out %s: %w", dir, err)
	}
	return filepath.Abs(dir)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
