package idemhttp_test

// A key is bound to the concrete request (issue 46): the path with its
// values and the query, not only the route pattern. A library user's
// handler with path values, POST /accounts/{id}/charge, shows each case.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemhttp"
)

// charges is a third party's service: POST /accounts/{id}/charge behind
// the middleware, answering which account it charged and whether it was
// a dry run, counting its runs per account.
type charges struct {
	t    *testing.T
	srv  *httptest.Server
	runs sync.Map // account -> *atomic.Int32
	ref  atomic.Value
}

func newCharges(t *testing.T, opts ...option) *charges {
	t.Helper()
	exec, dig := testDeps(t)
	cfg := idemhttp.Config{Executor: exec, Digester: dig, Code: "charges", Principal: testAccount}
	for _, o := range opts {
		o(&cfg)
	}
	mw, err := idemhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &charges{t: t}
	mux := http.NewServeMux()
	mux.Handle("POST /accounts/{id}/charge", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		n, _ := c.runs.LoadOrStore(id, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if s, ok := idemhttp.InfoFrom(r.Context()); ok {
			c.ref.Store(s.Ref)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"account":%q,"dry_run":%q}`, id, r.URL.Query().Get("dry_run"))
	})))
	mux.Handle("POST /things", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s, ok := idemhttp.InfoFrom(r.Context()); ok {
			c.ref.Store(s.Ref)
		}
		w.WriteHeader(http.StatusCreated)
	})))
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	return c
}

// charge posts body to target under key, as alice.
func (c *charges) charge(target, key, body string) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.srv.URL+target, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alice")
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

func (c *charges) ran(account string) int32 {
	n, ok := c.runs.Load(account)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// charged checks r is a first answer (not a replay) of account's charge.
func charged(t *testing.T, r response, account string) {
	t.Helper()
	if r.status != http.StatusCreated || r.header.Get("Idempotency-Replayed") != "" || !strings.Contains(r.body, fmt.Sprintf(`"account":%q`, account)) {
		t.Fatalf("want %s charged, got %d %v %s", account, r.status, r.header, r.body)
	}
}

// One key, one request: each way a second request under a key differs
// from the first, and what it gets. Before, the key was bound to the
// route pattern and the body only: B's charge was answered with A's
// stored 201, marked replayed, and B's handler never ran; ?dry_run=0 was
// replayed the dry run's answer.
func TestAKeyIsBoundToTheConcreteRequest(t *testing.T) {
	t.Parallel()
	c := newCharges(t)
	const body = `{"amount_cents":500}`
	cases := []struct {
		name          string
		first, second string // targets
		secondBody    string
		wantStatus    int
	}{
		{"the same request is replayed", "/accounts/A1/charge", "/accounts/A1/charge", body, http.StatusCreated},
		{"another path value is 422", "/accounts/A2/charge", "/accounts/B2/charge", body, http.StatusUnprocessableEntity},
		{"another query value is 422", "/accounts/A3/charge?dry_run=1", "/accounts/A3/charge?dry_run=0", body, http.StatusUnprocessableEntity},
		{"a query added is 422", "/accounts/A4/charge", "/accounts/A4/charge?dry_run=1", body, http.StatusUnprocessableEntity},
		{"a query dropped is 422", "/accounts/A5/charge?dry_run=1", "/accounts/A5/charge", body, http.StatusUnprocessableEntity},
		{"the query's parameters reordered are 422", "/accounts/A6/charge?a=1&b=2", "/accounts/A6/charge?b=2&a=1", body, http.StatusUnprocessableEntity},
		{"a path value escaped otherwise is 422", "/accounts/A7/charge", "/accounts/%41%37/charge", body, http.StatusUnprocessableEntity},
		{"another body is 422", "/accounts/A8/charge", "/accounts/A8/charge", `{"amount_cents":501}`, http.StatusUnprocessableEntity},
		{"the same query is replayed", "/accounts/A9/charge?dry_run=1", "/accounts/A9/charge?dry_run=1", body, http.StatusCreated},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("k-%d", i)
			first := c.charge(tc.first, key, body)
			charged(t, first, strings.Split(tc.first, "/")[2])
			second := c.charge(tc.second, key, tc.secondBody)
			switch tc.wantStatus {
			case http.StatusCreated:
				if second.status != http.StatusCreated || second.header.Get("Idempotency-Replayed") != "true" || second.body != first.body {
					t.Fatalf("the same request again: %d %v %s, want the first answer replayed", second.status, second.header, second.body)
				}
			default:
				p := problem(t, second, tc.wantStatus, idemhttp.ProblemKeyReused)
				if !strings.Contains(p.Detail, "path") {
					t.Errorf("the 422 does not say a path counts: %s", p.Detail)
				}
			}
		})
	}
	for _, account := range []string{"A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9"} {
		if n := c.ran(account); n != 1 {
			t.Errorf("account %s charged %d times, want once", account, n)
		}
	}
	if n := c.ran("B2"); n != 0 {
		t.Errorf("B2 charged %d times under A2's key, want never", n)
	}
	// B2 with a key of its own is charged.
	charged(t, c.charge("/accounts/B2/charge", "k-b2", body), "B2")
}

// With Config.KeyPerTarget, each path and query under one key is an
// operation of its own: B's charge runs B's handler once, and is
// replayed to B's retry, never A's answer.
func TestKeyPerTargetMakesEachTargetItsOwnOperation(t *testing.T) {
	t.Parallel()
	c := newCharges(t, func(cfg *idemhttp.Config) { cfg.KeyPerTarget = true })
	const body = `{"amount_cents":500}`
	charged(t, c.charge("/accounts/A/charge", "k", body), "A")
	charged(t, c.charge("/accounts/B/charge", "k", body), "B")
	charged(t, c.charge("/accounts/B/charge?dry_run=1", "k", body), "B")
	for _, target := range []string{"/accounts/A/charge", "/accounts/B/charge", "/accounts/B/charge?dry_run=1"} {
		r := c.charge(target, "k", body)
		if r.header.Get("Idempotency-Replayed") != "true" || !strings.Contains(r.body, `"account":"`+strings.Split(target, "/")[2]+`"`) {
			t.Fatalf("%s again: %d %v %s, want its own answer replayed", target, r.status, r.header, r.body)
		}
	}
	problem(t, c.charge("/accounts/A/charge", "k", `{"amount_cents":501}`), http.StatusUnprocessableEntity, idemhttp.ProblemKeyReused)
	if a, b := c.ran("A"), c.ran("B"); a != 1 || b != 2 {
		t.Fatalf("A charged %d times, B %d, want 1 and 2 (B, and B's dry run)", a, b)
	}
}

// A route without path values, sent without a query, keeps the
// fingerprint it had before the target was bound (method, route, body):
// a retry across the upgrade of a record stored before it is replayed,
// not refused.
func TestALiteralRouteKeepsItsFingerprint(t *testing.T) {
	t.Parallel()
	exec, _ := testDeps(t)
	c := newCharges(t, func(cfg *idemhttp.Config) { cfg.Executor = exec })
	if r := c.charge("/things", "k", `{"a": 1}`); r.status != http.StatusCreated {
		t.Fatalf("POST /things: %d %s", r.status, r.body)
	}
	ref := c.ref.Load().(onceflow.Ref)
	obs, err := exec.Inspect(context.Background(), ref)
	if err != nil || !obs.Found {
		t.Fatalf("the record of %s: %v %v", ref, obs, err)
	}
	canonical, err := idemhttp.CanonicalJSON([]byte(`{"a": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := onceflow.FingerprintOf([]byte("POST"), []byte("POST /things"), append([]byte("json:"), canonical...))
	if obs.Record.Fingerprint != want {
		t.Fatalf("the fingerprint of POST /things changed: %s, want %s", obs.Record.Fingerprint, want)
	}
}
