package redistopo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The failovers of a Cluster's shard, for the tests and the chaos command: find a primary's
// replica (ReplicaOf), fail over to it by CLUSTER FAILOVER (Failover) or
// by killing the primary (KillPrimary), and wait for the cluster to be ok
// again (WaitOK) and the replicas synced (WaitSynced). Each method asks
// the live nodes themselves (ROLE, CLUSTER NODES, CLUSTER INFO), polls
// until its condition holds, and gives up with an error after
// StartTimeout or when ctx ends.

// NodeAt returns the cluster's node at addr, nil if none.
func (c *Cluster) NodeAt(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// NodeID returns the Cluster node ID of the node at addr (the "myself"
// line of its CLUSTER NODES), for redis-cli --cluster reshard.
func (c *Cluster) NodeID(ctx context.Context, addr string) (string, error) {
	self, err := myself(ctx, addr)
	if err != nil {
		return "", err
	}
	return self[0], nil
}

// live are the nodes not killed.
func (c *Cluster) live() []*Node {
	var ns []*Node
	for _, n := range c.Nodes {
		if n.PID() != 0 {
			ns = append(ns, n)
		}
	}
	return ns
}

// Primaries returns the addresses of the live nodes that are primaries
// serving slots, as each of them says of itself (CLUSTER NODES, its
// "myself" line), in the order of Nodes.
func (c *Cluster) Primaries(ctx context.Context) ([]string, error) {
	var addrs []string
	for _, n := range c.live() {
		self, err := myself(ctx, n.Addr)
		if err != nil {
			return nil, err
		}
		// id addr flags master ping pong epoch link slot...
		if len(self) > 8 && strings.Contains(self[2], "master") {
			addrs = append(addrs, n.Addr)
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("redistopo: no live node is a primary serving slots")
	}
	return addrs, nil
}

// ReplicaOf waits until a live node is a replica of primary with its link
// up (ROLE: slave, connected) and returns its address.
func (c *Cluster) ReplicaOf(ctx context.Context, primary string) (string, error) {
	var found string
	err := poll(ctx, "a replica of "+primary+" with its link up", func(ctx context.Context) error {
		for _, n := range c.live() {
			r, err := roleOf(ctx, n.Addr)
			if err != nil {
				continue
			}
			if r.replicaOf == primary && r.linkUp {
				found = n.Addr
				return nil
			}
		}
		return fmt.Errorf("no live node is a connected replica of %s", primary)
	})
	return found, err
}

// WaitSynced waits until every live replica has its link to its primary
// up (ROLE: connected), so that a WAIT on any primary can count it.
func (c *Cluster) WaitSynced(ctx context.Context) error {
	return poll(ctx, "every replica to sync", func(ctx context.Context) error {
		for _, n := range c.live() {
			r, err := roleOf(ctx, n.Addr)
			if err != nil {
				return err
			}
			if !r.primary && !r.linkUp {
				return fmt.Errorf("the replica %s of %s is not connected", n.Addr, r.replicaOf)
			}
		}
		return nil
	})
}

// WaitOK waits until every live node reports cluster_state:ok.
func (c *Cluster) WaitOK(ctx context.Context) error {
	return poll(ctx, "cluster_state:ok on every live node", func(ctx context.Context) error {
		for _, n := range c.live() {
			cl := nodeClient(n.Addr)
			info, err := cl.ClusterInfo(ctx).Result()
			_ = cl.Close()
			if err != nil {
				return fmt.Errorf("CLUSTER INFO of %s: %w", n.Addr, err)
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster_state is not ok", n.Addr)
			}
		}
		return nil
	})
}

// Failover sends CLUSTER FAILOVER to replica (a manual failover: its
// primary stops its clients until the replica has caught up with it, then
// the replica takes over its slots) and waits until the replica answers
// ROLE as a primary and the cluster is ok. CLUSTER FAILOVER is sent again
// when a manual failover timed out (Redis gives one 5 s) without a
// promotion.
func (c *Cluster) Failover(ctx context.Context, replica string) error {
	deadline := time.Now().Add(StartTimeout)
	cl := nodeClient(replica)
	defer cl.Close()
	for {
		err := cl.ClusterFailover(ctx).Err()
		if err == nil {
			err = pollFor(ctx, 6*time.Second, "the replica "+replica+" to be promoted", func(ctx context.Context) error {
				return isPrimary(ctx, replica)
			})
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("redistopo: CLUSTER FAILOVER to %s: %w", replica, err)
		}
	}
	return c.WaitOK(ctx)
}

// KillPrimary finds a connected replica of primary, kills the primary
// (SIGKILL) and waits until the cluster promotes that replica (after
// cluster-node-timeout, 2 s here, and the replica's election delay) and
// is ok again. It returns the promoted replica's address.
func (c *Cluster) KillPrimary(ctx context.Context, primary string) (string, error) {
	n := c.NodeAt(primary)
	if n == nil || n.PID() == 0 {
		return "", fmt.Errorf("redistopo: %s is not a live node of the cluster", primary)
	}
	replica, err := c.ReplicaOf(ctx, primary)
	if err != nil {
		return "", err
	}
	n.Kill()
	if err := poll(ctx, "the replica "+replica+" to be promoted", func(ctx context.Context) error {
		return isPrimary(ctx, replica)
	}); err != nil {
		return "", err
	}
	return replica, c.WaitOK(ctx)
}

// role is what ROLE says of a node.
type role struct {
	primary   bool
	replicaOf string // a replica's primary, "host:port"
	linkUp    bool   // a replica's link to its primary is connected
}

func roleOf(ctx context.Context, addr string) (role, error) {
	cl := nodeClient(addr)
	defer cl.Close()
	v, err := cl.Do(ctx, "ROLE").Slice()
	if err != nil {
		return role{}, fmt.Errorf("ROLE of %s: %w", addr, err)
	}
	if len(v) > 0 && v[0] == "master" {
		return role{primary: true}, nil
	}
	// slave, host, port, state, offset
	if len(v) < 4 || v[0] != "slave" {
		return role{}, fmt.Errorf("ROLE of %s: unexpected reply %v", addr, v)
	}
	host, _ := v[1].(string)
	port, _ := v[2].(int64)
	state, _ := v[3].(string)
	return role{replicaOf: net.JoinHostPort(host, strconv.FormatInt(port, 10)), linkUp: state == "connected"}, nil
}

// isPrimary is nil when the node at addr answers ROLE as a primary.
func isPrimary(ctx context.Context, addr string) error {
	r, err := roleOf(ctx, addr)
	if err != nil {
		return err
	}
	if !r.primary {
		return fmt.Errorf("%s is still a replica of %s", addr, r.replicaOf)
	}
	return nil
}

// myself returns the fields of the "myself" line of the node's CLUSTER
// NODES.
func myself(ctx context.Context, addr string) ([]string, error) {
	cl := nodeClient(addr)
	defer cl.Close()
	nodes, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redistopo: CLUSTER NODES of %s: %w", addr, err)
	}
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && strings.Contains(f[2], "myself") {
			return f, nil
		}
	}
	return nil, fmt.Errorf("redistopo: CLUSTER NODES of %s has no myself line", addr)
}

// nodeClient is a client of one node that does not retry, for one query.
func nodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
}

// poll is pollFor with StartTimeout.
func poll(ctx context.Context, what string, try func(ctx context.Context) error) error {
	return pollFor(ctx, StartTimeout, what, try)
}

// pollFor calls try, each call bounded by a second, until it returns nil;
// it gives up after d or when ctx ends, with try's last error.
func pollFor(ctx context.Context, d time.Duration, what string, try func(ctx context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		err := try(tctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("redistopo: waited %v for %s: %w", d, what, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}
