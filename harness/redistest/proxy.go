package redistest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what a Proxy does to the traffic that crosses it.
type Fault int32

const (
	// Pass forwards everything.
	Pass Fault = iota
	// DropScriptReplies delivers every script call (EVAL/EVALSHA) to Redis,
	// waits for Redis to answer, then throws the answer away and closes the
	// client's connection: the script ran, the caller never hears of it.
	DropScriptReplies
	// ResetScripts closes the client's connection as soon as a script call
	// arrives, without delivering it: the script never ran.
	ResetScripts
	// BlackHole keeps every connection open and forwards nothing either
	// way, as a network partition does: calls neither fail nor answer.
	// New connections are accepted and black-holed too.
	BlackHole
	// DelayScripts holds what arrives with a script call (EVAL/EVALSHA)
	// for the proxy's delay (SetDelay) before it delivers it, and delivers
	// it even when the client has given up and gone meanwhile: a call
	// that reaches Redis late, as through a stalled network or a queue in
	// the client. The proxy keeps the connection to Redis open until
	// Redis has answered (LateAnswers).
	DelayScripts
)

// Proxy is a TCP proxy in front of a Redis server that injects faults.
type Proxy struct {
	ln      net.Listener
	target  string
	fault   atomic.Int32
	dropped atomic.Int64
	reset   atomic.Int64
	delay   atomic.Int64
	late    atomic.Int64
	answers atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
}

// NewProxy starts a proxy to target on a free loopback port, closed when
// the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address; point the client here.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetFault changes what the proxy does from now on.
func (p *Proxy) SetFault(f Fault) { p.fault.Store(int32(f)) }

// DroppedReplies counts the script replies thrown away: each is one run of a
// script whose caller got no answer.
func (p *Proxy) DroppedReplies() int64 { return p.dropped.Load() }

// ResetCalls counts the script calls cut off before delivery.
func (p *Proxy) ResetCalls() int64 { return p.reset.Load() }

// SetDelay sets how long DelayScripts holds a script call.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// LateCalls counts the deliveries DelayScripts held (each one or more
// script calls, as they arrived together).
func (p *Proxy) LateCalls() int64 { return p.late.Load() }

// LateAnswers counts Redis' answers to the deliveries DelayScripts held:
// once it reaches LateCalls, Redis has run every late call.
func (p *Proxy) LateAnswers() int64 { return p.answers.Load() }

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		p.wg.Add(1)
		go p.pipe(client, server)
	}
}

var scriptVerb = [][]byte{[]byte("evalsha"), []byte("eval")}

func isScript(b []byte) bool {
	l := bytes.ToLower(b)
	for _, v := range scriptVerb {
		if bytes.Contains(l, v) {
			return true
		}
	}
	return false
}

func (p *Proxy) pipe(client, server net.Conn) {
	defer p.wg.Done()
	var scriptPending, wasLate atomic.Bool
	var latePending atomic.Int64
	closeBoth := func() { _ = client.Close(); _ = server.Close() }
	done := make(chan struct{})
	go func() { // client -> server
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if Fault(p.fault.Load()) == BlackHole {
				n = 0 // swallowed
			}
			if n > 0 {
				if isScript(buf[:n]) {
					if Fault(p.fault.Load()) == ResetScripts {
						p.reset.Add(1)
						closeBoth()
						return
					}
					scriptPending.Store(true)
					if Fault(p.fault.Load()) == DelayScripts {
						time.Sleep(time.Duration(p.delay.Load()))
						wasLate.Store(true)
						latePending.Add(1)
						p.late.Add(1)
					}
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					closeBoth()
					return
				}
			}
			if err != nil {
				if wasLate.Load() {
					// Let Redis run what it was given, and answer: the
					// other half ends when Redis closes its side.
					_ = client.Close()
					if tc, ok := server.(*net.TCPConn); ok {
						_ = tc.CloseWrite()
						return
					}
				}
				closeBoth()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10) // server -> client
	for {
		n, err := server.Read(buf)
		if Fault(p.fault.Load()) == BlackHole {
			n = 0 // swallowed
		}
		if n > 0 {
			p.answers.Add(latePending.Swap(0))
			if scriptPending.Swap(false) && Fault(p.fault.Load()) == DropScriptReplies {
				p.dropped.Add(1)
				closeBoth()
				break
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				closeBoth()
				break
			}
		}
		if err != nil {
			closeBoth()
			break
		}
	}
	<-done
}
