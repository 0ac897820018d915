package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// TestConcurrentReplaysRideTheAutoPipeliner replays one record from many
// goroutines at once, as the store does by default: every claim is
// answered by the replay read with the stored response, and the reads
// that found another in flight went through the auto-pipeliner.
func TestConcurrentReplaysRideTheAutoPipeliner(t *testing.T) {
	t.Parallel()
	s := testStore(t, Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t), CommandTimeout: 5 * time.Second})
	resp := []byte(strings.Repeat("response ", 30)) // five chunks: two reads each
	f, _ := completedRecord(t, s, resp)
	// Reads one at a time never ask the client for its auto-pipeliner
	// (nor start its goroutines).
	for range 3 {
		if _, err := s.Claim(t.Context(), f.Claim(onceflow.NewOwner())); err != nil {
			t.Fatal(err)
		}
	}
	if s.pipe.Load() != nil || s.pipelined.Load() != 0 {
		t.Fatal("a lone replay read asked for the auto-pipeliner")
	}
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
	if got := s.plainReplays.Load(); got != 3+goroutines*each {
		t.Fatalf("%d of %d claims answered by the replay read", got, 3+goroutines*each)
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
	s := testStore(t, Config{Client: client, Namespace: redistest.Namespace(t), CommandTimeout: timeout})
	f, _ := completedRecord(t, s, []byte("ok"))
	s.pipeReads.Add(1) // a read in flight: the next one rides the auto-pipeliner
	proxy.SetFault(redistest.BlackHole)
	start := time.Now()
	out, err := s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
	took := time.Since(start)
	var se *onceflow.Error
	if !errors.As(err, &se) || !errors.Is(err, onceflow.OutcomeIndeterminate) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim answered %T %+v, %v; want an OutcomeIndeterminate error of the deadline", out, out, err)
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

// refusingPipeliner is a client whose auto-pipeliner cannot be built,
// of a type whose options the store cannot read.
type refusingPipeliner struct{ redis.UniversalClient }

func (refusingPipeliner) AsyncAutoPipeline() (*redis.AutoPipeliner, error) {
	return nil, errors.New("invalid AutoPipelineOptions")
}

// TestAutoPipelineReadsNeedsTheClientsAutoPipeliner: a store whose reads
// are auto-pipelined (the default) is refused, in words that name the
// switch, when the client's auto-pipeliner options are invalid, and
// beside ReplayCache; NoAutoPipeline lets both through. A client
// whose options New cannot read and that then gives no auto-pipeliner
// has its concurrent reads go by themselves, answered all the same, and
// the store logs it once.
func TestAutoPipelineReadsNeedsTheClientsAutoPipeliner(t *testing.T) {
	t.Parallel()
	invalid := redis.NewClient(&redis.Options{Addr: redistest.Addr(t), ContextTimeoutEnabled: true, AutoPipelineOptions: &redis.AutoPipelineOptions{MaxBatchSize: -1}})
	t.Cleanup(func() { _ = invalid.Close() })
	if _, err := New(Config{Client: invalid}); err == nil || !strings.Contains(err.Error(), "MaxBatchSize") || !strings.Contains(err.Error(), "NoAutoPipeline") {
		t.Fatalf("New with a client whose auto-pipeliner options are invalid: %v", err)
	}
	if s, err := New(Config{Client: invalid, NoAutoPipeline: true}); err != nil || s.pipeOn {
		t.Fatalf("New with NoAutoPipeline on a client whose auto-pipeliner options are invalid: %v", err)
	}

	var logs strings.Builder
	s := testStore(t, Config{Client: refusingPipeliner{redistest.Client(t)}, Namespace: redistest.Namespace(t),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	f, _ := completedRecord(t, s, []byte("ok"))
	s.pipeReads.Add(1) // a read in flight: the next ones would ride the auto-pipeliner
	for range 3 {
		if out, err := s.Claim(t.Context(), f.Claim(onceflow.NewOwner())); err != nil || fmt.Sprintf("%T", out) != "driver.CompletedReplay" {
			t.Fatalf("replay with no auto-pipeliner to be had: %T %v", out, err)
		}
	}
	if s.pipelined.Load() != 0 || !s.pipeGone.Load() || strings.Count(logs.String(), "gives no auto-pipeliner") != 1 {
		t.Fatalf("%d reads pipelined, gone %v, logs:\n%s", s.pipelined.Load(), s.pipeGone.Load(), logs.String())
	}

	cached := redis.NewClient(&redis.Options{Addr: redistest.Addr(t), Protocol: 3, ClientSideCacheConfig: &redis.ClientSideCacheConfig{}})
	t.Cleanup(func() { _ = cached.Close() })
	if _, err := New(Config{Client: cached, ReplayCache: true}); err == nil || !strings.Contains(err.Error(), "exclude each other") || !strings.Contains(err.Error(), "set Config.NoAutoPipeline") {
		t.Fatalf("New with ReplayCache and the auto-pipelined reads: %v", err)
	}
	if s, err := New(Config{Client: cached, ReplayCache: true, NoAutoPipeline: true}); err != nil || s.pipeOn || !s.cachedReads {
		t.Fatalf("New with ReplayCache and NoAutoPipeline: %v", err)
	}
}
