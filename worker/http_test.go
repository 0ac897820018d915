package worker

// The HTTP server's bounds, against real slow clients on a real listener:
// the server is the one Run serves (listenHTTP, serveHTTP), on a mux of
// the test's.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/idemhttp"
)

// testMux has what the order API's routes do with a body: POST /echo
// reads it whole under a limit of its own, as idemhttp does (1 MiB);
// POST /drain reads it with no limit of its own; GET /ok answers at once;
// POST /refuse answers 401 without reading the body.
func testMux() *http.ServeMux {
	mux := http.NewServeMux()
	read := func(rw http.ResponseWriter, body io.Reader) {
		n, err := io.Copy(io.Discard, body)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			http.Error(rw, "too large", http.StatusRequestEntityTooLarge)
		case err != nil:
			http.Error(rw, "unreadable: "+err.Error(), http.StatusBadRequest)
		default:
			_, _ = fmt.Fprintf(rw, "read %d bytes", n)
		}
	}
	mux.HandleFunc("POST /echo", func(rw http.ResponseWriter, r *http.Request) {
		read(rw, http.MaxBytesReader(rw, r.Body, 1<<20))
	})
	mux.HandleFunc("POST /drain", func(rw http.ResponseWriter, r *http.Request) { read(rw, r.Body) })
	mux.HandleFunc("GET /ok", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	// POST /refuse answers 401 without reading the body, as an
	// authentication in front of a route does.
	mux.HandleFunc("POST /refuse", func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "unauthenticated", http.StatusUnauthorized)
	})
	return mux
}

// serveTestHTTP serves testMux as Run does, with cfg's HTTP settings, on a
// loopback port until the test ends, and returns its address.
func serveTestHTTP(t *testing.T, cfg Config) string {
	t.Helper()
	addr, _ := serveTestListener(t, cfg)
	return addr
}

// serveTestListener is serveTestHTTP that also returns the listener's
// connection limiter. cfg without a Secret gets one (not Dev: a -dev
// server answers only loopback Host names).
func serveTestListener(t *testing.T, cfg Config) (string, *connLimiter) {
	t.Helper()
	if len(cfg.Secret) == 0 && !cfg.Dev {
		cfg.Secret = secret32
	}
	cfg.HTTPAddr, cfg.Logger = "127.0.0.1:0", slog.New(slog.DiscardHandler)
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &parts{mux: testMux()}
	if err := w.listenHTTP(p); err != nil {
		t.Fatal(err)
	}
	served := w.serveHTTP(p)
	t.Cleanup(func() {
		_ = p.srv.Close()
		<-served
	})
	return w.HTTPAddr(), p.ln.(*connLimiter)
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// dial connects to addr; the connection closes when the test ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// answer reads the next response on c (a 1xx one included), waiting at
// most 10 s: far longer than any bound the tests set.
func answer(t *testing.T, c net.Conn, br *bufio.Reader) (*http.Response, string, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func send(t *testing.T, c net.Conn, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(c, format, args...); err != nil {
		t.Fatal(err)
	}
}

// A body trickled in a byte at a time is cut off at HTTPReadTimeout,
// before it would have been read whole; a body declared and never sent
// gets an answer at HTTPReadTimeout, not a connection held forever.
func TestHTTPReadTimeoutCutsSlowBodies(t *testing.T) {
	t.Parallel()
	addr := serveTestHTTP(t, Config{HTTPReadTimeout: 300 * time.Millisecond})

	t.Run("trickled", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		const size = 40 // at a byte every 50ms: 2s, well past the 300ms
		send(t, c, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n", size)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for range size {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := c.Write([]byte("x")); err != nil {
					return // the server closed the connection
				}
			}
		}()
		start := time.Now()
		resp, body, err := answer(t, c, bufio.NewReader(c))
		close(stop)
		<-done
		if err == nil && resp.StatusCode == http.StatusOK {
			t.Fatalf("a body trickled in over 2s was read whole after %v: %s", time.Since(start), body)
		}
		if time.Since(start) > 1500*time.Millisecond {
			t.Fatalf("the trickle was cut off only after %v", time.Since(start))
		}
	})

	t.Run("never sent", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		send(t, c, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n")
		resp, body, err := answer(t, c, bufio.NewReader(c))
		if err != nil {
			t.Fatalf("a body that never came got no answer: %v", err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a body that never came: %d %s", resp.StatusCode, body)
		}
	})
}

// A body declared over HTTPMaxBodyBytes is answered 413 at once: with
// Expect: 100-continue, before any "100 Continue" (net/http sends one on
// the first read of the body, which the route would do), and a declared
// body that never comes is not waited for. Under the limit, the client
// gets its 100 Continue and the route reads the body. A chunked body is
// cut off at the limit on a route with no limit of its own.
func TestHTTPMaxBodyBytesAnswers413BeforeContinue(t *testing.T) {
	t.Parallel()
	addr := serveTestHTTP(t, Config{})

	c := dial(t, addr)
	br := bufio.NewReader(c)
	send(t, c, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", 2<<20)
	resp, body, err := answer(t, c, br)
	if err != nil {
		t.Fatalf("a declared 2 MiB body that never comes: %v", err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("Expect: 100-continue with a 2 MiB body: the first answer is %d %s, want 413", resp.StatusCode, body)
	}
	var p idemhttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.Header.Get("Content-Type") != idemhttp.ContentTypeProblem ||
		p.Type != idemhttp.ProblemBodyTooLarge || p.Status != http.StatusRequestEntityTooLarge || p.Detail == "" {
		t.Fatalf("the 413 is not idemhttp's problem (%v): %v %s", err, resp.Header, body)
	}

	c = dial(t, addr)
	br = bufio.NewReader(c)
	send(t, c, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	if resp, body, err := answer(t, c, br); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("under the limit: %v %v %s, want 100 Continue", err, resp, body)
	}
	send(t, c, "hello")
	if resp, body, err := answer(t, c, br); err != nil || resp.StatusCode != http.StatusOK || body != "read 5 bytes" {
		t.Fatalf("under the limit: %v %v %q", err, resp, body)
	}

	small := serveTestHTTP(t, Config{HTTPMaxBodyBytes: 1024})
	// A reader of unknown length: the client sends it chunked.
	chunked := io.MultiReader(strings.NewReader(strings.Repeat("x", 2048)))
	r, err := http.Post("http://"+small+"/drain", "text/plain", chunked)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if r.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a chunked 2 KiB body over a 1 KiB limit: %d %s", r.StatusCode, b)
	}
	http.DefaultClient.CloseIdleConnections()
}

// A keep-alive connection that sends no next request is closed at
// HTTPIdleTimeout.
func TestHTTPIdleTimeoutClosesKeepAlives(t *testing.T) {
	t.Parallel()
	addr := serveTestHTTP(t, Config{HTTPIdleTimeout: 200 * time.Millisecond})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	send(t, c, "GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
	if resp, _, err := answer(t, c, br); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /ok: %v %v", resp, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.Peek(1); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle keep-alive: %v, want it closed by the server (EOF)", err)
	}
}

// At most HTTPMaxConns connections are served at once: while both are
// busy with a request (a body that has not arrived), the next one waits,
// and is served once one of them closes. (The active requests' limits,
// which keep some connections free by default, are raised to
// HTTPMaxConns here.)
func TestHTTPMaxConnsHoldsTheRestBack(t *testing.T) {
	t.Parallel()
	addr, l := serveTestListener(t, Config{HTTPMaxConns: 2, HTTPMaxActiveRequests: 2, HTTPMaxActiveRequestsPerClient: 2})
	var held []net.Conn
	for range 2 {
		c := dial(t, addr)
		send(t, c, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n") // the body never comes
		held = append(held, c)
	}
	// Both inside their requests (not waiting for their headers, which a
	// new connection may take the place of).
	waitFor(t, "both requests to be read", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.waiting.Len() == 0 && len(l.slots) == 2
	})
	third := dial(t, addr)
	send(t, third, "GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
	// Nothing signals "not accepted": a deadline bounds the wait for the
	// answer that must not come while both others are busy.
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if n, err := third.Read(one[:]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection over HTTPMaxConns 2 was served: %d bytes, %v", n, err)
	}
	_ = held[0].Close()
	if resp, _, err := answer(t, third, bufio.NewReader(third)); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the third connection once one closed: %v %v", resp, err)
	}
}

// keepAlive opens a connection to l with d, gets /ok on it and returns it
// once l counts it idle, with its reader.
func keepAlive(t *testing.T, d *net.Dialer, l *connLimiter) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	br := bufio.NewReader(c)
	send(t, c, "GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
	if resp, _, err := answer(t, c, br); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ok: %v %v", resp, err)
	}
	// The server says a connection is idle just after it answers: wait
	// for it, so the order of the idle connections is the test's.
	waitFor(t, "the connection to be idle", func() bool { return isIdle(l, c.LocalAddr().String()) })
	return c, br
}

// isIdle: l counts the connection from addr idle.
func isIdle(l *connLimiter, addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for e := l.idle.Front(); e != nil; e = e.Next() {
		if e.Value.(*limitedConn).RemoteAddr().String() == addr {
			return true
		}
	}
	return false
}

// closedByServer: the server closed c (EOF, or a reset), within 10 s.
func closedByServer(c net.Conn, br *bufio.Reader) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := br.Peek(1)
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// Idle keep-alives give way: a new connection that finds HTTPMaxConns
// open closes the one idle the longest and is served at once, and over
// HTTPMaxIdleConns idle connections the longest-idle one is closed. A
// connection whose next request has begun to arrive is not idle.
func TestHTTPIdleConnectionsGiveWay(t *testing.T) {
	t.Parallel()
	d := &net.Dialer{}
	t.Run("to a new connection", func(t *testing.T) {
		t.Parallel()
		_, l := serveTestListener(t, Config{HTTPMaxConns: 2})
		first, firstR := keepAlive(t, d, l)
		second, secondR := keepAlive(t, d, l)
		keepAlive(t, d, l) // served at once, not after HTTPIdleTimeout
		if !closedByServer(first, firstR) {
			t.Fatal("the longest-idle connection is still open")
		}
		send(t, second, "GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
		if resp, _, err := answer(t, second, secondR); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the other idle connection: %v %v", resp, err)
		}
	})
	t.Run("over the idle budget", func(t *testing.T) {
		t.Parallel()
		_, l := serveTestListener(t, Config{HTTPMaxIdleConns: 2})
		first, firstR := keepAlive(t, d, l)
		second, secondR := keepAlive(t, d, l)
		keepAlive(t, d, l)
		if !closedByServer(first, firstR) {
			t.Fatal("three idle connections over a budget of 2: the longest-idle one is still open")
		}
		send(t, second, "GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
		if resp, _, err := answer(t, second, secondR); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the second idle connection: %v %v", resp, err)
		}
	})
	t.Run("not a request that has begun", func(t *testing.T) {
		t.Parallel()
		_, l := serveTestListener(t, Config{HTTPMaxConns: 2})
		first, firstR := keepAlive(t, d, l)
		second, secondR := keepAlive(t, d, l)
		// first's next request is half sent: once the server has read it,
		// first is busy, and second is the only idle connection.
		send(t, first, "GET /ok HTTP/1.1\r\n")
		waitFor(t, "first's request to be read", func() bool { return !isIdle(l, first.LocalAddr().String()) })
		keepAlive(t, d, l)
		if !closedByServer(second, secondR) {
			t.Fatal("the idle connection is still open")
		}
		send(t, first, "Host: test\r\n\r\n")
		if resp, _, err := answer(t, first, firstR); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a request that had begun to arrive: %v %v", resp, err)
		}
	})
}

// Concurrent slow clients: each is cut off at HTTPReadTimeout, and
// none holds a connection past it. (None is shed: the active requests'
// limits are raised to HTTPMaxConns.)
func TestHTTPSlowClientsDoNotPileUp(t *testing.T) {
	t.Parallel()
	addr := serveTestHTTP(t, Config{HTTPReadTimeout: 300 * time.Millisecond, HTTPMaxConns: 4, HTTPMaxActiveRequests: 4, HTTPMaxActiveRequestsPerClient: 4})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 { // twice the connection limit
		c := dial(t, addr)
		wg.Go(func() {
			// Headers sent, the body never: each waits its turn, then
			// its 300ms.
			if _, err := fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n"); err != nil {
				errs <- err
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				errs <- fmt.Errorf("a slow client got no answer: %w", err)
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				errs <- fmt.Errorf("a slow client: %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// serveHealth serves the worker's own health mux as Run does, with cfg's
// HTTP settings, on a loopback port until the test ends, and returns its
// address.
func serveHealth(t *testing.T, cfg Config) string {
	t.Helper()
	if !cfg.Dev {
		cfg.Secret = secret32
	}
	cfg.HTTPAddr, cfg.Logger = "127.0.0.1:0", slog.New(slog.DiscardHandler)
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &parts{}
	w.newHealthMux(p) // /healthz touches neither Redis nor Temporal
	if err := w.listenHTTP(p); err != nil {
		t.Fatal(err)
	}
	served := w.serveHTTP(p)
	t.Cleanup(func() {
		_ = p.srv.Close()
		<-served
	})
	return w.HTTPAddr()
}

// secret32 is a secret of the minimum length.
var secret32 = []byte(strings.Repeat("s", minSecretBytes))

// holdIdle opens n connections to addr, sends a request on each and reads
// its answer, so that each is left an idle keep-alive the server holds
// (or closed by it). A connection that gets no answer within 2 s is left
// as it is: the server did not serve it. It returns how many got an
// answer.
func holdIdle(t *testing.T, addr string, n int, dialer *net.Dialer) int {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns[i] = c
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
	}
	var answered atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			answered.Add(1)
			_ = c.SetReadDeadline(time.Time{})
		})
	}
	wg.Wait()
	return int(answered.Load())
}

// One client that holds 600 idle keep-alive connections, more than
// HTTPMaxConns, does not starve another: with the default bounds a fresh
// client gets /healthz within 1 s. (Before the idle budget, the first 512
// were held for HTTPIdleTimeout, 60 s, and every other client waited to be
// accepted.) On loopback both clients have the same address: the idle
// budget works whatever the address.
func TestFreshClientServedWhileOneHoldsIdleConnections(t *testing.T) {
	t.Parallel()
	addr := serveHealth(t, Config{})
	answered := holdIdle(t, addr, 600, &net.Dialer{})
	t.Logf("the attacker's 600 requests: %d answered", answered)

	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("a fresh client, while another holds 600 idle connections: %v after %v", err, time.Since(start))
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok\n" {
		t.Fatalf("a fresh client: %d %q", resp.StatusCode, b)
	}
}

// from is a dialer whose connections come from ip, another loopback
// address (Linux routes all of 127.0.0.0/8 to loopback); the test is
// skipped where it cannot bind one.
func from(t *testing.T, ip string) *net.Dialer {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("no loopback address %s here: %v", ip, err)
	}
	_ = ln.Close()
	return d
}

// One client address holds at most HTTPMaxConnsPerClient connections:
// one more closes that client's own longest-idle connection (not another
// client's), or, when all of its connections are busy, is closed at once
// with no answer; another address is served meanwhile.
func TestHTTPMaxConnsPerClient(t *testing.T) {
	t.Parallel()
	_, l := serveTestListener(t, Config{HTTPMaxConnsPerClient: 2})
	a, b := from(t, "127.0.0.2"), from(t, "127.0.0.3")
	other, otherR := keepAlive(t, b, l) // b's, idle the longest
	a1, a1R := keepAlive(t, a, l)
	a2, _ := keepAlive(t, a, l)
	a3, _ := keepAlive(t, a, l)
	if !closedByServer(a1, a1R) {
		t.Fatal("a third connection of one address: its longest-idle one is still open")
	}
	// a's two connections busy (a request that has begun): a fourth is
	// refused.
	for _, c := range []net.Conn{a2, a3} {
		send(t, c, "GET /ok HTTP/1.1\r\n")
		waitFor(t, "the request to be read", func() bool { return !isIdle(l, c.LocalAddr().String()) })
	}
	refused, err := a.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = refused.Close() })
	send(t, refused, "GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
	if resp, body, err := answer(t, refused, bufio.NewReader(refused)); err == nil {
		t.Fatalf("a connection over the limit of its address, the others busy, was served: %d %s", resp.StatusCode, body)
	}
	send(t, other, "GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
	if resp, _, err := answer(t, other, otherR); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another address's idle connection: %v %v", resp, err)
	}
	keepAlive(t, b, l)
	if _, _, _, refusals := l.counts(); refusals != 1 {
		t.Fatalf("%d connections refused, want 1", refusals)
	}
}

// Headers over HTTPMaxHeaderBytes (64 KiB by default, not net/http's
// 1 MiB) are answered 431 and not handed to a route.
func TestHTTPMaxHeaderBytesAnswers431(t *testing.T) {
	t.Parallel()
	addr := serveTestHTTP(t, Config{})
	c := dial(t, addr)
	send(t, c, "GET /ok HTTP/1.1\r\nHost: test\r\nX-Padding: %s\r\n\r\n", strings.Repeat("x", 100<<10))
	// The server closes the connection on the headers it did not read:
	// the body of its answer may be cut off by a reset.
	if resp, _, err := answer(t, c, bufio.NewReader(c)); resp == nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %v %v, want 431", err, resp)
	}
	c = dial(t, addr)
	send(t, c, "GET /ok HTTP/1.1\r\nHost: test\r\nX-Padding: %s\r\n\r\n", strings.Repeat("x", 16<<10))
	if resp, body, err := answer(t, c, bufio.NewReader(c)); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("16 KiB of headers: %v %v %s", err, resp, body)
	}
}

// A -dev worker's server answers only requests for a loopback host, on
// every route (here /healthz and the routes an application adds, as the
// order API, /metrics and the console are added): a page of evil.example
// rebound to 127.0.0.1 is same-origin to the browser, so its requests
// carry Host: evil.example, and get 421 before any handler runs. Outside
// -dev any Host is served (behind a proxy, on the operator's names).
func TestDevHTTPAnswersOnlyLoopbackHosts(t *testing.T) {
	t.Parallel()
	get := func(addr, host, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	dev := serveHealth(t, Config{Dev: true})
	devApp := serveTestHTTP(t, Config{Dev: true})
	_, port, _ := net.SplitHostPort(dev)
	for _, host := range []string{"evil.example", "evil.example:" + port, "localhost.evil.example:" + port, "127.0.0.1.evil.example", "0.0.0.0:" + port, "10.0.0.1", "[::2]:" + port} {
		if status, body := get(dev, host, "/healthz"); status != http.StatusMisdirectedRequest || !strings.Contains(body, "http://localhost:"+port+"/healthz") {
			t.Errorf("GET /healthz for Host %q: %d %s, want 421 naming http://localhost:%s/healthz", host, status, body, port)
		}
		if status, body := get(devApp, host, "/ok"); status != http.StatusMisdirectedRequest {
			t.Errorf("an application's route for Host %q: %d %s, want 421", host, status, body)
		}
	}
	for _, host := range []string{"localhost", "LocalHost:" + port, "127.0.0.1:" + port, "127.0.0.2", "[::1]:" + port, "[::1]"} {
		if status, body := get(dev, host, "/healthz"); status != http.StatusOK {
			t.Errorf("GET /healthz for Host %q: %d %s", host, status, body)
		}
	}
	prod := serveHealth(t, Config{})
	if status, body := get(prod, "worker.internal.example", "/healthz"); status != http.StatusOK {
		t.Errorf("outside -dev, GET /healthz for the operator's name: %d %s", status, body)
	}
}
