package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistopo"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// topologyTests gates the tests that start whole topologies (seconds
// each, not for every CI run): ONCEFLOW_TOPOLOGY=1 runs them.
func topologyTests(t *testing.T) {
	t.Helper()
	if os.Getenv("ONCEFLOW_TOPOLOGY") != "1" {
		t.Skip("starts a Sentinel or Cluster topology: run with ONCEFLOW_TOPOLOGY=1")
	}
}

// ledger counts the effects of operations, and what the executor
// acknowledged.
type ledger struct {
	mu      sync.Mutex
	effects map[onceflow.OperationID]int
	acked   map[onceflow.OperationID][]byte
	refs    map[onceflow.OperationID]storetest.Fixture
	errs    map[string]int
}

func newLedger() *ledger {
	return &ledger{effects: map[onceflow.OperationID]int{}, acked: map[onceflow.OperationID][]byte{},
		refs: map[onceflow.OperationID]storetest.Fixture{}, errs: map[string]int{}}
}

// execute runs f's operation once through exec, counting its effect and
// remembering an acknowledged result.
func (l *ledger) execute(ctx context.Context, exec *idemstore.Executor, f storetest.Fixture) error {
	l.mu.Lock()
	l.refs[f.Operation] = f
	l.mu.Unlock()
	res, err := exec.Execute(ctx, idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint},
		func(context.Context) ([]byte, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.effects[f.Operation]++
			return []byte("effect of " + f.Operation), nil
		})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs[errClass(err)]++
		return err
	}
	if prev, ok := l.acked[f.Operation]; ok && string(prev) != string(res.Response) {
		return fmt.Errorf("%s acknowledged %q, then %q", f.Operation, prev, res.Response)
	}
	l.acked[f.Operation] = res.Response
	return nil
}

func errClass(err error) string {
	switch {
	case errors.Is(err, onceflow.OutcomeAwaitingDecision):
		return "awaiting decision"
	case errors.Is(err, onceflow.OutcomeEffectUnknown):
		return "effect unknown"
	case errors.Is(err, onceflow.OutcomeInProgress):
		return "in progress"
	case errors.Is(err, onceflow.OutcomeIndeterminate):
		return "indeterminate"
	case errors.Is(err, onceflow.OutcomeStoreUnavailable):
		return "unavailable"
	}
	return "other"
}

// check asserts that no operation ran twice, and that every acknowledged
// completion is in the store, replayed to a new attempt without running.
func (l *ledger) check(t *testing.T, exec *idemstore.Executor, s *redisstore.Store) {
	t.Helper()
	l.mu.Lock()
	acked := make(map[onceflow.OperationID][]byte, len(l.acked))
	for op, r := range l.acked {
		acked[op] = r
	}
	refs := l.refs
	l.mu.Unlock()
	var lost []onceflow.OperationID
	for op, resp := range acked {
		f := refs[op]
		obs, err := s.Inspect(t.Context(), f.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if !obs.Found || obs.Record.State != onceflow.StateCompleted {
			lost = append(lost, op)
			continue
		}
		if !bytes.Equal(obs.Record.Response, resp) {
			t.Fatalf("got %q, want %q", obs.Record.Response, resp)
		}
		if err := l.execute(t.Context(), exec, f); err != nil {
			t.Fatalf("%s: the replay: %v", op, err)
		}
	}
	t.Logf("acknowledged completions lost: %d of %d", len(lost), len(acked))
	// Every operation once more, as Temporal's retry would: none runs
	// a second time (a lost completion does, and is counted as such).
	for _, f := range refs {
		_ = l.execute(t.Context(), exec, f)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var twice []string
	for op, n := range l.effects {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ran %d times", op, n))
		}
	}
	t.Logf("operations %d, acknowledged %d, effects %d, lost %d, run twice %d, errors %v",
		len(refs), len(acked), len(l.effects), len(lost), len(twice), l.errs)
	if len(lost) != 0 {
		t.Fatalf("acknowledged, and lost: %d of %d, among them %v: got %v, want 0", len(lost), len(acked), lost[:min(len(lost), 5)], len(lost))
	}
	if len(twice) != 0 {
		t.Fatalf("got %q, want it empty", twice)
	}
}

// counts returns how many operations were acknowledged and tried.
func (l *ledger) counts() (acked, tried int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), len(l.refs)
}

// waitFor polls the counts until ok holds, failing t after
// redistopo.StartTimeout.
func (l *ledger) waitFor(t *testing.T, what string, ok func(acked, tried int) bool) {
	t.Helper()
	deadline := time.Now().Add(redistopo.StartTimeout)
	for {
		acked, tried := l.counts()
		if ok(acked, tried) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited for %s: %d acknowledged of %d", what, acked, tried)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// start runs fresh operations from workers goroutines (run) until the
// returned stop is called; stop returns when they are done.
func (l *ledger) start(exec *idemstore.Executor, workers int) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() { l.run(exec, workers, quit); close(done) }()
	return func() { close(quit); <-done }
}

// run executes fresh operations from workers goroutines until stop is
// closed; it returns when they are done.
func (l *ledger) run(exec *idemstore.Executor, workers int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = l.execute(ctx, exec, storetest.NewFixture())
				cancel()
			}
		})
	}
	wg.Wait()
}

// TestSentinelFailoverLosesNoAcknowledgedCompletion: a primary, two
// replicas and three Sentinels; operations run through a failover client
// with Durability replicas waiting for both replicas (WAIT 2) while the
// primary is failed over twice, once with SENTINEL FAILOVER and once by
// kill -9. Every completion the executor acknowledged is on the last
// primary and replays; no operation ran twice. After the kill only one
// replica is left, so no write is acknowledged any more: the operations
// end Indeterminate or EffectUnknown, never in a success that could be
// lost.
//
// WAIT 1 is not enough with two replicas: Sentinel promotes the replica
// with the largest replication offset it last saw (INFO, once a second),
// and after SENTINEL FAILOVER the old primary keeps taking writes, acked
// by the other replica, until Sentinel reconfigures it. With
// ONCEFLOW_SENTINEL_REPLICAS=1 the test waits for one replica and reports
// how many acknowledged completions were lost (docs/production.md has the
// figures), failing.
func TestSentinelFailoverLosesNoAcknowledgedCompletion(t *testing.T) {
	t.Parallel()
	topologyTests(t)
	topo := redistopo.StartSentinel(t, 2, 3)
	client := topo.Client(t)
	// ONCEFLOW_SENTINEL_REPLICAS=1 waits for one replica only, to measure
	// what that loses (the test then fails, naming the count).
	replicas := 2
	if os.Getenv("ONCEFLOW_SENTINEL_REPLICAS") == "1" {
		replicas = 1
	}
	s := newStore(t, redisstore.Config{Client: client, CommandTimeout: 2 * time.Second,
		Durability: redisstore.DurabilityReplicas, DurableReplicas: replicas, DurableTimeout: time.Second})
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	stop := l.start(exec, 8)

	l.waitFor(t, "100 acknowledged", func(a, _ int) bool { return a >= 100 })
	newPrimary, err := topo.Failover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SENTINEL FAILOVER: the primary is now %s", newPrimary)
	before, _ := l.counts()
	l.waitFor(t, "100 more acknowledged", func(a, _ int) bool { return a >= before+100 })

	killed, err := topo.Primary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	topo.Node(killed).Kill()
	newPrimary, err = topo.WaitNewPrimary(t.Context(), killed)
	if err != nil {
		t.Fatal(err)
	}
	ackedAtKill, triedAtKill := l.counts()
	t.Logf("kill -9 of %s: the primary is now %s", killed, newPrimary)
	l.waitFor(t, "100 more operations tried", func(_, n int) bool { return n >= triedAtKill+100 })
	if replicas == 1 {
		l.waitFor(t, "100 more acknowledged", func(a, _ int) bool { return a >= ackedAtKill+100 })
	}
	stop()
	acked, tried := l.counts()
	t.Logf("after the kill, with one replica left: %d of %d operations acknowledged", acked-ackedAtKill, tried-triedAtKill)
	// The durable store cannot confirm anything with one replica left:
	// inspect and retry through a store that does not wait.
	plain := newStore(t, redisstore.Config{Client: client, Namespace: keyNamespace(s), CommandTimeout: 2 * time.Second})
	plainExec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: plain})
	if err != nil {
		t.Fatal(err)
	}
	l.check(t, plainExec, plain)
}

// clusterDurable is a Cluster of three primaries with a replica each,
// every replica synced, and a store on it with Durability replicas
// (WAIT 1 on the primary of each record's slot).
type clusterDurable struct {
	cl     *redistopo.Cluster
	client *redis.ClusterClient
	store  *redisstore.Store
	exec   *idemstore.Executor
}

func newClusterDurable(t *testing.T) clusterDurable {
	t.Helper()
	var c clusterDurable
	c.cl = redistopo.StartCluster(t, 3, 1)
	if err := c.cl.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.client = c.cl.Client(t)
	c.store = newStore(t, redisstore.Config{Client: c.client, CommandTimeout: 2 * time.Second,
		Durability: redisstore.DurabilityReplicas, DurableReplicas: 1, DurableTimeout: time.Second})
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: c.store})
	if err != nil {
		t.Fatal(err)
	}
	c.exec = exec
	return c
}

// shard returns the address of the primary of ref's slot, as the client
// sees it, and of its replica.
func (c clusterDurable) shard(t *testing.T, ref onceflow.Ref) (primary, replica string) {
	t.Helper()
	node, err := c.client.MasterForKey(t.Context(), c.store.Key(ref))
	if err != nil {
		t.Fatal(err)
	}
	primary = node.Options().Addr
	replica, err = c.cl.ReplicaOf(t.Context(), primary)
	if err != nil {
		t.Fatal(err)
	}
	return primary, replica
}

// onReplica returns a store on the replica at addr, reading the slots of
// its primary (READONLY on every connection), without durability.
func (c clusterDurable) onReplica(t *testing.T, addr string) *redisstore.Store {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
	t.Cleanup(func() { _ = rc.Close() })
	return newStore(t, redisstore.Config{Client: rc, Namespace: keyNamespace(c.store)})
}

// TestClusterDurableCompletionIsOnTheReplica: on a Cluster with
// Durability replicas (WAIT 1 on the primary of the record's slot, after
// a SET in that slot), every completion the executor acknowledges is
// already on the replica of its slot's primary when Execute returns, on
// each of the three shards. CheckPersistence reads each primary, with
// its one replica. After a CLUSTER FAILOVER that the store's client has
// not seen yet, a durable call is not confirmed (its durability SET went
// to the old primary: MOVED), and one on the reloaded map is.
func TestClusterDurableCompletionIsOnTheReplica(t *testing.T) {
	t.Parallel()
	topologyTests(t)
	c := newClusterDurable(t)
	ps, err := c.store.CheckPersistence(t.Context())
	if !errors.Is(err, redisstore.ErrPersistence) { // appendonly no
		t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrPersistence)
	}
	if len(ps) != 3 {
		t.Fatalf("len = %d, want %d: %v", len(ps), 3, ps)
	}
	for _, p := range ps {
		if p.ConnectedReplicas != 1 {
			t.Fatalf("%v: got %v, want %v", p.Addr, p.ConnectedReplicas, 1)
		}
	}
	if strings.Contains(err.Error(), "replicas are connected") {
		t.Fatalf("%q contains %q", err.Error(), "replicas are connected")
	}

	replicas := map[string]*redisstore.Store{}
	perShard := map[string]int{}
	for i := range 60 {
		f := storetest.NewFixture()
		resp := []byte("charge-" + f.Operation)
		res, err := c.exec.Execute(t.Context(), idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint},
			func(ctx context.Context) ([]byte, error) { return resp, nil })
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
		if !bytes.Equal(res.Response, resp) {
			t.Fatalf("got %q, want %q", res.Response, resp)
		}
		primary, replica := c.shard(t, f.Ref)
		perShard[primary]++
		if replicas[replica] == nil {
			replicas[replica] = c.onReplica(t, replica)
		}
		obs, err := replicas[replica].Inspect(t.Context(), f.Ref)
		if err != nil {
			t.Fatalf("operation %d: inspect on the replica %s: %v", i, replica, err)
		}
		if !obs.Found {
			t.Fatalf("operation %d: acknowledged, but the replica %s of %s has no record", i, replica, primary)
		}
		if obs.Record.State != onceflow.StateCompleted {
			t.Fatalf("operation %d: got %q, want %q", i, obs.Record.State, onceflow.StateCompleted)
		}
		if !bytes.Equal(obs.Record.Response, resp) {
			t.Fatalf("operation %d: got %q, want %q", i, obs.Record.Response, resp)
		}
	}
	t.Logf("completions per primary: %v", perShard)
	if len(perShard) != 3 {
		t.Fatalf("the records reach every shard: len = %d, want %d: %v", len(perShard), 3, perShard)
	}

	// A shard fails over behind the store's back: its client still maps
	// the slot to the old primary, the INSPECT follows the MOVED to the new
	// one, and the durability SET
	// sent to the old one is answered MOVED: the wait proves nothing, so
	// the call is Unavailable. (An INSPECT, because a claim's replay read
	// would meet the MOVED first, and the client might have reloaded its
	// map before the durable call looks up the primary.) Once the client
	// has reloaded its map, a durable call on the new primary is confirmed.
	f := storetest.NewFixture()
	primary, replica := c.shard(t, f.Ref)
	if err := c.cl.Failover(t.Context(), replica); err != nil {
		t.Fatal(err)
	}
	if err := c.cl.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = c.store.Inspect(t.Context(), f.Ref)
	if !errors.Is(err, onceflow.OutcomeStoreUnavailable) {
		t.Fatalf("err = %v, want it to match %v", err, onceflow.OutcomeStoreUnavailable)
	}
	if !errors.Is(err, redisstore.ErrNotDurable) {
		t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrNotDurable)
	}
	if err == nil || !strings.Contains(err.Error(), "MOVED") {
		t.Fatalf("err = %v, want it to contain %q", err, "MOVED")
	}
	t.Logf("after the failover of %s to %s: %v", primary, replica, err)
	deadline := time.Now().Add(redistopo.StartTimeout)
	for {
		g := storetest.NewFixture()
		node, err := c.client.MasterForKey(t.Context(), c.store.Key(g.Ref))
		if err != nil {
			t.Fatal(err)
		}
		if node.Options().Addr == replica {
			_, err = c.store.ClaimStart(t.Context(), g.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
			if err != nil {
				t.Fatalf("a durable call on the new primary %s: %v", replica, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client does not map a slot to the new primary %s", replica)
		}
		c.client.ReloadState(t.Context())
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClusterDurableCompletionWithoutReplicaIsNeverASuccess: the replica
// of the record's shard is killed while the action runs, after the start
// was confirmed on it. The completion's WAIT on that shard's primary then
// reaches no replica: the call is Indeterminate, the executor's INSPECT
// cannot confirm it either, and Execute returns onceflow.OutcomeAwaitingDecision, never
// a success, although the primary holds the completion. The other shards,
// with their replicas, still acknowledge.
func TestClusterDurableCompletionWithoutReplicaIsNeverASuccess(t *testing.T) {
	t.Parallel()
	topologyTests(t)
	c := newClusterDurable(t)
	f := storetest.NewFixture()
	primary, replica := c.shard(t, f.Ref)
	var runs atomic.Int32
	_, err := c.exec.Execute(t.Context(), idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint},
		func(ctx context.Context) ([]byte, error) {
			runs.Add(1)
			c.cl.NodeAt(replica).Kill()
			return []byte("charged"), nil
		})
	requireUnconfirmed(t, err, runs.Load(), redisstore.DurabilityReplicas)

	// The primary applied the completion: it is the write a failover may
	// lose, so it was not acknowledged.
	plain := newStore(t, redisstore.Config{Client: c.client, Namespace: keyNamespace(c.store)})
	if got := inspect(t, plain, f.Ref).State; got != onceflow.StateCompleted {
		t.Fatalf("got %q, want %q", got, onceflow.StateCompleted)
	}

	// On that shard a write is Indeterminate, a read Unavailable; on
	// another a write is confirmed.
	var same, other storetest.Fixture
	for same.Operation == "" || other.Operation == "" {
		g := storetest.NewFixture()
		node, err := c.client.MasterForKey(t.Context(), c.store.Key(g.Ref))
		if err != nil {
			t.Fatal(err)
		}
		if node.Options().Addr == primary {
			same = g
		} else {
			other = g
		}
	}
	_, err = c.store.ClaimStart(t.Context(), same.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
	if !errors.Is(err, onceflow.OutcomeIndeterminate) {
		t.Fatalf("err = %v, want it to match %v", err, onceflow.OutcomeIndeterminate)
	}
	if !errors.Is(err, redisstore.ErrNotDurable) {
		t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrNotDurable)
	}
	_, err = c.store.Inspect(t.Context(), same.Ref)
	if !errors.Is(err, onceflow.OutcomeStoreUnavailable) {
		t.Fatalf("err = %v, want it to match %v", err, onceflow.OutcomeStoreUnavailable)
	}
	if !errors.Is(err, redisstore.ErrNotDurable) {
		t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrNotDurable)
	}
	_, err = c.store.ClaimStart(t.Context(), other.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
	if err != nil {
		t.Fatal(err)
	}
}

// TestClusterFailoverLosesNoAcknowledgedCompletion: three primaries with
// a replica each; operations run from 8 goroutines through a store with
// Durability replicas (WAIT 1 on the primary of each record's slot) while
// one shard is failed over by CLUSTER FAILOVER (a manual failover: the
// primary stops its clients until its replica has caught up) and another
// by kill -9 of its primary (its replica is promoted after
// cluster-node-timeout, 2 s). Every completion the executor acknowledged
// is in the Cluster afterwards and replays; no operation ran twice. After
// the kill the promoted replica has no replica of its own, so its shard
// acknowledges nothing: its operations end Indeterminate or
// EffectUnknown, never in a success that could be lost.
//
// With ONCEFLOW_CLUSTER_DURABILITY=none the store does not wait, and the
// test reports how many acknowledged completions the failovers lost: the
// writes the killed primary had not yet sent to its replica (a manual
// failover loses none: the replica catches up first). It may then fail,
// naming the count; three runs on loopback lost none (docs/production.md):
// the replica gets each write almost at once, so the kill found none in
// flight, which no production network promises.
func TestClusterFailoverLosesNoAcknowledgedCompletion(t *testing.T) {
	t.Parallel()
	topologyTests(t)
	t.Cleanup(func() { waitDialProbesGone(t) }) // after the clients' Close
	cl := redistopo.StartCluster(t, 3, 1)
	if err := cl.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	client := cl.Client(t)
	cfg := redisstore.Config{Client: client, CommandTimeout: 2 * time.Second,
		Durability: redisstore.DurabilityReplicas, DurableReplicas: 1, DurableTimeout: time.Second}
	if d := os.Getenv("ONCEFLOW_CLUSTER_DURABILITY"); d != "" {
		if d != "none" {
			t.Fatalf("ONCEFLOW_CLUSTER_DURABILITY is none or unset: got %q, want %q", d, "none")
		}
		cfg.Durability, cfg.DurableReplicas, cfg.DurableTimeout = redisstore.DurabilityNone, 0, 0
	}
	t.Logf("Durability %q", cfg.Durability)
	s := newStore(t, cfg)
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	stop := l.start(exec, 8)
	start := time.Now()
	l.waitFor(t, "100 acknowledged", func(a, _ int) bool { return a >= 100 })

	// (a) A manual failover of the first primary's shard.
	primaries, err := cl.Primaries(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(primaries) != 3 {
		t.Fatalf("len = %d, want %d: %v", len(primaries), 3, primaries)
	}
	replica, err := cl.ReplicaOf(t.Context(), primaries[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Failover(t.Context(), replica); err != nil {
		t.Fatal(err)
	}
	acked, tried := l.counts()
	t.Logf("CLUSTER FAILOVER after %v: %s took over from %s (%d acknowledged of %d)",
		time.Since(start).Round(time.Millisecond), replica, primaries[0], acked, tried)
	l.waitFor(t, "100 more acknowledged", func(a, _ int) bool { return a >= acked+100 })

	// (b) kill -9 of the primary of another shard.
	killed := primaries[1]
	promoted, err := cl.KillPrimary(t.Context(), killed)
	if err != nil {
		t.Fatal(err)
	}
	ackedAtKill, triedAtKill := l.counts()
	t.Logf("kill -9 of %s after %v: %s promoted (%d acknowledged of %d)",
		killed, time.Since(start).Round(time.Millisecond), promoted, ackedAtKill, triedAtKill)
	l.waitFor(t, "100 more operations tried", func(_, n int) bool { return n >= triedAtKill+100 })
	stop()
	acked, tried = l.counts()
	t.Logf("after the kill: %d of %d operations acknowledged; in all %v", acked-ackedAtKill, tried-triedAtKill,
		time.Since(start).Round(time.Millisecond))
	// The durable store cannot confirm anything on the shard that lost its
	// replica: inspect and retry through a store that does not wait, on a
	// client that knows the promotion (the first may still route a slot
	// to the killed node until it reloads the slots).
	plain := newStore(t, redisstore.Config{Client: freshClusterClient(t, cl, killed), Namespace: keyNamespace(s), CommandTimeout: 2 * time.Second})
	plainExec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: plain})
	if err != nil {
		t.Fatal(err)
	}
	l.check(t, plainExec, plain)
}

// dialProbe is the function of the goroutine a go-redis pool starts after
// repeated dial errors (the killed node): it probes the address once a
// second, and returns at the first probe after the pool is closed.
const dialProbe = "github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"

// waitDialProbesGone waits, up to 3 s, until no dialProbe goroutine is
// left, so that TestMain's goleak check does not count one that the
// pool's Close has ended and that is in its last second's sleep.
func waitDialProbesGone(t *testing.T) {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(3 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte(dialProbe)) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("a go-redis dial probe outlived its pool by 3 s: a client of the cluster was not closed?")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freshClusterClient returns a new client of cl once its view of the
// slots has three primaries that answer, none of them gone.
func freshClusterClient(t *testing.T, cl *redistopo.Cluster, gone string) *redis.ClusterClient {
	t.Helper()
	c := cl.Client(t)
	deadline := time.Now().Add(redistopo.StartTimeout)
	for {
		var mu sync.Mutex
		var masters []string
		err := c.ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error {
			mu.Lock()
			masters = append(masters, m.Options().Addr)
			mu.Unlock()
			return m.Ping(ctx).Err()
		})
		if err == nil && len(masters) == 3 && !slices.Contains(masters, gone) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client's primaries are %v (%v), want three without %s", masters, err, gone)
		}
		c.ReloadState(t.Context())
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterReshardWhileOperationsRun: three primaries with a replica
// each; records spread over the primaries; 1000 slots move from one
// primary to another (redis-cli --cluster reshard: SETSLOT
// IMPORTING/MIGRATING and MIGRATE, key by key) while operations run. The
// client follows MOVED and ASK; no operation runs twice; every
// acknowledged completion is inspected and replayed.
func TestClusterReshardWhileOperationsRun(t *testing.T) {
	t.Parallel()
	topologyTests(t)
	for _, pipelined := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto-pipelined=%t", pipelined), func(t *testing.T) {
			t.Parallel()
			testClusterReshardWhileOperationsRun(t, pipelined)
		})
	}
}

func testClusterReshardWhileOperationsRun(t *testing.T, pipelined bool) {
	cl := redistopo.StartCluster(t, 3, 1)
	client := cl.Client(t)
	s := newStore(t, redisstore.Config{Client: client, CommandTimeout: 2 * time.Second, NoAutoPipeline: !pipelined})
	ex, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	stop := l.start(ex, 8)

	// The records spread over every primary.
	deadline := time.Now().Add(redistopo.StartTimeout)
	for {
		var empty atomic.Int32
		if err := client.ForEachMaster(t.Context(), func(ctx context.Context, c *redis.Client) error {
			if c.DBSize(ctx).Val() == 0 {
				empty.Add(1)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if empty.Load() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("records did not reach every primary")
		}
		time.Sleep(10 * time.Millisecond)
	}

	ids := masterIDs(t, client)
	if len(ids) != 3 {
		t.Fatalf("len = %d, want %d: %v", len(ids), 3, ids)
	}
	// Replays of the completed operations run through the reshard too, on
	// a store of their own (its replay reads do not pause for the fresh
	// operations' misses): a read of a moving slot is redirected, on the
	// auto-pipeliner as on the client, and fails nothing.
	rs := newStore(t, redisstore.Config{Client: client, Namespace: keyNamespace(s), CommandTimeout: 2 * time.Second, NoAutoPipeline: !pipelined})
	rex, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: rs})
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	var done []storetest.Fixture
	for op := range l.acked {
		done = append(done, l.refs[op])
	}
	l.mu.Unlock()
	var replays, replayErrs atomic.Int64
	quit := make(chan struct{})
	var rwg sync.WaitGroup
	for w := range 8 {
		rwg.Go(func() {
			for i := w; ; i += 8 {
				select {
				case <-quit:
					return
				default:
				}
				f := done[i%len(done)]
				res, err := rex.Execute(t.Context(), idemstore.Request{Ref: f.Ref, Operation: f.Operation, Fingerprint: f.Fingerprint},
					func(context.Context) ([]byte, error) { return nil, errors.New("a completed operation ran again") })
				if err != nil || res.Outcome != onceflow.OutcomeReplayed {
					replayErrs.Add(1)
					t.Errorf("replay of %s: %v %v", f.Operation, res.Outcome, err)
					continue
				}
				replays.Add(1)
			}
		})
	}
	out, err := exec.Command("redis-cli", "--cluster", "reshard", cl.Nodes[0].Addr,
		"--cluster-from", ids[0], "--cluster-to", ids[1], "--cluster-slots", "1000", "--cluster-yes").CombinedOutput()
	close(quit)
	rwg.Wait()
	t.Logf("%d replays during the reshard (%d through the auto-pipeliner), %d failed", replays.Load(), redisstore.PipelinedReads(rs), replayErrs.Load())
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	// redis-cli names each slot twice: in its plan and as it moves it.
	moved := strings.Count(string(out), "Moving slot") / 2
	t.Logf("redis-cli --cluster reshard moved %d slots", moved)
	if moved != 1000 {
		t.Fatalf("got %v, want %v", moved, 1000)
	}
	stop()
	l.mu.Lock()
	if l.errs["other"] != 0 {
		t.Fatalf("errors: %v: got %v, want 0", l.errs, l.errs["other"])
	}
	l.mu.Unlock()
	l.check(t, ex, s)
	if pipelined {
		t.Logf("%d replay reads rode the auto-pipeliner", redisstore.PipelinedReads(s))
		if redisstore.PipelinedReads(s) == 0 {
			t.Fatal("no replay read rode the auto-pipeliner")
		}
	}
}

// masterIDs returns the node IDs of the cluster's primaries, ordered by
// their first slot.
func masterIDs(t *testing.T, c *redis.ClusterClient) []string {
	t.Helper()
	shards, err := c.ClusterShards(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]int64{}
	var ids []string
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role == "master" && len(sh.Slots) > 0 {
				ids = append(ids, n.ID)
				first[n.ID] = sh.Slots[0].Start
			}
		}
	}
	sort.Slice(ids, func(i, j int) bool { return first[ids[i]] < first[ids[j]] })
	return ids
}
