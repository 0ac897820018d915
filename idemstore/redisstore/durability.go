package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durability says what the store waits for, after a write that matters,
// before it answers with the script's reply (Config.Durability).
type Durability string

const (
	// DurabilityNone trusts the primary's reply: a write is acknowledged
	// once the primary applied it, and a failover to a replica that had
	// not received it loses it. The default, and the store's behaviour
	// before the option existed.
	DurabilityNone Durability = "none"
	// DurabilityReplicas sends WAIT <DurableReplicas> <DurableTimeout>
	// after every write that matters (see Config.Durability), on one
	// connection to the primary that ran the write, after a write that is
	// propagated to the replicas and so advances that connection's
	// replication offset past the record's last write, whoever made it:
	// the WAIT covers it. With a *redis.Client that write is a PUBLISH;
	// with a *redis.ClusterClient (whose PUBLISH goes over the cluster
	// bus, not the replication stream) it is SET of a key in the record's
	// slot that expires at once, sent to the primary of the slot (see
	// confirmDurable). Fewer replicas by the timeout, no answer, or a
	// redirection (the slot moved since the write) makes the call
	// Indeterminate (an Inspect Unavailable), exactly as a lost reply:
	// the executor then never reports a success it cannot prove
	// (TestDurableCompletionIsOnTheReplica,
	// TestDurableCompletionWithoutReplicaIsNeverASuccess, and their
	// Cluster versions in topology_test.go).
	DurabilityReplicas Durability = "replicas"
	// DurabilityAOF sends WAITAOF 1 <DurableReplicas> <DurableTimeout>
	// instead: the write is in the primary's append-only file, fsynced,
	// and in that of DurableReplicas replicas. It needs Redis 7.2 or
	// newer with appendonly yes on the primary and the replicas;
	// CheckPersistence refuses an older server (waitAOFSupported,
	// TestWaitAOFDetection). Against Valkey 8.0.1 each wait for a replica
	// took about a second, the replica's acknowledgement cadence
	// (TestWaitAOFOnAServerThatHasIt, run with ONCEFLOW_REDIS_SERVER):
	// give DurableTimeout more than that.
	DurabilityAOF Durability = "aof"
)

// durableChannel is the Pub/Sub channel of the PUBLISH that precedes each
// WAIT (under the store's namespace); nobody needs to listen to it. Under
// a Cluster the same name, followed by ":" and the record key's hash tag,
// is the key the store writes before the WAIT instead (durableKey).
const durableChannel = ":idem:durable"

// ErrNotDurable: the store could not confirm that a write reached the
// replicas (or append-only files) Config.Durability asks for.
var ErrNotDurable = errors.New("redisstore: write not confirmed durable")

// DurabilityError reports a WAIT (or WAITAOF) that confirmed fewer
// replicas than Config.DurableReplicas by Config.DurableTimeout. The
// write may have applied on the primary and may be lost by a failover: the
// store reports the call Indeterminate (Inspect: Unavailable), wrapping
// this error. It matches ErrNotDurable.
type DurabilityError struct {
	Durability Durability
	Want       int // replicas asked for
	Got        int // replicas that confirmed
	Local      bool
	Timeout    time.Duration
}

func (e *DurabilityError) Error() string {
	local := ""
	if e.Durability == DurabilityAOF && !e.Local {
		local = ", and the primary's own append-only file did not confirm the fsync"
	}
	return fmt.Sprintf("redisstore: %d of %d replicas confirmed the write within %v%s (Config.Durability %q); "+
		"the write may be lost by a failover: check that the replicas are up and connected (INFO replication), "+
		"or lower Config.DurableReplicas", e.Got, e.Want, e.Timeout, local, e.Durability)
}

// Is reports whether target is ErrNotDurable.
func (e *DurabilityError) Is(target error) bool { return target == ErrNotDurable }

// durableOp reports whether the store waits after the script op under a
// Durability other than none: after every write that a later attempt
// relies on (claim+start and start: EXECUTING is the evidence that the
// effect may have run; complete and resolve: the result that is replayed;
// fail: the ABANDONED or FAILED_RETRYABLE evidence; renew: a lease
// extension a failover must not shorten, or a second attempt would run
// beside the first) and after inspect, whose answer the executor acts on
// after a lost reply. Not after claim (CLAIMED: nothing ran, and its start
// waits) nor release (it only deletes a CLAIMED record).
func durableOp(op string) bool {
	switch op {
	case opClaimStart, opStart, opComplete, opFail, opRenew, opResolve, opInspect:
		return true
	}
	return false
}

// setDurabilityDefaults fills and checks the durability fields of c; the
// command timeout must be set already.
func (c *Config) setDurabilityDefaults() error {
	switch c.Durability {
	case "":
		c.Durability = DurabilityNone
	case DurabilityNone, DurabilityReplicas, DurabilityAOF:
	default:
		return fmt.Errorf("redisstore: Config.Durability %q is not one of %q, %q, %q", c.Durability, DurabilityNone, DurabilityReplicas, DurabilityAOF)
	}
	if c.Durability == DurabilityNone {
		if c.DurableReplicas != 0 || c.DurableTimeout != 0 {
			return fmt.Errorf("redisstore: Config.DurableReplicas and DurableTimeout need Config.Durability %q or %q", DurabilityReplicas, DurabilityAOF)
		}
		return nil
	}
	switch c.Client.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		return fmt.Errorf("redisstore: Config.Durability %q needs a *redis.Client (one server, or redis.NewFailoverClient for Sentinel) "+
			"or a *redis.ClusterClient, not a %T: the WAIT must run on the primary that applied the write, which only those let the store reach",
			c.Durability, c.Client)
	}
	if c.DurableReplicas == 0 && c.Durability == DurabilityReplicas {
		c.DurableReplicas = 1
	}
	if c.DurableReplicas < 0 || (c.DurableReplicas == 0 && c.Durability == DurabilityReplicas) {
		return fmt.Errorf("redisstore: Config.DurableReplicas must be at least 1 (0 with %q: the primary's own fsync only), got %d", DurabilityAOF, c.DurableReplicas)
	}
	if c.DurableTimeout == 0 {
		c.DurableTimeout = c.CommandTimeout / 2
	}
	if c.DurableTimeout < time.Millisecond || c.DurableTimeout >= c.CommandTimeout {
		return fmt.Errorf("redisstore: Config.DurableTimeout must be 1ms or more and less than Config.CommandTimeout (%v), so that the WAIT answers within the call, got %v",
			c.CommandTimeout, c.DurableTimeout)
	}
	return nil
}

// durability is the store's durability setting, resolved.
type durability struct {
	mode     Durability
	replicas int
	timeout  time.Duration
	channel  string
}

// covers reports whether a call of the script op waits.
func (d durability) covers(op string) bool { return d.mode != DurabilityNone && durableOp(op) }

// runDurable is run followed by the durability wait (confirmDurable). A
// script error is returned as it is; a wait that falls short is a
// *DurabilityError; a wait that could not run is an error that matches
// ErrNotDurable. The caller classifies all of them the same way
// (classify: Indeterminate, Unavailable for INSPECT).
//
// Under a Cluster the primary of the record's slot is looked up before
// the script, from the client's view of the slots the script is routed
// by, so that the wait runs on the node the script went to: had the
// client been redirected (MOVED, ASK) to another node, the durability
// key's SET on this one is redirected too, and the call is Indeterminate.
func (s *Store) runDurable(ctx context.Context, sc script, key string, args ...any) (any, error) {
	w, err := s.durableTarget(ctx, key)
	if err != nil {
		return nil, err
	}
	v, err := s.run(ctx, sc, key, args...)
	if err != nil {
		return nil, err
	}
	if err := s.confirmDurable(ctx, w); err != nil {
		return nil, err
	}
	return v, nil
}

// durableWait is where confirmDurable waits: a node of a Cluster with
// the durability key of the record's slot, or (node nil) the store's
// *redis.Client.
type durableWait struct {
	node *redis.Client
	key  string
}

// durableTarget returns where the durability wait for the record key
// runs.
func (s *Store) durableTarget(ctx context.Context, key string) (durableWait, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return durableWait{}, nil
	}
	k := s.durableKey(key)
	node, err := cc.MasterForKey(ctx, k)
	if err != nil {
		return durableWait{}, fmt.Errorf("%w: find the Cluster primary of %s for the durability wait (%s): %w", ErrNotDurable, k, s.durable.mode, err)
	}
	return durableWait{node: node, key: k}, nil
}

// durableKey is the key a Cluster's durability wait writes: the
// durability channel's name and the record key's hash tag, so in the
// record's slot, "<namespace>:idem:durable:{<scopeDigest>}".
func (s *Store) durableKey(key string) string {
	tag := key
	if i := strings.LastIndexByte(key, '{'); i >= 0 {
		tag = key[i:]
	}
	return s.durable.channel + ":" + tag
}

// confirmDurable sends, in one pipeline so on one connection, a write
// that is propagated to the replicas and then WAIT (or WAITAOF): the
// connection's replication offset is then past the record's last write,
// whoever made it, and the wait covers it.
//
// On the store's *redis.Client (one server, Sentinel) that write is a
// PUBLISH. On a Cluster it is SET of w.key with PX 1, sent to w.node, the
// primary of the record's slot: a Cluster propagates PUBLISH (and
// SPUBLISH) over the cluster bus, not the replication stream, so they do
// not move the offset WAIT waits for, and go-redis sends a keyless WAIT
// to any node. SET with an expiry is always a change of the dataset, so
// always propagated (Redis 7 propagates it with the absolute time,
// PXAT), and leaves nothing behind. If the slot is no longer that node's
// (a failover, a migration), the SET is answered MOVED or ASK and the
// wait proves nothing about the record: that, and any other error of
// the pipeline, is an error matching ErrNotDurable, as a wait that falls
// short.
func (s *Store) confirmDurable(ctx context.Context, w durableWait) error {
	d := s.durable
	var pipe func(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)
	where := "the configured server"
	if w.node != nil {
		pipe, where = w.node.Pipelined, w.node.Options().Addr
	} else {
		pipe = s.client.Pipelined
		if c, ok := s.client.(*redis.Client); ok {
			where = c.Options().Addr
		}
	}
	var wait *redis.Cmd
	_, err := pipe(ctx, func(p redis.Pipeliner) error {
		if w.node != nil {
			p.Set(ctx, w.key, "", time.Millisecond)
		} else {
			p.Publish(ctx, d.channel, "")
		}
		if d.mode == DurabilityAOF {
			wait = p.Do(ctx, "waitaof", 1, d.replicas, d.timeout.Milliseconds())
		} else {
			wait = p.Do(ctx, "wait", d.replicas, d.timeout.Milliseconds())
		}
		return nil
	})
	if err != nil {
		hint := ""
		if w.node != nil && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
			hint = " (the record's slot is no longer that node's, moved by a failover or a migration: the wait proves nothing about the write, which a failover may have lost)"
		}
		return fmt.Errorf("%w: the durability wait (Config.Durability %q) on %s failed%s, so the call's outcome is unknown until inspected: %w",
			ErrNotDurable, d.mode, where, hint, err)
	}
	local, got, err := waitReply(d.mode, wait.Val())
	if err != nil {
		return err
	}
	if got < d.replicas || !local {
		return &DurabilityError{Durability: d.mode, Want: d.replicas, Got: got, Local: local, Timeout: d.timeout}
	}
	return nil
}

// waitReply decodes WAIT's reply (the number of replicas) or WAITAOF's
// (the local fsync count, 0 or 1, and the number of replicas).
func waitReply(mode Durability, v any) (local bool, replicas int, err error) {
	if mode != DurabilityAOF {
		n, ok := v.(int64)
		if !ok {
			return false, 0, fmt.Errorf("redisstore: WAIT answered %v (%T), want an integer", v, v)
		}
		return true, int(n), nil
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return false, 0, fmt.Errorf("redisstore: WAITAOF answered %v, want two integers", v)
	}
	l, ok1 := a[0].(int64)
	r, ok2 := a[1].(int64)
	if !ok1 || !ok2 {
		return false, 0, fmt.Errorf("redisstore: WAITAOF answered %v, want two integers", v)
	}
	return l >= 1, int(r), nil
}

// waitAOFSupported reports whether a server of that redis_version (from
// INFO server) knows WAITAOF: Redis 7.2 and newer.
func waitAOFSupported(version string) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return major > 7 || (major == 7 && minor >= 2)
}

// ErrPersistence: the server's persistence settings can lose a write the
// store acknowledged (CheckPersistence).
var ErrPersistence = errors.New("redisstore: Redis may lose acknowledged idempotency records")

// Persistence is what CheckPersistence read from one server.
type Persistence struct {
	Addr               string // the server, as the client names it
	Version            string // redis_version
	AppendOnly         bool   // appendonly
	AppendFsync        string // appendfsync: "always", "everysec" or "no"
	MinReplicasToWrite int    // min-replicas-to-write
	ConnectedReplicas  int    // connected_slaves (INFO replication)
}

// PersistenceError reports settings of a server that can lose a write the
// store acknowledged, one sentence per problem, each saying what to
// change. It matches ErrPersistence.
type PersistenceError struct {
	Persistence
	Problems []string
}

func (e *PersistenceError) Error() string {
	return fmt.Sprintf("redisstore: Redis at %s may lose acknowledged idempotency records, and a lost record lets an effect run again: %s",
		e.Addr, strings.Join(e.Problems, "; "))
}

// Is reports whether target is ErrPersistence.
func (e *PersistenceError) Is(target error) bool { return target == ErrPersistence }

// CheckPersistence reads the persistence settings of the server (of every
// master of a Cluster) with CONFIG GET and INFO, and returns a
// *PersistenceError when they can lose an acknowledged write under the
// store's Config.Durability:
//
//   - appendonly no: a restart loses what the last RDB snapshot lacks (and a
//     primary restarted before its replicas are promoted makes them forget it
//     too);
//   - appendfsync other than always: a crash of the host loses up to a second
//     of writes (everysec) or more (no), unless the replicas are waited for;
//   - under DurabilityReplicas or DurabilityAOF, fewer connected replicas than
//     Config.DurableReplicas: every durable write would fail;
//   - under DurabilityAOF, a server before Redis 7.2, which has no WAITAOF.
//
// min-replicas-to-write below Config.DurableReplicas is not a problem (the
// WAIT catches it) but is reported in the Persistence. Other errors mean the
// settings could not be read (CONFIG may be disabled on managed services):
// check them by other means then. Like CheckEvictionPolicy, it decides
// nothing: the caller refuses to start or warns (TestCheckPersistence).
func (s *Store) CheckPersistence(ctx context.Context) ([]Persistence, error) {
	var found []Persistence
	var problems []error
	check := func(ctx context.Context, c redis.UniversalClient, addr string) error {
		p, err := readPersistence(ctx, c, addr)
		if err != nil {
			return err
		}
		found = append(found, p)
		if probs := s.persistenceProblems(p); len(probs) > 0 {
			problems = append(problems, &PersistenceError{Persistence: p, Problems: probs})
		}
		return nil
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		var mu sync.Mutex // ForEachMaster calls in parallel
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return check(ctx, c, c.Options().Addr)
		})
	} else {
		addr := "the configured server"
		if c, ok := s.client.(*redis.Client); ok {
			addr = c.Options().Addr
		}
		err = check(ctx, s.client, addr)
	}
	if err != nil {
		return found, err
	}
	return found, errors.Join(problems...)
}

// readPersistence reads one server's settings.
func readPersistence(ctx context.Context, c redis.UniversalClient, addr string) (Persistence, error) {
	p := Persistence{Addr: addr}
	cfg := map[string]string{}
	for _, name := range []string{"appendonly", "appendfsync", "min-replicas-to-write"} {
		v, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return p, fmt.Errorf("redisstore: read the persistence settings of %s (CONFIG GET; it may be disabled on a managed service: check appendonly, appendfsync and min-replicas-to-write there): %w", addr, err)
		}
		if cfg[name] = v[name]; v[name] == "" {
			return p, fmt.Errorf("redisstore: read the persistence settings of %s: %s is not in CONFIG GET's reply", addr, name)
		}
	}
	var err error
	p.AppendOnly = cfg["appendonly"] == "yes"
	p.AppendFsync = cfg["appendfsync"]
	if p.MinReplicasToWrite, err = strconv.Atoi(cfg["min-replicas-to-write"]); err != nil {
		return p, fmt.Errorf("redisstore: read the persistence settings of %s: min-replicas-to-write %q: %w", addr, cfg["min-replicas-to-write"], err)
	}
	info, err := c.Info(ctx, "server", "replication").Result()
	if err != nil {
		return p, fmt.Errorf("redisstore: read INFO server and replication of %s: %w", addr, err)
	}
	fields := infoFields(info)
	p.Version = fields["redis_version"]
	if p.ConnectedReplicas, err = strconv.Atoi(fields["connected_slaves"]); err != nil {
		return p, fmt.Errorf("redisstore: read INFO replication of %s: connected_slaves %q: %w", addr, fields["connected_slaves"], err)
	}
	return p, nil
}

// infoFields parses INFO's "name:value" lines.
func infoFields(info string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

// persistenceProblems lists what in p can lose an acknowledged write under
// the store's durability.
func (s *Store) persistenceProblems(p Persistence) []string {
	var probs []string
	d := s.durable
	if !p.AppendOnly {
		probs = append(probs, "appendonly is no, so a restart loses every record written since the last snapshot: set appendonly yes (CONFIG SET appendonly yes, and in redis.conf)")
	} else if p.AppendFsync != "always" && d.mode == DurabilityNone {
		probs = append(probs, fmt.Sprintf("appendfsync is %s, so a crash of the host loses the writes not yet fsynced (about a second with everysec): "+
			"set appendfsync always, or wait for replicas (Config.Durability %q)", p.AppendFsync, DurabilityReplicas))
	}
	if d.mode != DurabilityNone && p.ConnectedReplicas < d.replicas {
		probs = append(probs, fmt.Sprintf("%d replicas are connected and Config.DurableReplicas is %d, so every durable write would fail: start the replicas or lower DurableReplicas",
			p.ConnectedReplicas, d.replicas))
	}
	if d.mode == DurabilityAOF && !waitAOFSupported(p.Version) {
		probs = append(probs, fmt.Sprintf("Redis %s has no WAITAOF (Redis 7.2 and newer do): upgrade, or use Config.Durability %q", p.Version, DurabilityReplicas))
	}
	return probs
}
