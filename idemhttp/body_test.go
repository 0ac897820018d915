package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// refused checks that r is the 400 of a body refused before any claim,
// and returns its detail.
func refused(t *testing.T, r response) string {
	t.Helper()
	p := problem(t, r, http.StatusBadRequest, idemhttp.ProblemInvalidRequest)
	if p.Title != "Invalid request body" {
		t.Fatalf("title %q: %s", p.Title, r.body)
	}
	return p.Detail
}

// TestCaseVariantDuplicatesAreRefusedBeforeAnyClaim: a handler decoding
// with encoding/json reads {"Amount_Cents":100000,"amount_cents":1999} as
// 1999 and the same members the other way round as 100000, while a
// canonical form sorted by exact bytes made them one request, so the
// second was replayed the first's answer. Every duplicate name, case-folded
// ones included, at any depth, is a 400 before anything is claimed: the
// key stays fresh, the handler never runs. Without the refusal the second
// body of each pair is a replay (201).
func TestCaseVariantDuplicatesAreRefusedBeforeAnyClaim(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	for _, pair := range [][2]string{
		{`{"Amount_Cents":100000,"amount_cents":1999}`, `{"amount_cents":1999,"Amount_Cents":100000}`},
		{`{"amount_cents":1999,"amount_cents":100000}`, `{"amount_cents":100000,"amount_cents":1999}`},
		{`{"items":[{"sku":"A","SKU":"B"}]}`, `{"items":[{"SKU":"B","sku":"A"}]}`},
		{"{\"k\":1,\"\u212a\":2}", "{\"\u212a\":2,\"k\":1}"}, // the Kelvin sign: one field with "k"
		{`{"event_id":"a","Event_ID":"b"}`, `{"Event_ID":"b","event_id":"a"}`},
	} {
		for _, body := range pair {
			detail := refused(t, a.do("POST", "/things", "k", body))
			if !strings.Contains(detail, "send each member once") {
				t.Errorf("%s: detail %q", body, detail)
			}
		}
	}
	// No Content-Type: a body that parses as JSON is JSON, and refused.
	refused(t, a.do("POST", "/things", "k", `{"a":1,"A":2}`, "Content-Type", ""))
	if a.runs.Load() != 0 {
		t.Fatalf("the handler ran %d times", a.runs.Load())
	}
	// Nothing was claimed: the key serves a corrected body.
	if r := a.do("POST", "/things", "k", `{"amount_cents":1999}`); r.status != http.StatusCreated || a.runs.Load() != 1 {
		t.Fatalf("the corrected body: %d %s, %d runs", r.status, r.body, a.runs.Load())
	}
	// Case variants in different objects are different members.
	if r := a.do("POST", "/things", "k2", `{"a":{"x":1},"b":{"X":2}}`); r.status != http.StatusCreated {
		t.Fatalf("names in different objects: %d %s", r.status, r.body)
	}
}

// TestInvalidUTF8IsRefusedBeforeAnyClaim: invalid UTF-8 and unpaired
// surrogate escapes decode to U+FFFD, so "\xff" and "\xfe" (or "\ud800"
// and "\udbff") were one fingerprint and replayed each other. They are a
// 400 before any claim; a real U+FFFD and a surrogate pair are accepted.
// Without the refusal the second body is a replay (201).
func TestInvalidUTF8IsRefusedBeforeAnyClaim(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	for _, body := range []string{"{\"name\":\"\xff\"}", "{\"name\":\"\xfe\"}", "{\"na\xffme\":1}", `{"name":"\ud800"}`, `{"name":"\udbff"}`, `{"name":"\udc00\ud800"}`} {
		if detail := refused(t, a.do("POST", "/things", "k", body)); !strings.Contains(detail, "UTF-8") && !strings.Contains(detail, "surrogate") {
			t.Errorf("%q: detail %q", body, detail)
		}
	}
	if a.runs.Load() != 0 {
		t.Fatalf("the handler ran %d times", a.runs.Load())
	}
	first := a.do("POST", "/things", "k", `{"name":"\ufffd"}`)
	pair := a.do("POST", "/things", "k2", `{"name":"\ud83d\ude00"}`)
	same := a.do("POST", "/things", "k2", `{"name":"😀"}`)
	if first.status != http.StatusCreated || pair.status != http.StatusCreated || same.header.Get("Idempotency-Replayed") != "true" || same.body != pair.body {
		t.Fatalf("U+FFFD %d %s; a surrogate pair %d, then spelled out %d %s", first.status, first.body, pair.status, same.status, same.header.Get("Idempotency-Replayed"))
	}
	// Not JSON at all: fingerprinted as bytes, as before.
	if r := a.do("POST", "/things", "k3", "\xff\xfe", "Content-Type", "application/octet-stream"); r.status != http.StatusCreated {
		t.Fatalf("a binary body: %d %s", r.status, r.body)
	}
}

// TestDeepBodyIsAnInvalidBodyNotAnInvalidKey: a webhook keyed by a body
// field (JSONFieldKey) whose body nests deeper than encoding/json's own
// limit was answered "invalid Idempotency-Key", and one deeper than
// MaxJSONDepth but not that deep was taken and fingerprinted as raw bytes.
// Both are 400 invalid request body naming the limit, before any claim,
// whatever the Content-Type.
func TestDeepBodyIsAnInvalidBodyNotAnInvalidKey(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "", func(c *idemhttp.Config) { c.Key = idemhttp.JSONFieldKey("event_id") })
	for _, n := range []int{idemhttp.MaxJSONDepth + 1, 20_000} {
		body := `{"event_id":"evt-1","x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
		for _, ct := range []string{"application/json", "text/plain"} {
			detail := refused(t, a.do("POST", "/things", "", body, "Content-Type", ct))
			if !strings.Contains(detail, "nested deeper than 1000 levels") {
				t.Errorf("depth %d, %s: detail %q", n, ct, detail)
			}
		}
	}
	// The webhook variant of the case collision: keyed by "event_id",
	// read by the handler as "Event_ID".
	for _, ct := range []string{"application/json", "text/plain"} {
		refused(t, a.do("POST", "/things", "", `{"event_id":"a","Event_ID":"b"}`, "Content-Type", ct))
	}
	if a.runs.Load() != 0 {
		t.Fatalf("the handler ran %d times", a.runs.Load())
	}
	deepest := `{"event_id":"evt-1","x":` + strings.Repeat("[", idemhttp.MaxJSONDepth-1) + strings.Repeat("]", idemhttp.MaxJSONDepth-1) + `}`
	if r := a.do("POST", "/things", "", deepest); r.status != http.StatusCreated {
		t.Fatalf("%d levels: %d %s", idemhttp.MaxJSONDepth, r.status, r.body)
	}
}

// TestStoreOutageAndCancellationSayWhichTheyAre: with Redis down or not
// answering (a call cut by the store's command timeout, which once matched
// context.DeadlineExceeded and was answered "the request ended before it
// was processed"), the 503 says the store is unavailable; a request whose
// own context ends while the store is silent is "not processed".
func TestStoreOutageAndCancellationSayWhichTheyAre(t *testing.T) {
	t.Parallel()
	unavailable := func(t *testing.T, r response) {
		t.Helper()
		p := problem(t, r, http.StatusServiceUnavailable, idemhttp.ProblemStoreUnavailable)
		if p.Title != "Idempotency store unavailable" || !strings.Contains(p.Detail, "store is unavailable") || r.header.Get("Retry-After") == "" {
			t.Fatalf("a store outage answered %+v, Retry-After %q", p, r.header.Get("Retry-After"))
		}
	}
	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		a := newAPI(t, srv.Addr())
		srv.Kill()
		unavailable(t, a.do("POST", "/things", "k", `{}`))
		if a.runs.Load() != 0 {
			t.Fatalf("%d runs", a.runs.Load())
		}
	})
	t.Run("silent", func(t *testing.T) {
		t.Parallel()
		proxy := redistest.NewProxy(t, redistest.Addr(t))
		a := newAPI(t, proxy.Addr())
		proxy.SetFault(redistest.BlackHole)
		unavailable(t, a.do("POST", "/things", "k", `{}`))
		if a.runs.Load() != 0 {
			t.Fatalf("%d runs", a.runs.Load())
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		proxy := redistest.NewProxy(t, redistest.Addr(t))
		store, err := redisstore.New(redisstore.Config{Client: redistest.NewClient(t, proxy.Addr()), Namespace: redistest.Namespace(t), CommandTimeout: 5 * time.Second})
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
		mw, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, Code: "things", Anonymous: true})
		if err != nil {
			t.Fatal(err)
		}
		proxy.SetFault(redistest.BlackHole)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", "/things", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "k")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		ran := false
		mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })).ServeHTTP(rec, req)
		var p idemhttp.Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != http.StatusServiceUnavailable || ran ||
			p.Title != "Request not processed" || !strings.Contains(p.Detail, "cancelled or timed out") {
			t.Fatalf("a cancelled request: %d %s (ran %v)", rec.Code, rec.Body, ran)
		}
	})
}

// A malformed Idempotency-Key header is refused before the body is read:
// before, the whole body (up to MaxBodyBytes) was read and canonicalised
// first.
func TestHeaderKeyIsCheckedBeforeTheBody(t *testing.T) {
	t.Parallel()
	exec, dig := testDeps(t)
	mw, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: dig, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") }))
	for key, typ := range map[string]string{"": idemhttp.ProblemKeyMissing, "a,b": idemhttp.ProblemKeyInvalid, `"open`: idemhttp.ProblemKeyInvalid} {
		body := &bodyWatch{}
		req := httptest.NewRequest(http.MethodPost, "/things", body)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		problem(t, response{rec.Code, rec.Header(), rec.Body.String()}, http.StatusBadRequest, typ)
		if body.read.Load() {
			t.Errorf("key %q: the body was read", key)
		}
	}
}

// Data after the JSON value, which a handler decoding one value ignores,
// was fingerprinted as raw bytes and the request run: `{…}]` and `{…}`
// are now one 400, before any claim.
func TestDataAfterTheJSONValueIsRefused(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	for i, body := range []string{`{"a":1}]`, `{"a":1} {"a":2}`, `{"a":1}x`, `{"a":`} {
		key := fmt.Sprintf("k-%d", i)
		if detail := refused(t, a.do("POST", "/things", key, body)); body != `{"a":` && !strings.Contains(detail, "data follows the JSON value") {
			t.Errorf("%q: %s", body, detail)
		}
	}
	// Without a Content-Type, a body that is not JSON is bytes.
	if r := a.do("POST", "/things", "k-text", `{"a":1} and more`, "Content-Type", ""); r.status != http.StatusCreated {
		t.Fatalf("a text body: %d %s", r.status, r.body)
	}
	if a.runs.Load() != 1 {
		t.Fatalf("%d runs; want only the text body's", a.runs.Load())
	}
}
