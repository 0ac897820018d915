package idemhttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/logtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.MainM(m)) }

// api is a test server: POST /things and POST /other behind the
// middleware, answering what the test sets, counting handler runs.
type api struct {
	t       *testing.T
	srv     *httptest.Server
	runs    atomic.Int32
	handler atomic.Value // http.HandlerFunc
	redis   *redisstore.Store
}

type option func(*idemhttp.Config)

func newAPI(t *testing.T, redisAddr string, opts ...option) *api {
	t.Helper()
	if redisAddr == "" {
		redisAddr = redistest.Addr(t)
	}
	store, err := redisstore.New(redisstore.Config{Client: redistest.NewClient(t, redisAddr), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("idemhttp test secret, 32 bytes.."), 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := idemhttp.Config{Executor: exec, Digester: dig, Code: "things", ReplayHeaders: []string{"X-Request-Cost"}, Principal: testAccount}
	for _, o := range opts {
		o(&cfg)
	}
	mw, err := idemhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &api{t: t, redis: store}
	a.handler.Store(http.HandlerFunc(created))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.runs.Add(1)
		a.handler.Load().(http.HandlerFunc)(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /things", mw.Handler(h))
	mux.Handle("POST /other", mw.Handler(h))
	mux.Handle("GET /things", mw.Handler(h))
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// testTokens are the test clients' credentials and their accounts: alice
// has two, as after a rotation.
var testTokens = map[string]string{"alice": "acct-alice", "alice-rotated": "acct-alice", "bob": "acct-bob"}

// testAccount authenticates the way a service does: the Authorization
// scheme is case-insensitive, spaces after it are insignificant, and the
// principal is the account, not the credential. No Authorization: the
// public account.
func testAccount(r *http.Request) (string, error) {
	a := r.Header.Get("Authorization")
	if a == "" {
		return "acct-public", nil
	}
	scheme, token, _ := strings.Cut(a, " ")
	if acct, ok := testTokens[strings.TrimSpace(token)]; ok && strings.EqualFold(scheme, "Bearer") {
		return acct, nil
	}
	return "", idemhttp.ErrUnauthenticated
}

// created answers 201 with a body that differs on every run.
func created(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/things/1")
	w.Header().Set("Set-Cookie", "session=first-client-only")
	w.Header().Set("X-Request-Cost", "7")
	w.Header().Set("X-Not-Replayed", "1")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"at":%d,"echo":%q}`, time.Now().UnixNano(), body)
}

type response struct {
	status int
	header http.Header
	body   string
}

func (a *api) do(method, path, key, body string, headers ...string) response {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

// problem checks r is the problem+json of status and type.
func problem(t *testing.T, r response, status int, typ string) idemhttp.Problem {
	t.Helper()
	var p idemhttp.Problem
	if r.status != status || r.header.Get("Content-Type") != idemhttp.ContentTypeProblem || json.Unmarshal([]byte(r.body), &p) != nil ||
		p.Type != typ || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Fatalf("got %d %s %s; want a %d problem of type %s", r.status, r.header.Get("Content-Type"), r.body, status, typ)
	}
	return p
}

func TestReplayIsByteForByte(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	first := a.do("POST", "/things", "k-1", `{"a":1}`)
	second := a.do("POST", "/things", "k-1", `{"a":1}`)
	if first.status != 201 || second.status != 201 || first.body != second.body || a.runs.Load() != 1 {
		t.Fatalf("first %d %q, second %d %q, %d runs", first.status, first.body, second.status, second.body, a.runs.Load())
	}
	if first.header.Get("Idempotency-Replayed") != "" || second.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("Idempotency-Replayed: %q then %q", first.header.Get("Idempotency-Replayed"), second.header.Get("Idempotency-Replayed"))
	}
	for h, want := range map[string]string{"Content-Type": "application/json", "Location": "/things/1", "X-Request-Cost": "7", "Set-Cookie": "", "X-Not-Replayed": ""} {
		if got := second.header.Get(h); got != want {
			t.Errorf("replayed %s = %q, want %q", h, got, want)
		}
	}
	if first.header.Get("Set-Cookie") == "" {
		t.Error("the first client did not get its cookie")
	}
}

func TestKeyMissingOrMalformed(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	problem(t, a.do("POST", "/things", "", `{}`), 400, idemhttp.ProblemKeyMissing)
	for _, bad := range []string{`"unterminated`, `has space`, strings.Repeat("k", 256), `"a"b`, `""`, `"tab\x01"`} {
		problem(t, a.do("POST", "/things", bad, `{}`), 400, idemhttp.ProblemKeyInvalid)
	}
	// A GET needs no key and passes through.
	if r := a.do("GET", "/things", "", ""); r.status != 201 {
		t.Fatalf("GET: %d", r.status)
	}
	// An sf-string key and the same key bare are one key.
	a.do("POST", "/things", `"k-2"`, `{}`)
	if r := a.do("POST", "/things", `k-2`, `{}`); r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("bare key after the quoted one: %d %v", r.status, r.header)
	}
	if a.runs.Load() != 2 { // the GET and k-2
		t.Fatalf("%d runs", a.runs.Load())
	}
}

func TestSameJSONReplaysAnotherIs422(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	first := a.do("POST", "/things", "k", `{"customer_id":"c-1","items":[{"sku":"A-1","qty":2}],"amount_cents":1999}`)
	same := a.do("POST", "/things", "k", "{ \"amount_cents\" : 1999.0,\n \"items\":[{\"qty\":2e0,\"sku\":\"A-1\"}], \"customer_id\":\"c-1\" }")
	if same.status != 201 || same.body != first.body {
		t.Fatalf("reordered JSON: %d %s", same.status, same.body)
	}
	problem(t, a.do("POST", "/things", "k", `{"customer_id":"c-1","items":[{"sku":"A-1","qty":3}],"amount_cents":1999}`), 422, idemhttp.ProblemKeyReused)
	if a.runs.Load() != 1 {
		t.Fatalf("%d runs", a.runs.Load())
	}
}

func TestPrincipalsAndRoutesAreScopes(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	a.do("POST", "/things", "k", `{}`, "Authorization", "Bearer alice")
	a.do("POST", "/things", "k", `{}`, "Authorization", "Bearer bob")
	a.do("POST", "/other", "k", `{}`, "Authorization", "Bearer alice")
	if r := a.do("POST", "/things", "k", `{}`, "Authorization", "Bearer alice"); r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatal("alice's retry was not replayed")
	}
	if a.runs.Load() != 3 {
		t.Fatalf("%d runs; want alice, bob, and alice on another route", a.runs.Load())
	}
	// No raw key or principal in Redis.
	keys, _ := redistest.Client(t).Keys(context.Background(), "*").Result()
	for _, k := range keys {
		if strings.Contains(k, "alice") || strings.Contains(k, ":k") {
			t.Fatalf("raw scope in key %q", k)
		}
	}
}

// block makes the handler wait until release is closed.
func (a *api) block() (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.handler.Store(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(in) })
		<-out
		created(w, r)
	}))
	return in, func() { close(out) }
}

func TestInProgressIs409OrAWait(t *testing.T) {
	t.Parallel()
	waiting := make(chan struct{})
	a := newAPI(t, "", func(c *idemhttp.Config) {
		c.Logger = logtest.OnMessage("idemhttp: in progress; waiting", func() { close(waiting) })
	})
	entered, release := a.block()
	done := make(chan response)
	go func() { done <- a.do("POST", "/things", "k", `{}`) }()
	<-entered
	p := problem(t, a.do("POST", "/things", "k", `{}`), 409, idemhttp.ProblemInProgress)
	_ = p
	r := a.do("POST", "/things", "k", `{}`)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 || s > 3 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	waited := make(chan response)
	go func() { waited <- a.do("POST", "/things", "k", `{}`, "Prefer", "wait=5") }()
	<-waiting // the waiter found it in progress
	release()
	first, w := <-done, <-waited
	if w.status != 201 || w.body != first.body || w.header.Get("Idempotency-Replayed") != "true" || a.runs.Load() != 1 {
		t.Fatalf("waiter: %d %q (first %q), %d runs", w.status, w.body, first.body, a.runs.Load())
	}
}

func TestPreferWaitRunsOutInto409(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	entered, release := a.block()
	defer release()
	go func() {
		// The blocked request: its answer does not matter here, and a
		// goroutine must not call t.Fatal.
		req, _ := http.NewRequest("POST", a.srv.URL+"/things", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "k")
		req.Header.Set("Content-Type", "application/json")
		if resp, err := a.srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	start := time.Now()
	r := a.do("POST", "/things", "k", `{}`, "Prefer", "respond-async, wait=1")
	problem(t, r, 409, idemhttp.ProblemInProgress)
	if el := time.Since(start); el < time.Second || r.header.Get("Preference-Applied") != "wait=1" {
		t.Fatalf("answered after %v with Preference-Applied %q", el, r.header.Get("Preference-Applied"))
	}
}

func TestBodyTooLargeBeforeAnyClaim(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "", func(c *idemhttp.Config) { c.MaxBodyBytes = 16 })
	problem(t, a.do("POST", "/things", "k", `{"far":"too long a body"}`), 413, idemhttp.ProblemBodyTooLarge)
	if r := a.do("POST", "/things", "k", `{}`); r.status != 201 || a.runs.Load() != 1 {
		t.Fatalf("after a 413 the key was not fresh: %d, %d runs", r.status, a.runs.Load())
	}
}

func TestValidateAnswersWithoutStoring(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "", func(c *idemhttp.Config) {
		c.Validate = func(_ *http.Request, body []byte) *idemhttp.Problem {
			if !strings.Contains(string(body), "ok") {
				return &idemhttp.Problem{Type: idemhttp.ProblemInvalidRequest, Title: "Invalid", Status: 400, Detail: "say ok"}
			}
			return nil
		}
	})
	problem(t, a.do("POST", "/things", "k", `{"x":1}`), 400, idemhttp.ProblemInvalidRequest)
	if r := a.do("POST", "/things", "k", `{"x":"ok"}`); r.status != 201 {
		t.Fatalf("the corrected request: %d %s", r.status, r.body)
	}
}

func TestWhatIsStored(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status int
		stored bool
	}{{200, true}, {201, true}, {202, false}, {204, true}, {400, true}, {404, true}, {422, true},
		{408, false}, {409, false}, {425, false}, {429, false}, {500, false}, {503, false}} {
		if idemhttp.StoreStatus(c.status) != c.stored {
			t.Errorf("StoreStatus(%d) = %v", c.status, !c.stored)
		}
	}
	a := newAPI(t, "")
	a.handler.Store(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTooManyRequests) }))
	a.do("POST", "/things", "k", `{}`)
	a.handler.Store(http.HandlerFunc(created))
	if r := a.do("POST", "/things", "k", `{}`); r.status != 201 || a.runs.Load() != 2 {
		t.Fatalf("a 429 was stored: %d, %d runs", r.status, a.runs.Load())
	}
}

func TestServerErrorsLeaveTheKeyUsable(t *testing.T) {
	t.Parallel()
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panic=%v", panics), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, "")
			a.handler.Store(failing(panics))
			r := a.do("POST", "/things", "k", `{}`)
			if r.status != 500 {
				t.Fatalf("first: %d", r.status)
			}
			if panics {
				problem(t, r, 500, idemhttp.ProblemHandlerPanicked)
			}
			a.handler.Store(http.HandlerFunc(created))
			if r := a.do("POST", "/things", "k", `{}`); r.status != 201 || a.runs.Load() != 2 {
				t.Fatalf("retry: %d, %d runs", r.status, a.runs.Load())
			}
		})
	}
}

func failing(panics bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if panics {
			panic("handler bug")
		}
		http.Error(w, "boom", http.StatusInternalServerError)
	}
}

func TestServerErrorsAreUnknownWhenConfigured(t *testing.T) {
	t.Parallel()
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panic=%v", panics), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, "", func(c *idemhttp.Config) { c.UnknownOn5xx = true })
			a.handler.Store(failing(panics))
			if r := a.do("POST", "/things", "k", `{}`); r.status != 500 {
				t.Fatalf("first: %d", r.status)
			}
			a.handler.Store(http.HandlerFunc(created))
			p := problem(t, a.do("POST", "/things", "k", `{}`), 409, idemhttp.ProblemEffectUnknown)
			if !strings.Contains(p.Detail, "things:d1:") || a.runs.Load() != 1 {
				t.Fatalf("detail %q, %d runs", p.Detail, a.runs.Load())
			}
		})
	}
}

func TestConcurrentRequestsRunOnce(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	var wg sync.WaitGroup
	out := make(chan response, 20)
	for range 20 {
		wg.Go(func() { out <- a.do("POST", "/things", "k", `{"n":1}`) })
	}
	wg.Wait()
	close(out)
	var body string
	for r := range out {
		switch r.status {
		case 201:
			if body != "" && r.body != body {
				t.Fatalf("two different 201s: %q, %q", body, r.body)
			}
			body = r.body
		case 409:
			problem(t, r, 409, idemhttp.ProblemInProgress)
		default:
			t.Fatalf("status %d %s", r.status, r.body)
		}
	}
	if a.runs.Load() != 1 {
		t.Fatalf("%d runs", a.runs.Load())
	}
}

func TestStoreDownIs503AndNoRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := newAPI(t, srv.Addr())
	srv.Kill()
	r := a.do("POST", "/things", "k", `{}`)
	problem(t, r, 503, idemhttp.ProblemStoreUnavailable)
	if r.header.Get("Retry-After") != "1" || a.runs.Load() != 0 {
		t.Fatalf("Retry-After %q, %d runs", r.header.Get("Retry-After"), a.runs.Load())
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r = a.do("POST", "/things", "k", `{}`); r.status == 503 && time.Now().Before(deadline); r = a.do("POST", "/things", "k", `{}`) {
		time.Sleep(50 * time.Millisecond) // the client reconnects
	}
	if r.status != 201 || a.runs.Load() != 1 {
		t.Fatalf("after the restart: %d %s, %d runs", r.status, r.body, a.runs.Load())
	}
}

// TestALostCompletionReplyNeverRunsTheHandlerAgain drops the reply of the
// completion: the client still gets its 201, and a retry does not run the
// handler again.
func TestALostCompletionReplyNeverRunsTheHandlerAgain(t *testing.T) {
	t.Parallel()
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := newAPI(t, proxy.Addr())
	a.handler.Store(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.SetFault(redistest.DropScriptReplies) // from the completion on
		created(w, r)
	}))
	first := a.do("POST", "/things", "k", `{}`)
	proxy.SetFault(redistest.Pass)
	if first.status != 201 || proxy.DroppedReplies() == 0 {
		t.Fatalf("first: %d, %d dropped replies", first.status, proxy.DroppedReplies())
	}
	for range 3 {
		r := a.do("POST", "/things", "k", `{}`)
		if r.status != 201 && r.status != 409 {
			t.Fatalf("retry: %d %s", r.status, r.body)
		}
	}
	if a.runs.Load() != 1 {
		t.Fatalf("the handler ran %d times", a.runs.Load())
	}
}

// A request whose handler ran but whose outcome never reached Redis (a
// worker killed before COMPLETE, here a lost reply and an unreachable
// INSPECT): once its lease has run out, the key is effect-unknown (409)
// for a handler that must not run twice, and runs the handler again for
// one declared idempotent (the order API's, which attaches to its
// workflow by ID). Without IdempotentHandler the order API's keys stayed
// 409 until an operator reopened them.
func TestIdempotentHandlerRunsAgainAfterAnUnrecordedOutcome(t *testing.T) {
	t.Parallel()
	for _, idempotent := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			t.Parallel()
			store, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t), CommandTimeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			faulty := storetest.NewFaultyStore(store)
			exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: faulty, Lease: 600 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			dig, err := onceflow.NewDigester([]byte("idemhttp test secret, 32 bytes.."), 1)
			if err != nil {
				t.Fatal(err)
			}
			mw, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, Code: "things", IdempotentHandler: idempotent, Anonymous: true})
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			mux := http.NewServeMux()
			mux.Handle("POST /things", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				created(w, r)
			})))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			// post answers the status, and the problem type of a 409.
			post := func() (int, string) {
				req, _ := http.NewRequest("POST", srv.URL+"/things", strings.NewReader(`{"n":1}`))
				req.Header.Set("Idempotency-Key", "k")
				req.Header.Set("Content-Type", "application/json")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var p idemhttp.Problem
				if resp.StatusCode == http.StatusConflict {
					_ = json.NewDecoder(resp.Body).Decode(&p)
				}
				return resp.StatusCode, p.Type
			}
			faulty.Inject(storetest.MethodComplete, storetest.ErrorBeforeApply)
			faulty.Inject(storetest.MethodInspect, storetest.ErrorBeforeApply)
			if s, _ := post(); s != http.StatusCreated {
				t.Fatalf("first: %d", s)
			}
			// In progress until the unrecorded attempt's lease runs out.
			status, typ := post()
			for deadline := time.Now().Add(10 * time.Second); typ == idemhttp.ProblemInProgress; status, typ = post() {
				if time.Now().After(deadline) {
					t.Fatal("the key stayed in progress")
				}
				time.Sleep(50 * time.Millisecond) // polling the lease, judged by Redis' clock
			}
			switch {
			case idempotent && (status != http.StatusCreated || runs.Load() != 2):
				t.Fatalf("idempotent handler: %d %s after %d runs; want it run again and 201", status, typ, runs.Load())
			case !idempotent && (typ != idemhttp.ProblemEffectUnknown || runs.Load() != 1):
				t.Fatalf("non-idempotent handler: %d %s after %d runs; want 409 effect-unknown and one run", status, typ, runs.Load())
			}
			if idempotent {
				if s, _ := post(); s != http.StatusCreated || runs.Load() != 2 {
					t.Fatalf("replay: %d, %d runs", s, runs.Load())
				}
			}
		})
	}
}

func TestUnknownOn5xxAndIdempotentHandlerAreRefusedTogether(t *testing.T) {
	t.Parallel()
	exec, dig := testDeps(t)
	if _, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, UnknownOn5xx: true, IdempotentHandler: true, Anonymous: true}); err == nil {
		t.Fatal("UnknownOn5xx with IdempotentHandler was accepted")
	}
}

// A declared body over the limit is answered 413 before any of it is
// read: a client that sent Expect: 100-continue gets no 100 Continue
// (net/http sends it on the first read of the body).
func TestDeclaredBodyTooLargeGetsNoContinue(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "", func(c *idemhttp.Config) { c.MaxBodyBytes = 16 })
	conn, err := net.Dial("tcp", a.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "POST /things HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"k\"\r\nContent-Type: application/json\r\nContent-Length: 2097152\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 413") {
		t.Fatalf("first answer %q, want a 413 before any 100 Continue", line)
	}
	if a.runs.Load() != 0 {
		t.Fatal("the handler ran")
	}
}
