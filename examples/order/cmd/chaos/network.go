package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// The links of a worker that the network phases put faults on.
const (
	linkRedis    = "redis"
	linkTemporal = "temporal"
	linkPostgres = "postgres"
)

// network is toxiproxy, in this process, between each worker and Redis,
// Temporal and PostgreSQL (when the ledger is a server): one proxy per
// worker and link, each on a loopback port of its own, so a fault can
// take one worker's link and leave the others alone. The chaos run's own
// clients (the checker, the settle's operator commands) connect directly.
type network struct {
	srv   *toxiproxy.ApiServer
	links []map[string]*toxiproxy.Proxy // by worker, then link

	mu    sync.Mutex
	added []addedToxic // toxics in place, removed by clear
}

type addedToxic struct {
	p    *toxiproxy.Proxy
	name string
}

// startNetwork starts the proxies of n workers to the upstreams (link
// → host:port).
func startNetwork(n int, upstreams map[string]string) (*network, error) {
	nw := &network{srv: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())}
	for i := range n {
		links := map[string]*toxiproxy.Proxy{}
		for link, up := range upstreams {
			p := toxiproxy.NewProxy(nw.srv, fmt.Sprintf("worker-%d-%s", i, link), "127.0.0.1:0", up)
			if err := p.Start(); err != nil {
				nw.close()
				return nil, fmt.Errorf("start the toxiproxy of worker %d to %s (%s): %w", i, link, up, err)
			}
			links[link] = p
		}
		nw.links = append(nw.links, links)
	}
	return nw, nil
}

// addr is the address worker i reaches link at.
func (n *network) addr(i int, link string) string { return n.links[i][link].Listen }

// close stops every proxy.
func (n *network) close() {
	for _, links := range n.links {
		for _, p := range links {
			p.Stop()
		}
	}
}

// toxic adds a toxic to worker i's link: typ with attrs, on stream
// (upstream: toward the server; downstream: toward the worker).
func (n *network) toxic(i int, link, typ, stream string, attrs map[string]any) error {
	p := n.links[i][link]
	name := fmt.Sprintf("%s-%s", typ, stream)
	var b strings.Builder
	fmt.Fprintf(&b, `{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{`, name, typ, stream)
	first := true
	for k, v := range attrs {
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%q:%v", k, v)
	}
	b.WriteString("}}")
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(b.String())); err != nil {
		return fmt.Errorf("add the toxic %s to %s: %w", b.String(), p.Name, err)
	}
	n.mu.Lock()
	n.added = append(n.added, addedToxic{p: p, name: name})
	n.mu.Unlock()
	return nil
}

// clear removes every toxic in place (a timeout toxic closes the
// connections it held as it goes).
func (n *network) clear(ctx context.Context) {
	n.mu.Lock()
	added := n.added
	n.added = nil
	n.mu.Unlock()
	for _, a := range added {
		_ = a.p.Toxics.RemoveToxic(ctx, a.name)
	}
}

// hostPort is the host:port of a redis:// or postgres:// URL.
func hostPort(u string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" {
		return "", fmt.Errorf("no host:port in %q", u)
	}
	return parsed.Host, nil
}

// withHost is u with its host:port replaced.
func withHost(u, hostport string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Host = hostport
	return parsed.String()
}

// netFault injects a fault on the network every interval until end: on
// one random worker's links (one), or every worker's; each held for hold,
// then cleared.
func netFault(what string, interval, hold func(config) time.Duration, all bool, links []string, add func(n *network, worker int, link string) error) func(context.Context, *injector, time.Time) error {
	return func(ctx context.Context, in *injector, end time.Time) error {
		n := in.c.net
		return in.every(ctx, end, interval(in.c.cfg), func() error {
			workers := []int{in.rng.IntN(len(in.c.workers))}
			if all {
				workers = workers[:0]
				for i := range in.c.workers {
					workers = append(workers, i)
				}
			}
			for _, w := range workers {
				for _, link := range links {
					if _, ok := n.links[w][link]; !ok {
						continue // no PostgreSQL on a SQLite ledger
					}
					if err := add(n, w, link); err != nil {
						n.clear(ctx)
						return err
					}
				}
			}
			in.c.tl.inject(what)
			d := min(hold(in.c.cfg), time.Until(end))
			in.c.log.Info("chaos: "+what, "workers", workers, "links", links, "for", d.Round(time.Millisecond))
			sleepCtx(ctx, d)
			n.clear(context.WithoutCancel(ctx))
			return nil
		})
	}
}

var allLinks = []string{linkRedis, linkTemporal, linkPostgres}

func fixed(d time.Duration) func(config) time.Duration {
	return func(config) time.Duration { return d }
}

func perPhase(n int) func(config) time.Duration {
	return func(c config) time.Duration { return c.phaseDuration / time.Duration(n) }
}

func leases(f float64) func(config) time.Duration {
	return func(c config) time.Duration { return time.Duration(f * float64(c.lease)) }
}

// networkPhases are the phases on the toxiproxies: under -redis
// standalone only (a Sentinel or Cluster client learns the servers'
// own addresses, which would go around a proxy).
func networkPhases() []phase {
	return []phase{
		{name: "net-latency", what: "every link of every worker: 50ms ±50ms each way (toxiproxy latency), for a third of a phase, about twice", net: true,
			inject: netFault("network latency and jitter", perPhase(3), perPhase(3), true, allLinks, func(n *network, w int, link string) error {
				for _, s := range []string{"upstream", "downstream"} {
					if err := n.toxic(w, link, "latency", s, map[string]any{"latency": 50, "jitter": 50}); err != nil {
						return err
					}
				}
				return nil
			})},
		{name: "net-reset", what: "a random worker's links reset (TCP RST, toxiproxy reset_peer) as soon as they carry data, for 1s, about five times a phase", net: true,
			inject: netFault("connections reset", perPhase(5), fixed(time.Second), false, allLinks, func(n *network, w int, link string) error {
				return n.toxic(w, link, "reset_peer", "upstream", map[string]any{"timeout": 0})
			})},
		{name: "net-half-open", what: "a random worker's links stop answering: the requests reach the servers, no answer comes back (toxiproxy timeout downstream) for a lease, then the connections close; about four times a phase", net: true,
			inject: netFault("half-open connections (answers dropped)", perPhase(4), leases(1), false, allLinks, func(n *network, w int, link string) error {
				return n.toxic(w, link, "timeout", "downstream", map[string]any{"timeout": 0})
			})},
		{name: "net-bandwidth", what: "every link of every worker limited to 16 KB/s each way (toxiproxy bandwidth), for a third of a phase, about twice", net: true,
			inject: netFault("bandwidth limited", perPhase(3), perPhase(3), true, allLinks, func(n *network, w int, link string) error {
				for _, s := range []string{"upstream", "downstream"} {
					if err := n.toxic(w, link, "bandwidth", s, map[string]any{"rate": 16}); err != nil {
						return err
					}
				}
				return nil
			})},
		{name: "partition-redis", what: "a random worker cut off from Redis (nothing passes either way) but not from Temporal, for 2 leases, about three times a phase", net: true,
			inject: netFault("worker cut off from Redis", perPhase(3), leases(2), false, []string{linkRedis}, partition)},
		{name: "partition-temporal", what: "a random worker cut off from Temporal (nothing passes either way) but not from Redis, for 8s (past the steps' 5s heartbeat timeout), about twice a phase", net: true,
			inject: netFault("worker cut off from Temporal", perPhase(2), fixed(8*time.Second), false, []string{linkTemporal}, partition)},
	}
}

// partition drops everything either way on a link until it is cleared
// (then its connections close): a cut cable, not a refused connection.
func partition(n *network, w int, link string) error {
	for _, s := range []string{"upstream", "downstream"} {
		if err := n.toxic(w, link, "timeout", s, map[string]any{"timeout": 0}); err != nil {
			return err
		}
	}
	return nil
}
