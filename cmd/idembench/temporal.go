package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/cmd/temporalproc"
	"github.com/onceflow/onceflow/idemstore"
)

// temporalCost compares the idempotent activity with the bare one.
type temporalCost struct {
	workflows, perWorkflow int
	bare, wrapped          float64 // activities per second, medians
}

type payload struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
	Note   string `json:"note"`
}

func benchWorkflow(ctx workflow.Context, activity string, n int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    10 * time.Second,
	})
	for i := range n {
		var out payload
		in := payload{Order: fmt.Sprintf("o-%d", i), Amount: 1000 + i, Note: "idembench"}
		if err := workflow.ExecuteActivity(ctx, activity, in).Get(ctx, &out); err != nil {
			return err
		}
	}
	return nil
}

// measureTemporal runs the same workflows on the dev Temporal server,
// once with the bare activity and once with it wrapped, reps times each,
// alternating, and reports activities per second.
func (b *bench) measureTemporal(ctx context.Context) (temporalCost, error) {
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	ts, err := temporalproc.Start(ctx)
	if err != nil {
		return temporalCost{}, err
	}
	defer ts.Stop()
	c, err := client.Dial(client.Options{HostPort: ts.Address(), Namespace: ts.Namespace(), Logger: quiet})
	if err != nil {
		return temporalCost{}, err
	}
	defer c.Close()

	_, e, err := b.executor(idemstore.ExecutorConfig{})
	if err != nil {
		return temporalCost{}, err
	}
	wrapper, err := onceactivity.New(onceactivity.Config{Executor: e, Digester: b.digest, Client: c})
	if err != nil {
		return temporalCost{}, err
	}
	bare := func(_ context.Context, in payload) (payload, error) { return in, nil }
	const queue = "idembench"
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflow(benchWorkflow)
	w.RegisterActivityWithOptions(bare, sdkactivity.RegisterOptions{Name: "bare"})
	onceactivity.Register(w, wrapper, bare, onceactivity.Name("wrapped"), onceactivity.Code("bench-activity"))
	if err := w.Start(); err != nil {
		return temporalCost{}, err
	}
	defer w.Stop()

	cost := temporalCost{workflows: 8, perWorkflow: 25}
	round := func(activity string) (float64, error) {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, cost.workflows)
		for i := range cost.workflows {
			wg.Go(func() {
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue, ID: "bench-" + randomHex(8)},
					benchWorkflow, activity, cost.perWorkflow)
				if err == nil {
					err = run.Get(ctx, nil)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, fmt.Errorf("%s workflows: %w", activity, err)
			}
		}
		return float64(cost.workflows*cost.perWorkflow) / time.Since(start).Seconds(), nil
	}
	if _, err := round("bare"); err != nil { // warm up the server and the worker
		return temporalCost{}, err
	}
	var bares, wrappeds []float64
	for range b.cfg.reps {
		for _, a := range []string{"bare", "wrapped"} {
			r, err := round(a)
			if err != nil {
				return temporalCost{}, err
			}
			if a == "bare" {
				bares = append(bares, r)
			} else {
				wrappeds = append(wrappeds, r)
			}
		}
	}
	slices.Sort(bares)
	slices.Sort(wrappeds)
	cost.bare, cost.wrapped = bares[len(bares)/2], wrappeds[len(wrappeds)/2]
	return cost, nil
}
