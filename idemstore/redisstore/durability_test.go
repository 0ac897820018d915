package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestDurabilityConfig: the defaults and what New refuses.
func TestDurabilityConfig(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cluster.Close() })
	ok := []redisstore.Config{
		{Client: c},
		{Client: c, Durability: redisstore.DurabilityNone},
		{Client: c, Durability: redisstore.DurabilityReplicas},
		{Client: c, Durability: redisstore.DurabilityReplicas, DurableReplicas: 2, DurableTimeout: 50 * time.Millisecond},
		{Client: c, Durability: redisstore.DurabilityAOF, DurableReplicas: 0},
		{Client: cluster},
		{Client: cluster, Durability: redisstore.DurabilityReplicas},
		{Client: cluster, Durability: redisstore.DurabilityReplicas, DurableReplicas: 2, DurableTimeout: 50 * time.Millisecond},
		{Client: cluster, Durability: redisstore.DurabilityAOF},
	}
	for _, cfg := range ok {
		_, err := redisstore.New(cfg)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
	refused := map[string]redisstore.Config{
		"not one of":                      {Client: c, Durability: "fsync"},
		"need Config.Durability":          {Client: c, DurableReplicas: 1},
		"needs a *redis.Client":           {Client: wrappedClient{c}, Durability: redisstore.DurabilityReplicas},
		"at least 1":                      {Client: c, Durability: redisstore.DurabilityReplicas, DurableReplicas: -1},
		"less than Config.CommandTimeout": {Client: c, Durability: redisstore.DurabilityReplicas, DurableTimeout: time.Second},
	}
	for want, cfg := range refused {
		_, err := redisstore.New(cfg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to contain %q", err, want)
		}
	}
}

// wrappedClient is a redis.UniversalClient of a type the store does not
// know, so cannot reach the primary of a write through.
type wrappedClient struct{ redis.UniversalClient }

// TestDurableKeyIsInTheRecordsSlot: under a Cluster the durability wait
// writes a key with the record key's hash tag, so in its slot, on its
// primary (TestClusterDurableCompletionIsOnTheReplica runs it).
func TestDurableKeyIsInTheRecordsSlot(t *testing.T) {
	t.Parallel()
	s := newStore(t, redisstore.Config{Namespace: "ns"})
	f := storetest.NewFixture()
	k := redisstore.DurableKey(s, s.Key(f.Ref))
	tag := "{" + redisstore.KeyDigest(f.Ref.Digest.Hex) + "}"
	if k != "ns:idem:durable:"+tag {
		t.Fatalf("got %q, want %q", k, "ns:idem:durable:"+tag)
	}
	if !strings.HasSuffix(s.Key(f.Ref), tag) {
		t.Fatal(s.Key(f.Ref))
	}
}

// TestWaitAOFDetection: WAITAOF is Redis 7.2's; CheckPersistence refuses
// DurabilityAOF on an older server (the 7.0 here: TestCheckPersistence).
func TestWaitAOFDetection(t *testing.T) {
	t.Parallel()
	for version, want := range map[string]bool{
		"7.0.15": false, "6.2.14": false, "7.1.0": false, "7.2.0": true, "7.2.4": true, "7.4.1": true, "8.0.0": true, "10.0.1": true,
		"": false, "garbage": false, "7": false, "7.x.1": false,
	} {
		if got := redisstore.WaitAOFSupported(version); got != want {
			t.Fatalf("%v: got %v, want %v", version, got, want)
		}
	}
}

// replicated is a primary with one replica, a store on the primary with
// Durability replicas and an executor on it, and a store reading the
// replica.
type replicated struct {
	primary, replica *redistest.Server
	store, onReplica *redisstore.Store
	exec             *idemstore.Executor
}

func newReplicated(t *testing.T) replicated {
	t.Helper()
	var r replicated
	r.primary = redistest.Start(t)
	r.replica = redistest.StartReplica(t, r.primary.Addr())
	ns := redistest.Namespace(t)
	r.store = newStore(t, redisstore.Config{Client: redistest.NewClient(t, r.primary.Addr()), Namespace: ns,
		CommandTimeout: 2 * time.Second, Durability: redisstore.DurabilityReplicas, DurableReplicas: 1, DurableTimeout: time.Second})
	r.onReplica = newStore(t, redisstore.Config{Client: redistest.NewClient(t, r.replica.Addr()), Namespace: ns})
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: r.store})
	if err != nil {
		t.Fatal(err)
	}
	r.exec = exec
	return r
}

// TestDurableCompletionIsOnTheReplica: with Durability replicas (WAIT 1),
// every completion the executor acknowledges is already on the replica
// when Execute returns, and so are the starts and the replays' records.
func TestDurableCompletionIsOnTheReplica(t *testing.T) {
	t.Parallel()
	r := newReplicated(t)
	for i := range 50 {
		f := storetest.NewFixture()
		resp := []byte("charge-" + f.Operation)
		res, err := r.exec.Execute(t.Context(), idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint},
			func(ctx context.Context) ([]byte, error) { return resp, nil })
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
		if !bytes.Equal(res.Response, resp) {
			t.Fatalf("got %q, want %q", res.Response, resp)
		}
		obs, err := r.onReplica.Inspect(t.Context(), f.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if !obs.Found {
			t.Fatalf("operation %d: acknowledged, but the replica has no record", i)
		}
		if obs.Record.State != onceflow.StateCompleted {
			t.Fatalf("operation %d: got %q, want %q", i, obs.Record.State, onceflow.StateCompleted)
		}
		if !bytes.Equal(obs.Record.Response, resp) {
			t.Fatalf("operation %d: got %q, want %q", i, obs.Record.Response, resp)
		}
	}
}

// TestDurableCompletionWithoutReplicaIsNeverASuccess: the replica stops
// (killed, or hung by SIGSTOP) while the action runs, after the start was
// confirmed on it. The completion's WAIT then reaches no replica (at once,
// or at DurableTimeout): the call is Indeterminate, the executor's INSPECT
// cannot confirm it either, and Execute returns onceflow.OutcomeAwaitingDecision (an
// onceflow.Error), never a success, although the primary holds the
// completion.
func TestDurableCompletionWithoutReplicaIsNeverASuccess(t *testing.T) {
	t.Parallel()
	for name, stop := range map[string]func(*testing.T, *redistest.Server){
		"killed": func(_ *testing.T, s *redistest.Server) { s.Kill() },
		"hung": func(t *testing.T, s *redistest.Server) {
			pid := s.PID()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newReplicated(t)
			f := storetest.NewFixture()
			var runs atomic.Int32
			_, err := r.exec.Execute(t.Context(), idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint},
				func(ctx context.Context) ([]byte, error) {
					runs.Add(1)
					stop(t, r.replica)
					return []byte("charged"), nil
				})
			requireUnconfirmed(t, err, runs.Load(), redisstore.DurabilityReplicas)

			// The primary applied the completion: it is the write a
			// failover may lose, so it was not acknowledged.
			plain := newStore(t, redisstore.Config{Client: redistest.NewClient(t, r.primary.Addr()), Namespace: keyNamespace(r.store)})
			if got := inspect(t, plain, f.Ref).State; got != onceflow.StateCompleted {
				t.Fatalf("got %q, want %q", got, onceflow.StateCompleted)
			}

			// The store itself: a write is Indeterminate, a read Unavailable.
			g := storetest.NewFixture()
			_, err = r.store.ClaimStart(t.Context(), g.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
			if !errors.Is(err, onceflow.OutcomeIndeterminate) {
				t.Fatalf("err = %v, want it to match %v", err, onceflow.OutcomeIndeterminate)
			}
			if !errors.Is(err, redisstore.ErrNotDurable) {
				t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrNotDurable)
			}
			_, err = r.store.Inspect(t.Context(), g.Ref)
			if !errors.Is(err, onceflow.OutcomeStoreUnavailable) {
				t.Fatalf("err = %v, want it to match %v", err, onceflow.OutcomeStoreUnavailable)
			}
			if !errors.Is(err, redisstore.ErrNotDurable) {
				t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrNotDurable)
			}
		})
	}
}

// requireUnconfirmed checks the end of an operation whose action ran once
// and whose completion no replica confirmed: never a success, but an
// unknown effect to recover, saying the write was not made durable.
func requireUnconfirmed(t *testing.T, err error, runs int32, mode redisstore.Durability) {
	t.Helper()
	if runs != int32(1) {
		t.Fatalf("got %v, want %v", runs, int32(1))
	}
	if !errors.Is(err, onceflow.OutcomeAwaitingDecision) {
		t.Fatalf("err = %v, want it to match %v", err, onceflow.OutcomeAwaitingDecision)
	}
	if !errors.Is(err, onceflow.OutcomeEffectUnknown) {
		t.Fatalf("err = %v, want it to match %v", err, onceflow.OutcomeEffectUnknown)
	}
	if !errors.Is(err, redisstore.ErrNotDurable) {
		t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrNotDurable)
	}
	var de *redisstore.DurabilityError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want a %T", err, de)
	}
	if de.Durability != mode {
		t.Fatalf("got %q, want %q", de.Durability, mode)
	}
	if de.Want != 1 {
		t.Fatalf("got %v, want %v", de.Want, 1)
	}
	if de.Got != 0 {
		t.Fatalf("got %v, want %v", de.Got, 0)
	}
}

// TestCheckPersistence: appendonly no is a problem; appendonly yes with
// appendfsync always is not; everysec is a problem without replicas to
// wait for and not with them; too few replicas, and WAITAOF on Redis 7.0,
// are problems; an unreadable CONFIG is an error that is not
// ErrPersistence.
func TestCheckPersistence(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := redistest.NewClient(t, srv.Addr())
	none := newStore(t, redisstore.Config{Client: c})
	problems := func(s *redisstore.Store) string {
		t.Helper()
		ps, err := s.CheckPersistence(t.Context())
		if len(ps) != 1 {
			t.Fatalf("len = %d, want %d: %v", len(ps), 1, ps)
		}
		if err == nil {
			return ""
		}
		if !errors.Is(err, redisstore.ErrPersistence) {
			t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrPersistence)
		}
		var pe *redisstore.PersistenceError
		if !errors.As(err, &pe) {
			t.Fatalf("err = %v, want a %T", err, pe)
		}
		if pe.Addr != srv.Addr() {
			t.Fatalf("got %q, want %q", pe.Addr, srv.Addr())
		}
		return strings.Join(pe.Problems, "\n")
	}
	if !strings.Contains(problems(none), "appendonly is no") {
		t.Fatalf("%q does not contain %q", problems(none), "appendonly is no")
	}

	if err := c.ConfigSet(t.Context(), "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(t.Context(), "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(problems(none), "appendfsync is everysec") {
		t.Fatalf("%q does not contain %q", problems(none), "appendfsync is everysec")
	}
	if err := c.ConfigSet(t.Context(), "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	if len(problems(none)) != 0 {
		t.Fatalf("got %q, want it empty", problems(none))
	}

	replicas := newStore(t, redisstore.Config{Client: c, Durability: redisstore.DurabilityReplicas})
	if !strings.Contains(problems(replicas), "0 replicas are connected and Config.DurableReplicas is 1") {
		t.Fatalf("%q does not contain %q", problems(replicas), "0 replicas are connected and Config.DurableReplicas is 1")
	}
	aof := newStore(t, redisstore.Config{Client: c, Durability: redisstore.DurabilityAOF})
	if hasWaitAOF(t, c) { // Redis 7.2+, Valkey
		if strings.Contains(problems(aof), "WAITAOF") {
			t.Fatalf("%q contains %q", problems(aof), "WAITAOF")
		}
	} else {
		if !strings.Contains(problems(aof), "has no WAITAOF") {
			t.Fatalf("%q does not contain %q", problems(aof), "has no WAITAOF")
		}
	}

	redistest.StartReplica(t, srv.Addr())
	if err := c.ConfigSet(t.Context(), "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	if len(problems(replicas)) != 0 {
		t.Fatalf("got %q, want it empty", problems(replicas))
	}
	ps, err := replicas.CheckPersistence(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (redisstore.Persistence{Addr: srv.Addr(), Version: ps[0].Version, AppendOnly: true, AppendFsync: "everysec",
		MinReplicasToWrite: 0, ConnectedReplicas: 1}); ps[0] != want {
		t.Fatalf("got %v, want %v", ps[0], want)
	}

	// A user without CONFIG (as on managed services): not a verdict.
	if err := c.Do(t.Context(), "ACL", "SETUSER", "noconfig", "on", ">not-a-secret", "+@all", "-config", "~*", "&*").Err(); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noconfig", Password: "not-a-secret", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = limited.Close() })
	_, err = newStore(t, redisstore.Config{Client: limited}).CheckPersistence(t.Context())
	if err == nil {
		t.Fatal("got no error, want one")
	}
	if errors.Is(err, redisstore.ErrPersistence) {
		t.Fatalf("err = %v, want it not to match %v", err, redisstore.ErrPersistence)
	}
	if !strings.Contains(err.Error(), "CONFIG GET") {
		t.Fatalf("%q does not contain %q", err.Error(), "CONFIG GET")
	}
}

// hasWaitAOF says whether the server knows WAITAOF (Redis 7.2 and newer,
// Valkey).
func hasWaitAOF(t *testing.T, c *redis.Client) bool {
	t.Helper()
	info, err := c.Do(t.Context(), "COMMAND", "INFO", "WAITAOF").Slice()
	if err != nil {
		t.Fatal(err)
	}
	return len(info) == 1 && info[0] != nil
}
