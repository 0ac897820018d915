package idemhttp_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// testDeps is an executor on the test Redis and a digester.
func testDeps(t *testing.T) (*idemstore.Executor, *onceflow.Digester) {
	t.Helper()
	store, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("idemhttp test secret, 32 bytes.."), 1)
	if err != nil {
		t.Fatal(err)
	}
	return exec, dig
}

// The middleware never guesses who the client is: before, its default
// principal was the SHA-256 of the Authorization header's bytes, so one
// account's retry with a re-formatted or rotated credential ran the
// handler a second time.
func TestNewRequiresAPrincipalOrAnonymous(t *testing.T) {
	t.Parallel()
	exec, dig := testDeps(t)
	if _, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig}); err == nil || !strings.Contains(err.Error(), "Config.Principal is required") {
		t.Fatalf("no Principal: %v; want it refused", err)
	}
	if _, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, Anonymous: true, Principal: idemhttp.ContextPrincipal}); err == nil {
		t.Fatal("Principal with Anonymous was accepted")
	}
	if _, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, Anonymous: true}); err != nil {
		t.Fatalf("Anonymous: %v", err)
	}
}

// A client's retry meets its first request's record whatever form its
// credential takes, since the principal is the account the service
// authenticated.
func TestRetryWithAnotherFormOfTheCredentialReplays(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	first := a.do("POST", "/things", "k", `{}`, "Authorization", "Bearer alice")
	for _, cred := range []string{"bearer alice", "Bearer  alice", "BEARER alice", "Bearer alice-rotated"} {
		r := a.do("POST", "/things", "k", `{}`, "Authorization", cred)
		if r.header.Get("Idempotency-Replayed") != "true" || r.body != first.body {
			t.Fatalf("retry with %q: %d %s; want the first response replayed", cred, r.status, r.body)
		}
	}
	if a.runs.Load() != 1 {
		t.Fatalf("%d runs; want 1", a.runs.Load())
	}
}

// bodyWatch fails a read of a body that should not be read.
type bodyWatch struct{ read atomic.Bool }

func (b *bodyWatch) Read([]byte) (int, error) { b.read.Store(true); return 0, io.EOF }

func TestUnauthenticatedIs401BeforeTheBody(t *testing.T) {
	t.Parallel()
	exec, dig := testDeps(t)
	unavailable := errors.New("the account store is down")
	for _, tc := range []struct {
		name      string
		principal func(*http.Request) (string, error)
		status    int
		typ       string
	}{
		{"no identity", idemhttp.ContextPrincipal, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated},
		{"empty principal", func(*http.Request) (string, error) { return "", nil }, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated},
		{"identity unavailable", func(*http.Request) (string, error) { return "", unavailable }, http.StatusServiceUnavailable, idemhttp.ProblemAuthUnavailable},
		{"the service's own problem", func(*http.Request) (string, error) {
			return "", &idemhttp.Problem{Type: "urn:x:forbidden", Title: "Forbidden", Status: http.StatusForbidden, Detail: "this account may not order"}
		}, http.StatusForbidden, "urn:x:forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mw, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, Principal: tc.principal})
			if err != nil {
				t.Fatal(err)
			}
			var ran atomic.Bool
			h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Store(true) }))
			body := &bodyWatch{}
			req := httptest.NewRequest(http.MethodPost, "/things", body)
			req.Header.Set("Idempotency-Key", "k")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			problem(t, response{rec.Code, rec.Header(), rec.Body.String()}, tc.status, tc.typ)
			if ran.Load() || body.read.Load() {
				t.Fatalf("handler ran %v, body read %v; want neither", ran.Load(), body.read.Load())
			}
		})
	}
}

// ContextPrincipal reads what an authentication middleware put in the
// context.
func TestContextPrincipal(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	if _, err := idemhttp.ContextPrincipal(r); !errors.Is(err, idemhttp.ErrUnauthenticated) {
		t.Fatalf("no principal: %v", err)
	}
	r = r.WithContext(idemhttp.WithPrincipal(r.Context(), "acct-1"))
	if p, err := idemhttp.ContextPrincipal(r); p != "acct-1" || err != nil {
		t.Fatalf("got %q, %v", p, err)
	}
}
