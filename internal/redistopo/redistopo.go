// Package redistopo starts the Redis topologies production runs, on
// loopback free ports, for tests: a primary with replicas watched by
// Sentinels (StartSentinel), and a Cluster of primaries with replicas
// (StartCluster). Every process is a child that dies with the test binary
// (package childproc), every wait is bounded, and everything is stopped
// and removed by the test's Cleanup.
package redistopo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/internal/childproc"
)

// StartTimeout bounds each wait of a topology's startup and of Failover.
const StartTimeout = 30 * time.Second

// Node is one redis-server process (a server or a Sentinel).
type Node struct {
	// Addr is "127.0.0.1:port".
	Addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// PID is the process' ID, 0 once it was killed.
func (n *Node) PID() int {
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Kill stops the process with SIGKILL and waits for it to exit.
func (n *Node) Kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd = nil
}

// log returns the tail of the node's log, for a failure message.
func (n *Node) log() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// procs starts the nodes of one topology.
type procs struct {
	tb    testing.TB
	spawn *childproc.Spawner
	root  string
	nodes []*Node
}

func newProcs(tb testing.TB) *procs {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Skip("redistopo: redis-server is not on PATH")
	}
	p := &procs{tb: tb, spawn: childproc.New(), root: tb.TempDir()}
	tb.Cleanup(func() {
		for _, n := range p.nodes {
			n.Kill()
		}
		p.spawn.Close()
	})
	return p
}

// start launches redis-server with args after the common ones, in a
// directory of its own, with a config file when conf is not empty
// (a Sentinel needs one it can rewrite).
func (p *procs) start(port int, conf string, args ...string) *Node {
	p.tb.Helper()
	n := &Node{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: filepath.Join(p.root, strconv.Itoa(port))}
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		p.tb.Fatal(err)
	}
	var argv []string
	if conf != "" {
		file := filepath.Join(n.dir, "redis.conf")
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			p.tb.Fatal(err)
		}
		argv = append(argv, file)
	}
	argv = append(argv, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", n.dir, "--logfile", "redis.log",
		"--protected-mode", "no")
	argv = append(argv, args...)
	n.cmd = exec.Command("redis-server", argv...)
	if err := p.spawn.Start(n.cmd); err != nil {
		p.tb.Fatalf("redistopo: start redis-server: %v", err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(n.cmd, n.done)
	p.nodes = append(p.nodes, n)
	c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer c.Close()
	waitFor(p.tb, "redis-server on "+n.Addr+" to answer PING", func(ctx context.Context) error {
		select {
		case <-n.done:
			p.tb.Fatalf("redistopo: redis-server on %s exited: %s", n.Addr, n.log())
		default:
		}
		return c.Ping(ctx).Err()
	})
	return n
}

// server starts a data server (no persistence, syncs without delay).
func (p *procs) server(args ...string) *Node {
	p.tb.Helper()
	return p.start(freePort(p.tb), "", append([]string{"--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"}, args...)...)
}

// waitFor calls try until it returns nil, failing tb after StartTimeout.
func waitFor(tb testing.TB, what string, try func(ctx context.Context) error) {
	tb.Helper()
	deadline := time.Now().Add(StartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := try(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistopo: waited %v for %s: %v", StartTimeout, what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSynced waits until the replica at addr has its link to its primary up.
func waitSynced(tb testing.TB, addr string) {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	waitFor(tb, "the replica "+addr+" to sync", func(ctx context.Context) error {
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
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Sentinel is a primary, its replicas and the Sentinels that watch them.
type Sentinel struct {
	// MasterName is the name the Sentinels monitor the primary by.
	MasterName string
	// Servers are the data servers: Servers[0] was the primary at start.
	Servers   []*Node
	Sentinels []*Node
	tb        testing.TB
}

// StartSentinel starts a primary with replicas replicas and sentinels
// Sentinels (quorum: a majority of them), and waits until the replicas
// have synced and every Sentinel knows every replica.
func StartSentinel(tb testing.TB, replicas, sentinels int) *Sentinel {
	tb.Helper()
	p := newProcs(tb)
	s := &Sentinel{MasterName: "onceflow", tb: tb}
	primary := p.server()
	s.Servers = append(s.Servers, primary)
	host, port, _ := net.SplitHostPort(primary.Addr)
	for range replicas {
		s.Servers = append(s.Servers, p.server("--replicaof", host, port))
	}
	for _, r := range s.Servers[1:] {
		waitSynced(tb, r.Addr)
	}
	conf := fmt.Sprintf("sentinel monitor %s %s %s %d\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 10000\n"+
		"sentinel parallel-syncs %[1]s 2\n", s.MasterName, host, port, sentinels/2+1)
	for range sentinels {
		s.Sentinels = append(s.Sentinels, p.start(freePort(tb), conf, "--sentinel"))
	}
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr})
		waitFor(tb, "the Sentinel "+sn.Addr+" to know the replicas", func(ctx context.Context) error {
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
	}
	return s
}

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
		if n.cmd == nil {
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
	tb    testing.TB
}

// StartCluster starts primaries*(1+replicas) cluster-enabled servers,
// joins them with redis-cli --cluster create (which spreads the 16384
// slots over the primaries and assigns the replicas), and waits until
// every node reports cluster_state:ok.
func StartCluster(tb testing.TB, primaries, replicas int) *Cluster {
	tb.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		tb.Skip("redistopo: redis-cli is not on PATH")
	}
	p := newProcs(tb)
	cl := &Cluster{tb: tb}
	addrs := []string{}
	for range primaries * (1 + replicas) {
		n := p.server("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(freePort(tb)))
		cl.Nodes = append(cl.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistopo: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range cl.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		waitFor(tb, "the cluster node "+n.Addr+" to be ok", func(ctx context.Context) error {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return errors.New("cluster_state is not ok")
			}
			return nil
		})
		_ = c.Close()
	}
	return cl
}

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
