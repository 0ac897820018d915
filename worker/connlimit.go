package worker

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/internal/clientaddr"
)

// connLimiter is the HTTP server's listener: it holds at most max
// connections open at once, and it makes idle keep-alive connections, and
// connections whose request has not yet arrived, give way, so that one
// client holding many of them cannot starve the others:
//
//   - over idleBudget idle connections, the one idle the longest is closed;
//   - a new connection that finds max open closes the one idle the
//     longest, or, when none is idle, the one that has waited the longest
//     for its request's headers, once that is minHeaderWait (connected and
//     silent, or sending them slowly), and is served; it waits (in Accept, as
//     netutil.LimitListener's do) only when every open connection is
//     inside a request, which the worker's active-request limits
//     (Config.HTTPMaxActiveRequests) keep below max;
//   - with perClient > 0, a client address (an IPv4 address, or an IPv6
//     /64) holds at most perClient connections: one more closes that
//     client's own longest-idle connection, or, when none of its
//     connections is idle, is closed at once.
//
// A connection is idle from the moment the server reports it waiting for
// its next request (http.ConnState StateIdle, through connState) until a
// byte of that request is read; it then waits for the request's headers,
// as a new connection does, until the server reports it active (it has
// read the headers). A request sent the very moment its connection is
// closed is lost, as at IdleTimeout: HTTP clients retry a request on a
// reused connection the server closed, and Go's retries a POST that
// carries an Idempotency-Key.
type connLimiter struct {
	net.Listener
	max, idleBudget, perClient int

	// slots holds a token per open connection; Accept waits on it when
	// every open connection is busy.
	slots chan struct{}
	done  chan struct{}
	once  sync.Once

	mu sync.Mutex
	// idle and waiting hold the connections that may give way: idle
	// keep-alives, and connections waiting for their request's headers;
	// of *limitedConn, the longest waiting first.
	idle, waiting list.List
	perAddr       map[string]int
	evicted       int // connections closed to make room, for tests
	refusals      int // connections refused over perClient, for tests
}

// newConnLimiter wraps ln. max must be positive; idleBudget and perClient
// are not bounded when 0.
func newConnLimiter(ln net.Listener, max, idleBudget, perClient int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, idleBudget: idleBudget, perClient: perClient,
		slots: make(chan struct{}, max), done: make(chan struct{}), perAddr: make(map[string]int)}
}

// Accept returns the next connection once it may be served.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c.RemoteAddr())
		if !l.admitClient(addr) {
			_ = c.Close()
			continue
		}
		if err := l.acquire(); err != nil {
			l.mu.Lock()
			l.release(addr)
			l.mu.Unlock()
			_ = c.Close()
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, addr: addr}
		l.mu.Lock()
		lc.waitLocked()
		l.mu.Unlock()
		return lc, nil
	}
}

// admitClient counts a new connection of addr, closing addr's
// longest-idle connection when addr is at perClient; false when addr is
// there with no idle connection.
func (l *connLimiter) admitClient(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perClient > 0 && l.perAddr[addr] >= l.perClient {
		victim := l.oldestIdle(addr)
		if victim == nil {
			l.refusals++
			return false
		}
		l.evictLocked(victim)
	}
	l.perAddr[addr]++
	return true
}

// minHeaderWait is how long a connection waits for its request's
// headers before a new connection may take its place: a client sends its
// headers as it connects, and the server reads them within milliseconds,
// so a connection that has waited this long is silent or slow.
const minHeaderWait = 100 * time.Millisecond

// acquire takes a slot: at once when one is free, else by closing the
// longest-idle connection, else the one that has waited the longest (at
// least minHeaderWait) for its request's headers, else by waiting for
// one to close or to have waited that long.
func (l *connLimiter) acquire() error {
	for {
		select {
		case l.slots <- struct{}{}:
			return nil
		default:
		}
		var wait <-chan time.Time
		l.mu.Lock()
		victim := l.oldestIdle("")
		if victim == nil {
			if w := l.oldestWaiting(); w != nil {
				if left := minHeaderWait - time.Since(w.waitSince); left <= 0 {
					victim = w
				} else {
					wait = time.After(left)
				}
			}
		}
		if victim != nil {
			l.evictLocked(victim) // frees its slot
		}
		l.mu.Unlock()
		if victim != nil {
			continue
		}
		select {
		case l.slots <- struct{}{}:
			return nil
		case <-wait: // nil when no connection waits for its headers
		case <-l.done:
			return net.ErrClosed
		}
	}
}

// oldestIdle is the longest-idle connection (of addr, unless it is ""),
// or nil.
func (l *connLimiter) oldestIdle(addr string) *limitedConn {
	for e := l.idle.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*limitedConn); addr == "" || c.addr == addr {
			return c
		}
	}
	return nil
}

// oldestWaiting is the connection that has waited the longest for its
// request's headers, or nil.
func (l *connLimiter) oldestWaiting() *limitedConn {
	if e := l.waiting.Front(); e != nil {
		return e.Value.(*limitedConn)
	}
	return nil
}

// evictLocked closes c, which is idle or waiting for a request, and
// releases what it holds; l.mu is held.
func (l *connLimiter) evictLocked(c *limitedConn) {
	l.evicted++
	c.closeLocked()
}

// release forgets a connection of addr; l.mu is held.
func (l *connLimiter) release(addr string) {
	if l.perAddr[addr]--; l.perAddr[addr] <= 0 {
		delete(l.perAddr, addr)
	}
}

// Close closes the listener and wakes an Accept that waits for a slot.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// connState is the server's http.Server.ConnState: it tracks which
// connections are idle, and which wait for a request's headers.
func (l *connLimiter) connState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateNew: // waiting since Accept
		return
	case http.StateIdle:
	default:
		c.busyLocked()
		return
	}
	if c.closed || c.elem != nil && c.idle.Load() {
		return
	}
	c.busyLocked()
	c.elem = l.idle.PushBack(c)
	c.idle.Store(true)
	for l.idleBudget > 0 && l.idle.Len() > l.idleBudget {
		l.evictLocked(l.idle.Front().Value.(*limitedConn))
	}
}

// counts returns the open, idle, evicted and refused connections, for tests.
func (l *connLimiter) counts() (open, idle, evicted, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.slots), l.idle.Len(), l.evicted, l.refusals
}

// limitedConn is a connection connLimiter accepted.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	addr string
	// idle is true while elem is in l.idle: Read checks it without the
	// lock.
	idle atomic.Bool
	// elem is c's element of l.idle (when idle) or l.waiting (when not);
	// nil while c is inside a request; waitSince is when it began to wait
	// for a request's headers. elem, waitSince and closed are guarded by
	// l.mu.
	elem      *list.Element
	waitSince time.Time
	closed    bool
}

// Read moves an idle connection to the ones waiting for a request's
// headers once a byte of its next request arrives.
func (c *limitedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.idle.Load() {
		c.l.mu.Lock()
		if c.idle.Load() && !c.closed {
			c.busyLocked()
			c.waitLocked()
		}
		c.l.mu.Unlock()
	}
	return n, err
}

// waitLocked puts c, which is on no list, on the list of connections
// waiting for a request's headers; l.mu is held.
func (c *limitedConn) waitLocked() {
	c.elem = c.l.waiting.PushBack(c)
	c.waitSince = time.Now()
}

// busyLocked takes c off the idle or the waiting list; l.mu is held.
func (c *limitedConn) busyLocked() {
	if c.elem == nil {
		return
	}
	if c.idle.Load() {
		c.l.idle.Remove(c.elem)
		c.idle.Store(false)
	} else {
		c.l.waiting.Remove(c.elem)
	}
	c.elem = nil
}

// Close closes the connection and frees its slot, once.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.closeLocked()
}

// closeLocked is Close with l.mu held.
func (c *limitedConn) closeLocked() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.busyLocked()
	c.l.release(c.addr)
	<-c.l.slots
	return c.Conn.Close()
}

// clientAddr is the address a per-client limit counts by
// (clientaddr.OfIP for a TCP peer).
func clientAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	return clientaddr.OfIP(tcp.IP)
}
