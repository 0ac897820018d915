package idemhttp_test

// Refusals that need no body are answered at once, behind otelhttp too
// (issue 46), and every answer of the middleware says nosniff.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/onceflow/onceflow/idemhttp"
)

// A 401 (credentials), a 400 (the key header) and a 413 (a declared
// length) are answered at once while the declared body never comes,
// with Expect: 100-continue too (and no 100 Continue), on a server
// instrumented with otelhttp, which replaces the request's body. Before,
// net/http read the unread body to reuse the connection, and the answer
// waited for the body, or for the server's read timeout (none here).
func TestRefusalsBeforeTheBodyAreAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	exec, dig := testDeps(t)
	mw, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, Code: "things", Principal: testAccount})
	if err != nil {
		t.Fatal(err)
	}
	var runs int
	mux := http.NewServeMux()
	mux.Handle("POST /things", mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs++ })))
	srv := httptest.NewServer(otelhttp.NewHandler(mux, "things"))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name, headers string
		want          int
	}{
		{"unknown credentials", "Authorization: Bearer nobody\r\nIdempotency-Key: k\r\nContent-Length: 200\r\n", http.StatusUnauthorized},
		{"a malformed key", "Idempotency-Key: \"unterminated\r\nContent-Length: 200\r\n", http.StatusBadRequest},
		{"no key", "Content-Length: 200\r\n", http.StatusBadRequest},
		{"a declared body over the limit", "Idempotency-Key: k\r\nContent-Length: 6000000\r\n", http.StatusRequestEntityTooLarge},
	} {
		for _, expect := range []string{"", "Expect: 100-continue\r\n"} {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			if _, err := io.WriteString(conn, "POST /things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+c.headers+expect+"\r\n"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = conn.SetReadDeadline(start.Add(time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != c.want {
				t.Errorf("%s (%q): %v %v after %v, want %d at once", c.name, expect, resp, err, time.Since(start), c.want)
				continue
			}
			_ = resp.Body.Close()
		}
	}
	if runs != 0 {
		t.Fatalf("the handler ran %d times", runs)
	}
}

// Every answer through the middleware says X-Content-Type-Options:
// nosniff: the handler's, its replay, and the middleware's problems.
func TestEveryAnswerSaysNosniff(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	for name, r := range map[string]response{
		"the handler's":         a.do("POST", "/things", "k", `{}`),
		"a replay":              a.do("POST", "/things", "k", `{}`),
		"a 422":                 a.do("POST", "/things", "k", `{"other":1}`),
		"a 400":                 a.do("POST", "/things", "", `{}`),
		"a 401":                 a.do("POST", "/things", "k", `{}`, "Authorization", "Bearer nobody"),
		"a 400 body":            a.do("POST", "/things", "k2", `{"a":1,"a":2}`),
		"one that needs no key": a.do("GET", "/things", "", ""),
	} {
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s answer (%d): X-Content-Type-Options %q, want nosniff", name, r.status, got)
		}
	}
}
