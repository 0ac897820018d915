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
	"testing"
	"time"

	"github.com/onceflow/onceflow/idemhttp"
)

// testMux has what the order API's routes do with a body: POST /echo
// reads it whole under a limit of its own, as idemhttp does (1 MiB);
// POST /drain reads it with no limit of its own; GET /ok answers at once.
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
	return mux
}

// serveTestHTTP serves testMux as Run does, with cfg's HTTP settings, on a
// loopback port until the test ends, and returns its address.
func serveTestHTTP(t *testing.T, cfg Config) string {
	t.Helper()
	cfg.Dev, cfg.HTTPAddr, cfg.Logger = true, "127.0.0.1:0", slog.New(slog.DiscardHandler)
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
	return w.HTTPAddr()
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

// At most HTTPMaxConns connections are served at once: the next one waits
// until one of them closes, and is served then.
func TestHTTPMaxConnsHoldsTheRestBack(t *testing.T) {
	t.Parallel()
	addr := serveTestHTTP(t, Config{HTTPMaxConns: 2})
	get := func(c net.Conn) {
		t.Helper()
		send(t, c, "GET /ok HTTP/1.1\r\nHost: test\r\n\r\n")
	}
	var held []net.Conn
	for range 2 {
		c := dial(t, addr)
		get(c)
		if resp, _, err := answer(t, c, bufio.NewReader(c)); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: %v %v", len(held)+1, resp, err)
		}
		held = append(held, c) // kept alive: the server holds it
	}
	third := dial(t, addr)
	get(third)
	// Nothing signals "not accepted": a deadline bounds the wait for the
	// answer that must not come while both others are open.
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

// Concurrent slow clients: each is cut off at HTTPReadTimeout, and
// none holds a connection past it.
func TestHTTPSlowClientsDoNotPileUp(t *testing.T) {
	t.Parallel()
	addr := serveTestHTTP(t, Config{HTTPReadTimeout: 300 * time.Millisecond, HTTPMaxConns: 4})
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
