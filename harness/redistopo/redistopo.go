// Package redistopo starts the Redis topologies production runs, on
// loopback free ports: a primary with replicas watched by Sentinels
// (NewSentinel), and a Cluster of primaries with replicas (NewCluster),
// for the tests (StartSentinel and StartCluster: in the test's temporary
// directory, stopped by its Cleanup) and the chaos command. Every process
// is a child that dies with its parent (package redisproc), and every wait
// is bounded.
package redistopo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/harness/redisproc"
)

// StartTimeout bounds each wait of a topology's startup and of Failover.
const StartTimeout = 30 * time.Second

// ErrNotInstalled: redis-server (or, for a Cluster, redis-cli) is not on
// PATH.
var ErrNotInstalled = errors.New("redistopo: redis-server and redis-cli are not on PATH (install Debian's redis-server and redis-tools)")

// Node is one redis-server process (a server or a Sentinel).
type Node struct {
	// Addr is "127.0.0.1:port".
	Addr string
	srv  *redisproc.Server
}

// PID is the process' ID, 0 while it is killed.
func (n *Node) PID() int { return n.srv.PID() }

// Kill stops the process with SIGKILL and waits for it to exit.
func (n *Node) Kill() { n.srv.Kill() }

// Restart starts a killed process again on its port with its arguments
// and directory (a data server keeps nothing on disk, so it starts empty;
// a Cluster node keeps its nodes.conf and rejoins), and waits until it
// answers PING.
func (n *Node) Restart() error { return n.srv.Restart() }

// procs starts the nodes of one topology.
type procs struct {
	root  string
	nodes []*Node
}

func newProcs(dir string) (*procs, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNotInstalled
	}
	return &procs{root: dir}, nil
}

// close kills every node; their directories are the caller's.
func (p *procs) close() {
	for _, n := range p.nodes {
		n.srv.Close()
	}
}

// start launches redis-server on port with args, in a directory of its
// own, with a config file when conf is not empty (a Sentinel needs one it
// can rewrite).
func (p *procs) start(port int, conf string, args ...string) (*Node, error) {
	srv, err := redisproc.StartArgs(filepath.Join(p.root, strconv.Itoa(port)), port, conf, args...)
	if err != nil {
		return nil, fmt.Errorf("redistopo: %w", err)
	}
	n := &Node{Addr: srv.Addr(), srv: srv}
	p.nodes = append(p.nodes, n)
	return n, nil
}

// server starts a data server (no persistence, syncs without delay).
func (p *procs) server(args ...string) (*Node, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return p.start(port, "", append([]string{"--repl-diskless-sync-delay", "0"}, args...)...)
}

// waitFor calls try until it returns nil, for at most StartTimeout
// (poll, failover.go).
func waitFor(ctx context.Context, what string, try func(ctx context.Context) error) error {
	return poll(ctx, what, try)
}

// waitSynced waits until the replica at addr has its link to its primary up.
func waitSynced(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	return waitFor(ctx, "the replica "+addr+" to sync", func(ctx context.Context) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("master_link_status is not up")
		}
		return nil
	})
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistopo: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// must is a testing wrapper's end: it skips tb when Redis is not
// installed, fails it on another error, and closes the topology when the
// test ends.
func must[T interface{ Close() }](tb testing.TB, v T, err error) T {
	tb.Helper()
	if errors.Is(err, ErrNotInstalled) || errors.Is(err, redisproc.ErrNotInstalled) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(v.Close)
	return v
}

// Sentinel is a primary, its replicas and the Sentinels that watch them.
type Sentinel struct {
	// MasterName is the name the Sentinels monitor the primary by.
	MasterName string
	// Servers are the data servers: Servers[0] was the primary at start.
	Servers   []*Node
	Sentinels []*Node
	p         *procs
}

// NewSentinel starts, with the nodes' directories under dir, a primary
// with replicas replicas and sentinels Sentinels (quorum: a majority of
// them), and waits until the replicas have synced and every Sentinel knows
// every replica. On an error it stops what it started.
func NewSentinel(ctx context.Context, dir string, replicas, sentinels int) (_ *Sentinel, err error) {
	p, err := newProcs(dir)
	if err != nil {
		return nil, err
	}
	s := &Sentinel{MasterName: "onceflow", p: p}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	primary, err := p.server()
	if err != nil {
		return nil, err
	}
	s.Servers = append(s.Servers, primary)
	host, port, _ := net.SplitHostPort(primary.Addr)
	for range replicas {
		r, err := p.server("--replicaof", host, port)
		if err != nil {
			return nil, err
		}
		s.Servers = append(s.Servers, r)
	}
	for _, r := range s.Servers[1:] {
		if err := waitSynced(ctx, r.Addr); err != nil {
			return nil, err
		}
	}
	conf := fmt.Sprintf("sentinel monitor %s %s %s %d\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 10000\n"+
		"sentinel parallel-syncs %[1]s 2\n", s.MasterName, host, port, sentinels/2+1)
	for range sentinels {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		sn, err := p.start(port, conf, "--sentinel")
		if err != nil {
			return nil, err
		}
		s.Sentinels = append(s.Sentinels, sn)
	}
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr})
		err := waitFor(ctx, "the Sentinel "+sn.Addr+" to know the replicas", func(ctx context.Context) error {
			rs, err := c.Replicas(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			if len(rs) != replicas {
				return fmt.Errorf("%d replicas known, want %d", len(rs), replicas)
			}
			return nil
		})
		_ = c.Close()
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// StartSentinel is NewSentinel for a test: in a temporary directory,
// stopped when the test ends; it skips the test when redis-server is not
// installed.
func StartSentinel(tb testing.TB, replicas, sentinels int) *Sentinel {
	tb.Helper()
	s, err := NewSentinel(context.Background(), tb.TempDir(), replicas, sentinels)
	return must(tb, s, err)
}

// Close kills every process of the topology.
func (s *Sentinel) Close() { s.p.close() }

// SentinelAddrs are the Sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	var a []string
	for _, n := range s.Sentinels {
		a = append(a, n.Addr)
	}
	return a
}

// Client returns a failover client (redis.NewFailoverClient) with the
// options the store expects, closed when the test ends.
func (s *Sentinel) Client(tb testing.TB) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs(),
		ContextTimeoutEnabled: true})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Primary asks the first live Sentinel for the primary's address.
func (s *Sentinel) Primary(ctx context.Context) (string, error) {
	var errs []error
	for _, n := range s.Sentinels {
		if n.PID() == 0 {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: n.Addr})
		a, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
		_ = c.Close()
		if err == nil && len(a) == 2 {
			return net.JoinHostPort(a[0], a[1]), nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("redistopo: no Sentinel names the primary: %w", errors.Join(errs...))
}

// Node returns the data server at addr, nil if none.
func (s *Sentinel) Node(addr string) *Node {
	for _, n := range s.Servers {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// Failover forces a failover with SENTINEL FAILOVER (retried while the
// Sentinel answers that no replica is ready yet) and waits until the
// Sentinels name another primary and it answers as one. It returns the
// new primary's address.
func (s *Sentinel) Failover(ctx context.Context) (string, error) {
	old, err := s.Primary(ctx)
	if err != nil {
		return "", err
	}
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr})
	defer c.Close()
	deadline := time.Now().Add(StartTimeout)
	for {
		err := c.Failover(ctx, s.MasterName).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("redistopo: SENTINEL FAILOVER: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s.WaitNewPrimary(ctx, old)
}

// WaitNewPrimary waits until the Sentinels name a primary other than old
// and it answers ROLE as a master.
func (s *Sentinel) WaitNewPrimary(ctx context.Context, old string) (string, error) {
	deadline := time.Now().Add(StartTimeout)
	for {
		addr, err := s.Primary(ctx)
		if err == nil && addr != old {
			c := redis.NewClient(&redis.Options{Addr: addr})
			role, rerr := c.Do(ctx, "ROLE").Slice()
			_ = c.Close()
			if rerr == nil && len(role) > 0 && role[0] == "master" {
				return addr, nil
			}
			err = fmt.Errorf("new primary %s: ROLE %v %v", addr, role, rerr)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("redistopo: no new primary after %v: %v", StartTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Cluster is a Redis Cluster of primaries, each with its replicas.
type Cluster struct {
	Nodes []*Node
	p     *procs
}

// NewCluster starts, with the nodes' directories under dir,
// primaries*(1+replicas) cluster-enabled servers, joins them with
// redis-cli --cluster create (which spreads the 16384 slots over the
// primaries and assigns the replicas), and waits until every node reports
// cluster_state:ok. On an error it stops what it started.
func NewCluster(ctx context.Context, dir string, primaries, replicas int) (_ *Cluster, err error) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, ErrNotInstalled
	}
	p, err := newProcs(dir)
	if err != nil {
		return nil, err
	}
	cl := &Cluster{p: p}
	defer func() {
		if err != nil {
			cl.Close()
		}
	}()
	for range primaries * (1 + replicas) {
		bus, err := freePort()
		if err != nil {
			return nil, err
		}
		n, err := p.server("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(bus))
		if err != nil {
			return nil, err
		}
		cl.Nodes = append(cl.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, cl.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redistopo: redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := cl.WaitOK(ctx); err != nil {
		return nil, err
	}
	return cl, nil
}

// StartCluster is NewCluster for a test: in a temporary directory,
// stopped when the test ends; it skips the test when redis-server or
// redis-cli is not installed.
func StartCluster(tb testing.TB, primaries, replicas int) *Cluster {
	tb.Helper()
	c, err := NewCluster(context.Background(), tb.TempDir(), primaries, replicas)
	return must(tb, c, err)
}

// Close kills every node of the cluster.
func (c *Cluster) Close() { c.p.close() }

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// Client returns a cluster client with the options the store expects,
// closed when the test ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}
