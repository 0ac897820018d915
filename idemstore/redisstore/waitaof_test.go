package redisstore_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redisproc"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestWaitAOFOnAServerThatHasIt: Durability aof against a server that
// has WAITAOF (Redis 7.2 or newer, or Valkey), a primary and a replica
// with appendonly yes. Every completion the executor acknowledges is on
// the replica; CheckPersistence finds no problem; with the replica killed
// a completion is never a success.
//
// It also measures what a wait costs: Valkey 8.0.1 confirms a replica's
// fsync only with the replica's next acknowledgement, which it sends once
// a second, so each durable call waits about a second (hence the 2 s
// DurableTimeout here; docs/production.md). The server here is Redis
// 7.0, so the test runs only with ONCEFLOW_REDIS_SERVER naming a newer one
// (Debian's bookworm-backports valkey-server, docs/production.md):
//
//	ONCEFLOW_REDIS_SERVER=/path/to/valkey-server go test -run TestWaitAOF -v ./idemstore/redisstore/
func TestWaitAOFOnAServerThatHasIt(t *testing.T) {
	if os.Getenv(redisproc.EnvServer) == "" {
		t.Skipf("needs Redis 7.2+ (WAITAOF): set %s to its redis-server (or valkey-server)", redisproc.EnvServer)
	}
	ctx := t.Context()
	began := time.Now()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary.Addr())
	pc := redistest.NewClient(t, primary.Addr())
	version := pc.Info(ctx, "server").Val()
	if !strings.Contains(version, "redis_version:7.2") && !strings.Contains(version, "redis_version:7.4") &&
		!strings.Contains(version, "redis_version:8") {
		t.Fatalf("%s does not name a Redis 7.2+ server: INFO server says %q", redisproc.EnvServer, firstLine(version, "redis_version"))
	}
	for _, addr := range []string{primary.Addr(), replica.Addr()} {
		appendOnly(t, ctx, redistest.NewClient(t, addr))
	}
	// A replica reports its append-only file's offset only once the
	// rewrite that appendonly yes starts is done: until then WAITAOF
	// counts it out.
	redistest.WaitFor(t, 20*time.Second, func() bool {
		v, err := pc.Do(ctx, "waitaof", 1, 1, 100).Slice()
		return err == nil && len(v) == 2 && v[0] == int64(1) && v[1] == int64(1)
	}, "the replica's append-only file is never confirmed by WAITAOF")
	ns := redistest.Namespace(t)
	s := newStore(t, redisstore.Config{Client: pc, Namespace: ns, CommandTimeout: 3 * time.Second,
		Durability: redisstore.DurabilityAOF, DurableReplicas: 1, DurableTimeout: 2 * time.Second})
	found, err := s.CheckPersistence(ctx)
	if err != nil {
		t.Fatalf("%+v: %v", found, err)
	}
	onReplica := newStore(t, redisstore.Config{Client: redistest.NewClient(t, replica.Addr()), Namespace: ns})
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		f := storetest.NewFixture()
		resp := []byte("charge-" + f.Operation)
		_, err := exec.Execute(ctx, idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint},
			func(context.Context) ([]byte, error) { return resp, nil })
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
		rec := inspect(t, onReplica, f.Ref)
		if rec.State != onceflow.StateCompleted {
			t.Fatalf("operation %d: got %q, want %q", i, rec.State, onceflow.StateCompleted)
		}
		if !bytes.Equal(rec.Response, resp) {
			t.Fatalf("operation %d: got %q, want %q", i, rec.Response, resp)
		}
	}

	t.Logf("20 durable operations in %v", time.Since(began))
	f := storetest.NewFixture()
	var runs atomic.Int32
	_, err = exec.Execute(ctx, idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint},
		func(context.Context) ([]byte, error) {
			runs.Add(1)
			replica.Kill()
			return []byte("charged"), nil
		})
	requireUnconfirmed(t, err, runs.Load(), redisstore.DurabilityAOF)
}

// appendOnly turns appendonly on (fsync always) and waits until the
// server has written its append-only file.
func appendOnly(t *testing.T, ctx context.Context, c *redis.Client) {
	t.Helper()
	if err := c.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, func() bool {
		info := c.Info(ctx, "persistence").Val()
		return strings.Contains(info, "aof_enabled:1") && strings.Contains(info, "aof_rewrite_in_progress:0") &&
			!strings.Contains(info, "aof_rewrite_scheduled:1")
	}, "appendonly yes on %s", c.Options().Addr)
}

// firstLine is the INFO line that starts with name.
func firstLine(info, name string) string {
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, name) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
