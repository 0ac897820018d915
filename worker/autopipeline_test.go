package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/worker"
)

// TestReplayReadsAreAutoPipelinedUnlessTurnedOff: the store a worker
// builds (New, which -dev runs) and the one Attach builds on the client
// it is given send their replay reads through the client's
// auto-pipeliner by default. A client whose auto-pipeliner cannot be
// built (invalid AutoPipelineOptions) is refused, in words that name the
// switch; with RedisNoAutoPipeline the store never asks for it and
// both go on (to a Temporal server that is not there).
func TestReplayReadsAreAutoPipelinedUnlessTurnedOff(t *testing.T) {
	t.Parallel()
	addr := redistest.Addr(t)
	invalid := &redis.AutoPipelineOptions{MaxBatchSize: -1}
	refused := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "auto-pipeliner") && strings.Contains(err.Error(), "NoAutoPipeline")
	}
	t.Run("New", func(t *testing.T) {
		t.Parallel()
		run := func(off bool) error {
			w, err := worker.New(worker.Config{
				Secret:          secret,
				RedisOptions:    &redis.UniversalOptions{Addrs: []string{addr}, AutoPipelineOptions: invalid},
				TemporalAddress: "127.0.0.1:1", HTTPAddr: "off", // Temporal is never reached
				RedisNoAutoPipeline: off,
				Logger:              slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			return w.Run(ctx)
		}
		if err := run(false); !refused(err) {
			t.Fatalf("by default: err = %v, want the store to refuse a client without an auto-pipeliner, naming the switch", err)
		}
		if err := run(true); err == nil || refused(err) {
			t.Fatalf("with RedisNoAutoPipeline: err = %v, want it to go on (and fail to reach Temporal)", err)
		}
	})
	t.Run("Attach", func(t *testing.T) {
		t.Parallel()
		c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, AutoPipelineOptions: invalid})
		defer rdb.Close()
		attach := func(off bool) error {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			once, err := worker.Attach(ctx, c, rdb, worker.AttachConfig{Secret: secret, KeyNamespace: redistest.Namespace(t), RedisNoAutoPipeline: off})
			if err == nil {
				_ = once.Close()
			}
			return err
		}
		if err := attach(false); !refused(err) {
			t.Fatalf("by default: err = %v, want the store to refuse a client without an auto-pipeliner, naming the switch", err)
		}
		if err := attach(true); refused(err) {
			t.Fatalf("with RedisNoAutoPipeline: err = %v, want no refusal of the auto-pipeliner", err)
		}
	})
}
