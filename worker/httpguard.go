package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The guards of the worker's HTTP server on requests in flight (issue
// 46): a connection inside a request is bounded like an idle one.
//
//   - guardRequest (the outermost handler) says nosniff on every answer,
//     holds a declared body to HTTPBodyStartTimeout and HTTPMinBodyRate,
//     and closes the connection after an answer given before the body was
//     read, so that net/http never waits for a body nobody will read (it
//     reads up to 256 KiB of an unread body to reuse the connection,
//     until the body comes or the read timeout; otelhttp, which replaces
//     the request's body, made it do so for every refusal);
//   - activeLimiter caps the requests in the handlers, per client address
//     and in total, and sheds the excess with 503 and Retry-After before
//     its body is read; the probes' routes are never shed;
//   - boundedLabels keeps the HTTP server's metrics to labels of ours.

// ProblemServerBusy is the problem type (RFC 9457) of a request the
// worker's server shed: it held HTTPMaxActiveRequests requests, or
// HTTPMaxActiveRequestsPerClient of the client's address, at once. The
// request was not processed; it is answered 503 with Retry-After.
const ProblemServerBusy = "urn:onceflow:problem:server-busy"

// metricHTTPRequestsShed counts the requests the worker's server shed,
// by "limit": "total" (HTTPMaxActiveRequests) or "client"
// (HTTPMaxActiveRequestsPerClient).
const metricHTTPRequestsShed = "onceflow.http.requests_shed"

// metricHTTPSlowBodies counts the request bodies the worker's server cut
// off because they did not start within HTTPBodyStartTimeout or fell
// below HTTPMinBodyRate.
const metricHTTPSlowBodies = "onceflow.http.slow_bodies"

// shedRetryAfter is the Retry-After of a shed request, in seconds.
const shedRetryAfter = "1"

// httpMetrics are the worker's own HTTP counters; their instruments are
// no-ops without a MeterProvider.
type httpMetrics struct {
	shed, slow metric.Int64Counter
}

func newHTTPMetrics(mp metric.MeterProvider) (httpMetrics, error) {
	var m httpMetrics
	if mp == nil {
		return m, nil
	}
	meter := mp.Meter("github.com/onceflow/onceflow/worker")
	var err error
	if m.shed, err = meter.Int64Counter(metricHTTPRequestsShed,
		metric.WithDescription("Requests the worker's HTTP server shed with 503 before reading them, by limit: total (HTTPMaxActiveRequests) or client (HTTPMaxActiveRequestsPerClient).")); err != nil {
		return m, fmt.Errorf("worker: %w", err)
	}
	if m.slow, err = meter.Int64Counter(metricHTTPSlowBodies,
		metric.WithDescription("Request bodies the worker's HTTP server cut off: they did not start within HTTPBodyStartTimeout or fell below HTTPMinBodyRate.")); err != nil {
		return m, fmt.Errorf("worker: %w", err)
	}
	return m, nil
}

func (m httpMetrics) addShed(ctx context.Context, limit string) {
	if m.shed != nil {
		m.shed.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", limit)))
	}
}

func (m httpMetrics) addSlow(ctx context.Context) {
	if m.slow != nil {
		m.slow.Add(ctx, 1)
	}
}

// guardRequest is the outermost handler of the worker's server. Every
// answer says X-Content-Type-Options: nosniff. A request with a body gets
// a copy of itself whose body is held to the body's deadlines (the
// server's own request keeps the body net/http made, so that a handler
// that replaces the body, as otelhttp does, cannot make net/http read a
// body it would otherwise leave), and an answer begun before that body
// was read to its end closes the connection.
func (w *Worker) guardRequest(next http.Handler, metrics httpMetrics) http.Handler {
	c := w.cfg
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("X-Content-Type-Options", "nosniff")
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(rw, r)
			return
		}
		now := time.Now()
		b := &guardedBody{body: r.Body, rc: http.NewResponseController(rw), ctx: r.Context(), metrics: metrics,
			start: c.HTTPBodyStartTimeout, rate: float64(c.HTTPMinBodyRate), limit: now.Add(c.HTTPReadTimeout)}
		gr := r.WithContext(r.Context()) // a copy: r.Body stays net/http's
		gr.Body = b
		next.ServeHTTP(&closeUnread{ResponseWriter: rw, body: b}, gr)
	})
}

// errSlowBody is what a body read returns once the body is late.
var errSlowBody = errors.New("the request body did not arrive in time")

// guardedBody is a request's body held to a deadline: its first byte
// within start of the handler's first read, and then rate bytes a second
// on average, never past limit (the request's HTTPReadTimeout).
type guardedBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	ctx     context.Context
	metrics httpMetrics
	start   time.Duration
	rate    float64
	limit   time.Time

	// first and n are the time of the first read and the bytes read: Read
	// alone uses them (a body is read by one goroutine at a time).
	first time.Time
	n     int64
	// eof is set once the body was read to its end.
	eof atomic.Bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	now := time.Now()
	if b.first.IsZero() {
		b.first = now
	}
	deadline := b.first.Add(b.start + time.Duration(float64(b.n)/b.rate*float64(time.Second)))
	if deadline.After(b.limit) {
		deadline = b.limit
	}
	_ = b.rc.SetReadDeadline(deadline)
	n, err := b.body.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		b.eof.Store(true)
		// net/http now reads the connection in the background (to notice
		// a client that leaves): under the request's own deadline again,
		// not the body's, or a handler that runs on would be cancelled.
		_ = b.rc.SetReadDeadline(b.limit)
	case errors.Is(err, os.ErrDeadlineExceeded) && deadline.Before(b.limit):
		b.metrics.addSlow(b.ctx)
		err = fmt.Errorf("%w: its first byte must come within %v and then %.0f bytes a second (read %d bytes in %v): %w",
			errSlowBody, b.start, b.rate, b.n, time.Since(b.first).Round(time.Millisecond), err)
	}
	return n, err
}

func (b *guardedBody) Close() error { return b.body.Close() }

// closeUnread is the ResponseWriter of a request with a body: an answer
// begun before the body was read to its end says Connection: close, so
// that net/http closes the connection after it instead of reading the
// rest of the body first.
type closeUnread struct {
	http.ResponseWriter
	body    *guardedBody
	decided bool
}

func (u *closeUnread) decide(status int) {
	if u.decided || status < 200 {
		return
	}
	u.decided = true
	if !u.body.eof.Load() {
		u.Header().Set("Connection", "close")
	}
}

func (u *closeUnread) WriteHeader(status int) {
	u.decide(status)
	u.ResponseWriter.WriteHeader(status)
}

func (u *closeUnread) Write(p []byte) (int, error) {
	u.decide(http.StatusOK)
	return u.ResponseWriter.Write(p)
}

// Flush sends what is buffered (http.Flusher).
func (u *closeUnread) Flush() {
	u.decide(http.StatusOK)
	_ = http.NewResponseController(u.ResponseWriter).Flush()
}

// Hijack hands the connection over (http.Hijacker).
func (u *closeUnread) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(u.ResponseWriter).Hijack()
}

// Unwrap is for http.ResponseController.
func (u *closeUnread) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// activeLimiter caps the requests in the handlers at once: max in total,
// perClient of one client address (clientAddr). The probes' routes are
// neither counted nor shed.
type activeLimiter struct {
	max, perClient int
	mux            *http.ServeMux
	probes         map[string]bool
	metrics        httpMetrics

	mu       sync.Mutex
	total    int
	byClient map[string]int
}

func newActiveLimiter(max, perClient int, mux *http.ServeMux, probes []string, metrics httpMetrics) *activeLimiter {
	l := &activeLimiter{max: max, perClient: perClient, mux: mux, probes: map[string]bool{}, metrics: metrics, byClient: map[string]int{}}
	for _, p := range probes {
		l.probes[p] = true
	}
	return l
}

// handler serves next within the limits.
func (l *activeLimiter) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if _, pattern := l.mux.Handler(r); l.probes[pattern] {
			next.ServeHTTP(rw, r)
			return
		}
		client := remoteClient(r.RemoteAddr)
		over := l.enter(client)
		if over != "" {
			l.metrics.addShed(r.Context(), over)
			writeBusy(rw, over)
			return
		}
		defer l.leave(client)
		next.ServeHTTP(rw, r)
	})
}

// enter counts a request of client in, or says which limit it is over.
func (l *activeLimiter) enter(client string) (over string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byClient[client] >= l.perClient:
		return "client"
	case l.total >= l.max:
		return "total"
	}
	l.total++
	l.byClient[client]++
	return ""
}

func (l *activeLimiter) leave(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byClient[client]--; l.byClient[client] <= 0 {
		delete(l.byClient, client)
	}
}

// writeBusy answers a shed request: 503, Retry-After, the problem.
func writeBusy(rw http.ResponseWriter, over string) {
	detail := "the server is handling as many requests as it takes at once; this one was not processed: retry it after Retry-After seconds"
	if over == "client" {
		detail = "the server is handling as many requests from your address as it takes at once; this one was not processed: " +
			"retry it after Retry-After seconds, once one of your others has been answered"
	}
	rw.Header().Set("Retry-After", shedRetryAfter)
	rw.Header().Set("Content-Type", "application/problem+json")
	rw.Header().Set("Cache-Control", "no-store")
	rw.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(rw).Encode(map[string]any{
		"type": ProblemServerBusy, "title": "Server busy", "status": http.StatusServiceUnavailable, "detail": detail,
	})
}

// remoteClient is clientAddr of a request's RemoteAddr.
func remoteClient(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return clientAddr(net.TCPAddrFromAddrPort(ap))
}

// httpMetricLabels are the labels the HTTP server's metrics keep: the
// route pattern the mux matched, the method (otelhttp names any but the
// nine of RFC 9110 and RFC 5789 "_OTHER"), the status and the scheme
// (the server's). otelhttp also takes server.address and server.port from
// the Host header and the protocol version from the request line: each
// distinct value a series of its own, chosen by whoever sends requests.
var httpMetricLabels = map[attribute.Key]bool{
	"http.route": true, "http.request.method": true, "http.response.status_code": true, "url.scheme": true,
}

// boundedLabels is a MeterProvider whose synchronous instruments record
// only httpMetricLabels: otelhttp's are given it.
type boundedLabels struct{ metric.MeterProvider }

func (p boundedLabels) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return boundedMeter{p.MeterProvider.Meter(name, opts...)}
}

type boundedMeter struct{ metric.Meter }

func (m boundedMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	i, err := m.Meter.Int64Counter(name, opts...)
	return boundedInt64Counter{i}, err
}

func (m boundedMeter) Float64Counter(name string, opts ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	i, err := m.Meter.Float64Counter(name, opts...)
	return boundedFloat64Counter{i}, err
}

func (m boundedMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	i, err := m.Meter.Int64UpDownCounter(name, opts...)
	return boundedInt64UpDownCounter{i}, err
}

func (m boundedMeter) Int64Histogram(name string, opts ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	i, err := m.Meter.Int64Histogram(name, opts...)
	return boundedInt64Histogram{i}, err
}

func (m boundedMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	i, err := m.Meter.Float64Histogram(name, opts...)
	return boundedFloat64Histogram{i}, err
}

// ours keeps the httpMetricLabels of a measurement's attributes.
func ours(set attribute.Set) metric.MeasurementOption {
	kept, _ := set.Filter(func(kv attribute.KeyValue) bool { return httpMetricLabels[kv.Key] })
	return metric.WithAttributeSet(kept)
}

type boundedInt64Counter struct{ metric.Int64Counter }

func (c boundedInt64Counter) Add(ctx context.Context, v int64, opts ...metric.AddOption) {
	c.Int64Counter.Add(ctx, v, ours(metric.NewAddConfig(opts).Attributes()))
}

type boundedFloat64Counter struct{ metric.Float64Counter }

func (c boundedFloat64Counter) Add(ctx context.Context, v float64, opts ...metric.AddOption) {
	c.Float64Counter.Add(ctx, v, ours(metric.NewAddConfig(opts).Attributes()))
}

type boundedInt64UpDownCounter struct{ metric.Int64UpDownCounter }

func (c boundedInt64UpDownCounter) Add(ctx context.Context, v int64, opts ...metric.AddOption) {
	c.Int64UpDownCounter.Add(ctx, v, ours(metric.NewAddConfig(opts).Attributes()))
}

type boundedInt64Histogram struct{ metric.Int64Histogram }

func (h boundedInt64Histogram) Record(ctx context.Context, v int64, opts ...metric.RecordOption) {
	h.Int64Histogram.Record(ctx, v, ours(metric.NewRecordConfig(opts).Attributes()))
}

type boundedFloat64Histogram struct{ metric.Float64Histogram }

func (h boundedFloat64Histogram) Record(ctx context.Context, v float64, opts ...metric.RecordOption) {
	h.Float64Histogram.Record(ctx, v, ours(metric.NewRecordConfig(opts).Attributes()))
}
