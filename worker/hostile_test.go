package worker

// The HTTP server against a client that holds requests open, refusals
// that must not wait for a body, and labels an attacker would choose
// (issue 46): the server Run serves (listenHTTP, serveHTTP), on the
// worker's health mux with the test's routes.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// serveAll serves the worker's own health mux with testMux's routes
// beside it, as Run does with an application's routes, with cfg's HTTP
// settings, on a loopback port until the test ends.
func serveAll(t *testing.T, cfg Config) (string, *connLimiter) {
	t.Helper()
	if len(cfg.Secret) == 0 && !cfg.Dev {
		cfg.Secret = secret32
	}
	cfg.HTTPAddr, cfg.Logger = "127.0.0.1:0", slog.New(slog.DiscardHandler)
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &parts{}
	w.newHealthMux(p) // /healthz touches neither Redis nor Temporal
	p.mux.Handle("/", testMux())
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

// hold opens a connection to addr from d and writes head on it (nothing
// when head is ""); the connection closes when the test ends.
func hold(t *testing.T, d *net.Dialer, addr, head string) net.Conn {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if head != "" {
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// getWithin gets url with a fresh connection, and fails the test unless
// the answer is 200 within limit.
func getWithin(t *testing.T, d *net.Dialer, url string, limit time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: limit, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	start := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v after %v", url, err, time.Since(start))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}

// One client holds 900 connections, more than HTTPMaxConns, in every
// phase of a request: connected and silent, halfway through its headers,
// its headers sent with a body declared (200 bytes, or 6 MB) that never
// comes, with and without Expect: 100-continue. A fresh client still gets
// /healthz within 1 s, from the same address and from another, and
// another address's request to an application route is served too.
// (Before, requests whose body never came were busy connections, which
// neither the idle budget nor the idle timeout reached: at 512 every other
// client waited to be accepted until the read timeout, 30 s.)
func TestFreshClientServedWhileOneHoldsConnectionsInEveryPhase(t *testing.T) {
	t.Parallel()
	addr, _ := serveAll(t, Config{})
	d := &net.Dialer{}
	heads := []string{
		"",
		"POST /echo HTTP/1.1\r\nHost: test\r\n",
		"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 200\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 200\r\nExpect: 100-continue\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 6000000\r\n\r\n",
		"POST /refuse HTTP/1.1\r\nHost: test\r\nContent-Length: 200\r\n\r\n",
	}
	for i := range 900 {
		hold(t, d, addr, heads[i%len(heads)])
	}
	getWithin(t, d, "http://"+addr+"/healthz", time.Second)
	other := from(t, "127.0.0.2")
	getWithin(t, other, "http://"+addr+"/healthz", time.Second)
	getWithin(t, other, "http://"+addr+"/ok", time.Second)
}

// status reads the status of the next answer on c within limit; 0 when
// none came.
func status(c net.Conn, limit time.Duration) (int, http.Header) {
	_ = c.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// A declared body must start to arrive within HTTPBodyStartTimeout (2 s
// by default) and keep HTTPMinBodyRate (1 KiB/s) after it: a body that
// never comes, or that trickles in at 10 bytes a second, is cut off then,
// not after HTTPReadTimeout (30 s); a body at a fair pace is read whole.
func TestHTTPBodyMustStartSoonAndKeepARate(t *testing.T) {
	t.Parallel()
	addr, _ := serveAll(t, Config{})
	d := &net.Dialer{}

	t.Run("never sent", func(t *testing.T) {
		t.Parallel()
		c := hold(t, d, addr, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 200\r\n\r\n")
		start := time.Now()
		if code, _ := status(c, 10*time.Second); code != http.StatusBadRequest || time.Since(start) > 4*time.Second {
			t.Fatalf("a body that never came: %d after %v, want 400 after about 2 s", code, time.Since(start))
		}
	})
	t.Run("trickled", func(t *testing.T) {
		t.Parallel()
		c := hold(t, d, addr, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(100 * time.Millisecond) // 10 bytes a second: the whole body in 10 s
			defer tick.Stop()
			for range 100 {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		start := time.Now()
		if code, _ := status(c, 15*time.Second); code == http.StatusOK || time.Since(start) > 5*time.Second {
			t.Fatalf("a body trickled at 10 bytes a second: %d after %v, want it cut off after about 2 s", code, time.Since(start))
		}
	})
	t.Run("at a fair pace", func(t *testing.T) {
		t.Parallel()
		const size = 8 << 10
		c := hold(t, d, addr, fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n", size))
		go func() {
			for range size / 512 { // 512 bytes every 50 ms: 10 KiB/s
				if _, err := c.Write([]byte(strings.Repeat("x", 512))); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		if code, _ := status(c, 10*time.Second); code != http.StatusOK {
			t.Fatalf("a body at 10 KiB/s: %d, want it read whole", code)
		}
	})
}

// One address holds at most HTTPMaxActiveRequestsPerClient (64) requests
// in the handlers at once: of 100 requests whose bodies are slow to come,
// 36 are answered 503 with Retry-After at once, before anything reads
// their bodies. Probes are never shed, and another address is served.
func TestHTTPActiveRequestsPerClientAreCapped(t *testing.T) {
	t.Parallel()
	addr, _ := serveAll(t, Config{})
	d := &net.Dialer{}
	conns := make([]net.Conn, 100)
	for i := range conns {
		conns[i] = hold(t, d, addr, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n")
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range conns {
		wg.Go(func() {
			code, h := status(c, 10*time.Second)
			mu.Lock()
			defer mu.Unlock()
			if code == http.StatusServiceUnavailable {
				if h.Get("Retry-After") == "" || h.Get("Content-Type") != "application/problem+json" {
					t.Errorf("a shed request: %v", h)
				}
				if took := time.Since(start); took > time.Second {
					t.Errorf("a request was shed only after %v", took)
				}
			}
			codes[code]++
		})
	}
	getWithin(t, d, "http://"+addr+"/healthz", time.Second)
	getWithin(t, from(t, "127.0.0.2"), "http://"+addr+"/ok", time.Second)
	wg.Wait()
	if codes[http.StatusServiceUnavailable] != 36 || codes[http.StatusBadRequest] != 64 {
		t.Fatalf("100 requests from one address: %v, want 36 shed (503) and 64 held until their bodies were late (400)", codes)
	}
}

// Refusals that need no body are answered at once, telemetry on or off:
// a declared body over the limit (413, with Expect: 100-continue too, and
// no 100 Continue), a route that refuses before it reads (401), no route
// (404), each with a body declared that never comes. (With otelhttp, which
// replaces the request's body, net/http read the declared body to reuse
// the connection, and answered only at the read timeout, 30 s; without
// it, a small body the handler did not read was waited for too.)
func TestRefusalsBeforeTheBodyAreAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"telemetry off": {},
		"telemetry on":  {MeterProvider: sdkmetric.NewMeterProvider(), TracerProvider: sdktrace.NewTracerProvider()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			addr, _ := serveAll(t, cfg)
			for _, c := range []struct {
				head string
				want int
			}{
				{"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 6000000\r\n\r\n", http.StatusRequestEntityTooLarge},
				{"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 6000000\r\nExpect: 100-continue\r\n\r\n", http.StatusRequestEntityTooLarge},
				{"POST /refuse HTTP/1.1\r\nHost: test\r\nContent-Length: 200\r\n\r\n", http.StatusUnauthorized},
				{"POST /refuse HTTP/1.1\r\nHost: test\r\nContent-Length: 200\r\nExpect: 100-continue\r\n\r\n", http.StatusUnauthorized},
				{"POST /nowhere HTTP/1.1\r\nHost: test\r\nContent-Length: 200\r\n\r\n", http.StatusNotFound},
			} {
				conn := dial(t, addr)
				send(t, conn, "%s", c.head)
				start := time.Now()
				if code, _ := status(conn, time.Second); code != c.want {
					t.Errorf("%q: %d after %v, want %d at once", c.head, code, time.Since(start), c.want)
				}
			}
		})
	}
}

// The HTTP server's metrics take no label from the request beyond the
// route pattern, the method (bounded) and the status: 1,000 requests with
// distinct Hosts, ports, paths and methods make a handful of series.
// (otelhttp took server_address and server_port from the Host header: 100
// Hosts grew /metrics by 1.4 MB.)
func TestHTTPMetricLabelsAreOurs(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	addr, _ := serveAll(t, Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	for i := range 1000 {
		method, path := fmt.Sprintf("M%d", i), fmt.Sprintf("/p/%d", i)
		switch i % 4 {
		case 0:
			method, path = http.MethodGet, "/healthz"
		case 1:
			method, path = http.MethodGet, "/ok"
		}
		req, err := http.NewRequest(method, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = fmt.Sprintf("h%d.example:%d", i, 1000+i)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	allowed := map[attribute.Key]bool{"http.request.method": true, "http.route": true, "http.response.status_code": true, "url.scheme": true}
	series := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !strings.HasPrefix(m.Name, "http.server.") {
				continue
			}
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			}
			for _, set := range sets {
				series++
				for _, kv := range set.ToSlice() {
					if !allowed[kv.Key] {
						t.Errorf("%s has label %s=%s, taken from the request", m.Name, kv.Key, kv.Value.String())
						return
					}
				}
			}
		}
	}
	// 3 instruments × (GET /healthz, GET /ok, _OTHER to no route).
	if series == 0 || series > 3*3 {
		t.Fatalf("1,000 requests of distinct Hosts, paths and methods made %d series of http.server.*, want at most 9", series)
	}
}

// Every answer of the worker's server says X-Content-Type-Options:
// nosniff: a browser never guesses a type the server did not send.
func TestEveryAnswerSaysNosniff(t *testing.T) {
	t.Parallel()
	addr, _ := serveAll(t, Config{})
	dev, _ := serveAll(t, Config{Dev: true})
	for _, c := range []struct{ addr, method, path, host string }{
		{addr, http.MethodGet, "/healthz", ""},
		{addr, http.MethodGet, "/ok", ""},
		{addr, http.MethodGet, "/nowhere", ""},
		{addr, http.MethodDelete, "/ok", ""},
		{addr, http.MethodPost, "/refuse", ""},
		{dev, http.MethodGet, "/healthz", "evil.example"},
	} {
		req, err := http.NewRequest(c.method, "http://"+c.addr+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.host != "" {
			req.Host = c.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (Host %q): %d with X-Content-Type-Options %q, want nosniff", c.method, c.path, c.host, resp.StatusCode, got)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	c := dial(t, addr)
	send(t, c, "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 6000000\r\n\r\n")
	if code, h := status(c, time.Second); code != http.StatusRequestEntityTooLarge || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("a 413: %d %v", code, h)
	}
}
