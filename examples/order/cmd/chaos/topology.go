package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/harness/redistopo"
)

// The -redis topologies.
const (
	topoStandalone = "standalone"
	topoSentinel   = "sentinel"
	topoCluster    = "cluster"
)

// redisBackend is the Redis the workers share: one server, a Sentinel
// topology or a Cluster.
type redisBackend interface {
	// url is the workers' -redis-url.
	url() string
	// describe names the topology for the log and the summary.
	describe() string
	// client is a client for the checks (Inspect of the charge records).
	client() redis.UniversalClient
	// durableReplicas is what -redis-durability replicas waits for: every
	// replica of the primary that holds a record.
	durableReplicas() int
	// restore ends the faults: every node up and healthy (unpaused, killed
	// nodes started again and synced).
	restore(ctx context.Context) error
	// kill stops every process.
	kill()
}

// url, describe, client, durableReplicas and restore make a redisServer a
// redisBackend.
func (r *redisServer) describe() string { return "standalone " + r.addr() }

func (r *redisServer) client() redis.UniversalClient {
	return redis.NewClient(&redis.Options{Addr: r.addr()})
}

func (r *redisServer) durableReplicas() int { return 0 }

func (r *redisServer) restore(ctx context.Context) error {
	if err := r.start(ctx); err != nil {
		return fmt.Errorf("start Redis: %w", err)
	}
	return r.unpause(ctx)
}

// sentinelRedis is a primary with two replicas watched by three Sentinels
// (package redistopo).
type sentinelRedis struct {
	t   *redistopo.Sentinel
	log *slog.Logger
	mu  sync.Mutex // one fault at a time
}

// clusterRedis is a Cluster of three primaries with a replica each.
type clusterRedis struct {
	t   *redistopo.Cluster
	log *slog.Logger
	mu  sync.Mutex
}

// startBackend starts -redis with its data under dir.
func startBackend(ctx context.Context, cfg config, c *cluster, dir string) (redisBackend, error) {
	switch cfg.redis {
	case topoSentinel:
		t, err := redistopo.NewSentinel(ctx, dir, 2, 3)
		if err != nil {
			return nil, fmt.Errorf("start the Sentinel topology: %w", err)
		}
		return &sentinelRedis{t: t, log: c.log}, nil
	case topoCluster:
		t, err := redistopo.NewCluster(ctx, dir, 3, 1)
		if err != nil {
			return nil, fmt.Errorf("start the Cluster: %w", err)
		}
		return &clusterRedis{t: t, log: c.log}, nil
	}
	return startRedis(ctx, c.spawn, dir, filepath.Join(c.out, "redis.log"))
}

func (s *sentinelRedis) url() string {
	addrs := s.t.SentinelAddrs()
	q := url.Values{"master_name": {s.t.MasterName}}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	return "redis+sentinel://" + addrs[0] + "?" + q.Encode()
}

func (s *sentinelRedis) describe() string {
	return fmt.Sprintf("Sentinel: a primary, %d replicas, %d Sentinels", len(s.t.Servers)-1, len(s.t.Sentinels))
}

func (s *sentinelRedis) client() redis.UniversalClient {
	return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.t.MasterName, SentinelAddrs: s.t.SentinelAddrs()})
}

func (s *sentinelRedis) durableReplicas() int { return len(s.t.Servers) - 1 }

func (s *sentinelRedis) kill() { s.t.Close() }

// failover is SENTINEL FAILOVER, waited for.
func (s *sentinelRedis) failover(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Failover(ctx)
}

// killPrimary kills the primary with SIGKILL, waits until the Sentinels
// promote a replica, and starts the killed server again (empty: the
// Sentinels make it a replica of the new primary). It returns the old and
// the new primary.
func (s *sentinelRedis) killPrimary(ctx context.Context) (old, primary string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, err = s.t.Primary(ctx); err != nil {
		return "", "", err
	}
	n := s.t.Node(old)
	if n == nil {
		return "", "", fmt.Errorf("the Sentinels name %s the primary, which is none of the servers", old)
	}
	n.Kill()
	if primary, err = s.t.WaitNewPrimary(ctx, old); err != nil {
		return old, "", err
	}
	if err := n.Restart(); err != nil {
		return old, primary, fmt.Errorf("start the old primary %s again: %w", old, err)
	}
	return old, primary, nil
}

// restore starts every killed server again and waits until the Sentinels
// name a primary that answers as one.
func (s *sentinelRedis) restore(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, n := range append(append([]*redistopo.Node{}, s.t.Servers...), s.t.Sentinels...) {
		if n.PID() == 0 {
			errs = append(errs, n.Restart())
		}
	}
	if _, err := s.t.WaitNewPrimary(ctx, ""); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *clusterRedis) url() string {
	addrs := c.t.Addrs()
	q := url.Values{}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	return "redis+cluster://" + addrs[0] + "?" + q.Encode()
}

func (c *clusterRedis) describe() string {
	return fmt.Sprintf("Cluster: %d nodes, 3 primaries with a replica each", len(c.t.Nodes))
}

func (c *clusterRedis) client() redis.UniversalClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.t.Addrs()})
}

func (c *clusterRedis) durableReplicas() int { return 1 }

func (c *clusterRedis) kill() { c.t.Close() }

// restore starts every killed node again and waits until every node
// reports cluster_state:ok.
func (c *clusterRedis) restore(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, n := range c.t.Nodes {
		if n.PID() == 0 {
			errs = append(errs, n.Restart())
		}
	}
	return errors.Join(append(errs, c.t.WaitOK(ctx))...)
}

// sentinelOf and clusterOf are the backends of the topology phases, which
// -phases offers only under their -redis.
func sentinelOf(in *injector) *sentinelRedis { return in.c.redis.(*sentinelRedis) }

func clusterOf(in *injector) *clusterRedis { return in.c.redis.(*clusterRedis) }

// withReplica picks a random primary and its connected replica.
func (c *clusterRedis) withReplica(ctx context.Context, rng *rand.Rand) (primary, replica string, err error) {
	primaries, err := c.t.Primaries(ctx)
	if err != nil {
		return "", "", err
	}
	primary = primaries[rng.IntN(len(primaries))]
	replica, err = c.t.ReplicaOf(ctx, primary)
	return primary, replica, err
}

// failover sends CLUSTER FAILOVER to the replica of a random primary and
// waits until it is a primary and the Cluster is ok. It returns the old and
// the new primary.
func (c *clusterRedis) failover(ctx context.Context, rng *rand.Rand) (old, primary string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, primary, err = c.withReplica(ctx, rng); err != nil {
		return "", "", err
	}
	return old, primary, c.t.Failover(ctx, primary)
}

// killPrimary kills a random primary with SIGKILL, waits until its replica
// takes over, and starts the killed node again (empty; it rejoins as the
// new primary's replica) and waits until it has synced.
func (c *clusterRedis) killPrimary(ctx context.Context, rng *rand.Rand) (old, primary string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	primaries, err := c.t.Primaries(ctx)
	if err != nil {
		return "", "", err
	}
	old = primaries[rng.IntN(len(primaries))]
	if primary, err = c.t.KillPrimary(ctx, old); err != nil {
		return old, "", err
	}
	if err := c.t.NodeAt(old).Restart(); err != nil {
		return old, primary, fmt.Errorf("start the killed primary %s again: %w", old, err)
	}
	if _, err := c.t.ReplicaOf(ctx, primary); err != nil {
		return old, primary, err
	}
	return old, primary, c.t.WaitOK(ctx)
}

// reshard moves n slots from one random primary to another with
// redis-cli --cluster reshard.
func (c *clusterRedis) reshard(ctx context.Context, rng *rand.Rand, n int) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	primaries, err := c.t.Primaries(ctx)
	if err != nil {
		return "", err
	}
	if len(primaries) < 2 {
		return "", errors.New("fewer than two primaries")
	}
	i := rng.IntN(len(primaries))
	from, to := primaries[i], primaries[(i+1+rng.IntN(len(primaries)-1))%len(primaries)]
	fromID, err := c.t.NodeID(ctx, from)
	if err != nil {
		return "", err
	}
	toID, err := c.t.NodeID(ctx, to)
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "reshard", to, "--cluster-from", fromID, "--cluster-to", toID,
		"--cluster-slots", strconv.Itoa(n), "--cluster-yes").CombinedOutput()
	if err != nil {
		if len(out) > 1500 {
			out = out[len(out)-1500:]
		}
		return "", fmt.Errorf("redis-cli --cluster reshard: %w: %s", err, out)
	}
	return fmt.Sprintf("%d from %s to %s", n, from, to), c.t.WaitOK(ctx)
}
