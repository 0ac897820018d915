package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/internal/redistest"
)

// TestConcurrentReplaysRideTheAutoPipeliner replays one record from many
// goroutines at once with Config.AutoPipelineReads: every claim is
// answered by the replay read with the stored response, and the reads
// that found another in flight went through the auto-pipeliner.
func TestConcurrentReplaysRideTheAutoPipeliner(t *testing.T) {
	t.Parallel()
	s := testStore(t, Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t), AutoPipelineReads: true, CommandTimeout: 5 * time.Second})
	resp := []byte(strings.Repeat("response ", 30)) // five chunks: two reads each
	f, _ := completedRecord(t, s, resp)
	const goroutines, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range each {
				out, err := s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
				if err != nil {
					errs <- err
					return
				}
				if rep, ok := out.(driver.CompletedReplay); !ok || string(rep.Record.Response) != string(resp) {
					errs <- errors.New("not the stored response")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := s.plainReplays.Load(); got != goroutines*each {
		t.Fatalf("%d of %d claims answered by the replay read", got, goroutines*each)
	}
	if s.pipelined.Load() == 0 {
		t.Fatal("no replay read rode the auto-pipeliner")
	}
	if n := s.pipeReads.Load(); n != 0 {
		t.Fatalf("%d replay reads still counted in flight", n)
	}
}

// TestAnAutoPipelinedReadStopsAtTheDeadline sends a replay read through
// the auto-pipeliner to a server that stopped answering (a proxy that
// forwards nothing): go-redis does not honour a queued command's deadline,
// so the store stops waiting for it at CommandTimeout itself, reports the
// claim indeterminate, and never pools the call that go-redis still holds.
func TestAnAutoPipelinedReadStopsAtTheDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, ReadTimeout: time.Second, MaxRetries: -1})
	const timeout = 100 * time.Millisecond
	s := testStore(t, Config{Client: client, Namespace: redistest.Namespace(t), AutoPipelineReads: true, CommandTimeout: timeout})
	f, _ := completedRecord(t, s, []byte("ok"))
	s.pipeReads.Add(1) // a read in flight: the next one rides the auto-pipeliner
	proxy.SetFault(redistest.BlackHole)
	start := time.Now()
	out, err := s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
	took := time.Since(start)
	var se *onceflow.StoreError
	if !errors.As(err, &se) || !errors.Is(err, onceflow.ErrIndeterminate) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim answered %T %+v, %v; want an indeterminate StoreError of the deadline", out, out, err)
	}
	if took > 5*timeout {
		t.Fatalf("the claim returned after %v; the command timeout is %v", took, timeout)
	}
	if s.pipelined.Load() != 1 {
		t.Fatalf("%d reads rode the auto-pipeliner, want 1", s.pipelined.Load())
	}
	// go-redis still holds the read: its call must not be pooled again.
	c := s.calls.Get().(*replayCall)
	if c.lent {
		t.Fatal("a call lent to the auto-pipeliner went back to the pool")
	}
	// Cut the black-holed connections, so that the client closes at once.
	proxy.Close()
	if err := client.Close(); err != nil {
		t.Log(err)
	}
}

// refusingPipeliner is a client whose auto-pipeliner cannot be built.
type refusingPipeliner struct{ redis.UniversalClient }

func (refusingPipeliner) AsyncAutoPipeline() (*redis.AutoPipeliner, error) {
	return nil, errors.New("invalid AutoPipelineOptions")
}

// TestAutoPipelineReadsNeedsTheClientsAutoPipeliner refuses the setting
// when the client cannot give its auto-pipeliner, and beside ReplayCache.
func TestAutoPipelineReadsNeedsTheClientsAutoPipeliner(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{Client: refusingPipeliner{redistest.Client(t)}, AutoPipelineReads: true}); err == nil || !strings.Contains(err.Error(), "invalid AutoPipelineOptions") {
		t.Fatalf("New with a client that cannot give its auto-pipeliner: %v", err)
	}
	cached := redis.NewClient(&redis.Options{Addr: redistest.Addr(t), Protocol: 3, ClientSideCacheConfig: &redis.ClientSideCacheConfig{}})
	t.Cleanup(func() { _ = cached.Close() })
	if _, err := New(Config{Client: cached, ReplayCache: true, AutoPipelineReads: true}); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Fatalf("New with ReplayCache and AutoPipelineReads: %v", err)
	}
}
