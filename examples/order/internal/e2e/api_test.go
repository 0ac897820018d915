package e2e_test

// End-to-end tests of the order API: a real HTTP client against the
// worker's real HTTP server, on a real Temporal server and Redis.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemhttp/webhook"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/worker"
)

// api is one test's order API: a shop whose worker serves it, with an
// account of the test's own and its API key, which do sends.
type api struct {
	*shop
	base    string
	sku     string
	account string
	key     string
}

// e2eSenders are the payment providers the tests' API knows, by name:
// their webhook secrets.
var e2eSenders = map[string][]byte{
	"psp":   []byte("e2e-webhook-secret-psp-0123456789"),
	"psp-a": []byte("e2e-webhook-secret-psp-a-0123456789"),
	"psp-b": []byte("e2e-webhook-secret-psp-b-0123456789"),
}

// e2eWebhooks is the webhook verifier's config of e2eSenders.
func e2eWebhooks() webhook.Config {
	c := webhook.Config{Secrets: map[string][][]byte{}}
	for sender, secret := range e2eSenders {
		c.Secrets[sender] = [][]byte{secret}
	}
	return c
}

func newAPI(t *testing.T, dsn string) *api {
	t.Helper()
	a := &api{shop: newShop(t, dsn, 0), sku: "sku-" + storetest.RandomHex(6)}
	a.account = "acct-" + a.sku
	a.key = a.newKey(a.account)
	return a
}

// newKey issues a key of account, creating the account.
func (a *api) newKey(account string) string {
	a.t.Helper()
	if err := a.l.CreateAccount(context.Background(), account); err != nil {
		a.t.Fatal(err)
	}
	key, err := a.l.IssueAPIKey(context.Background(), account)
	if err != nil {
		a.t.Fatal(err)
	}
	return key
}

// serve starts a worker that runs the order system and serves its API.
func (a *api) serve(g order.GatewayConfig, wait time.Duration) (stop func()) {
	a.t.Helper()
	w, stop := a.startStoppableWorker(func(r worker.Registry) error {
		gw, err := order.NewGateway(a.l, g)
		if err != nil {
			return err
		}
		if err := order.Register(r, a.l, gw); err != nil {
			return err
		}
		return order.RegisterAPI(r, a.l, wait, e2eWebhooks())
	})
	a.base = "http://" + w.HTTPAddr()
	return stop
}

// orderBody is an order of the test's own SKU, so stock is its own.
func (a *api) orderBody() string {
	return fmt.Sprintf(`{"customer_id":"c-1","items":[{"sku":%q,"qty":2}],"amount_cents":1999,"currency":"USD"}`, a.sku)
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; headers are name, value pairs (an empty value
// removes the header). It authenticates as the test's account (an
// Authorization header), and signs a webhook delivery as sender "psp" (a
// Webhook-Signature header), unless headers say otherwise.
func (a *api) do(method, path, body string, headers ...string) reply {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/webhooks/") {
		req.Header.Set(webhook.SignatureHeader, webhook.Sign(time.Now(), []byte(body), e2eSenders["psp"]))
	} else {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// post sends POST /orders. The key is made the test's own (the workflow
// ID derives from it, and every test shares one Temporal namespace):
// "k" becomes "k-<sku>", and "\"k\"" the sf-string of that.
func (a *api) post(key, body string, headers ...string) reply {
	a.t.Helper()
	if strings.HasSuffix(key, `"`) {
		key = strings.TrimSuffix(key, `"`) + "-" + a.sku + `"`
	} else {
		key += "-" + a.sku
	}
	return a.do(http.MethodPost, "/orders", body, append([]string{"Idempotency-Key", key}, headers...)...)
}

func (r reply) String() string { return fmt.Sprintf("%d %v %s", r.status, r.header, r.body) }

// order decodes a 201 or 202 answer.
func (r reply) order(t *testing.T) order.OrderResponse {
	t.Helper()
	var o order.OrderResponse
	if err := json.Unmarshal(r.body, &o); err != nil || o.OrderID == "" {
		t.Fatalf("not an order (%v): %v", err, r)
	}
	return o
}

// problem checks that r is a problem+json of the status and type.
func (r reply) problem(t *testing.T, status int, typ string) idemhttp.Problem {
	t.Helper()
	var p idemhttp.Problem
	if r.status != status || r.header.Get("Content-Type") != idemhttp.ContentTypeProblem {
		t.Fatalf("want a %d problem, got %v", status, r)
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem does not decode: %v: %v", err, r)
	}
	if p.Type != typ || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Fatalf("want problem %s, got %+v", typ, p)
	}
	return p
}

// orders lists the ledger's orders of the test's SKU (a PostgreSQL ledger
// is shared by every test and run).
func (a *api) orders() []ledger.Order {
	a.t.Helper()
	rows, err := a.l.RecentOrders(context.Background(), 100_000)
	if err != nil {
		a.t.Fatal(err)
	}
	var mine []ledger.Order
	for _, o := range rows {
		if len(o.Items) > 0 && o.Items[0].SKU == a.sku {
			mine = append(mine, o)
		}
	}
	return mine
}

// oneOrderOnce checks the ledger holds one order, charged by one gateway
// call and one payment row.
func (a *api) oneOrderOnce(orderID string) {
	a.t.Helper()
	b := a.books(order.PlaceOrderInput{OrderID: orderID, Items: []ledger.Item{{SKU: a.sku}}})
	if rows := a.orders(); len(rows) != 1 || rows[0].ID != orderID {
		a.t.Fatalf("want one order %s in the ledger, got %+v", orderID, rows)
	}
	if len(b.calls) != 1 || len(b.payments) != 1 || b.stock != ledger.DefaultStock-2 {
		a.t.Fatalf("want one gateway call, one payment, one reservation; got %+v", b)
	}
}

// TestOrderAPIAnswersEachStatus: 201 and its replay (the same JSON with
// keys reordered and other whitespace), 422, 400s, 413, 404, the reads,
// and the same key from another principal.
func TestOrderAPIAnswersEachStatus(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.serve(order.GatewayConfig{}, 0)

	first := a.post(`"k-1"`, a.orderBody())
	if first.status != http.StatusCreated || first.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("first: %v", first)
	}
	o := first.order(t)
	if o.Status != order.StatusCompleted || o.PaymentID == "" || o.ChargedCents != 1999 || !strings.HasPrefix(o.WorkflowID, order.WorkflowIDPrefix) ||
		first.header.Get("Location") != "/orders/"+o.OrderID {
		t.Fatalf("first: %+v, %v", o, first)
	}
	reordered := fmt.Sprintf("{ \"currency\": \"USD\",\n \"amount_cents\": 1.999e3, \"items\": [ {\"qty\": 2, \"sku\": %q} ], \"customer_id\": \"c-1\" }", a.sku)
	if p := a.post("k-1", reordered); p.status != http.StatusBadRequest { // 1.999e3 is no int64: refused before the key
		t.Fatalf("a float amount: %v", p)
	}
	reordered = strings.Replace(reordered, "1.999e3", "1999", 1)
	replay := a.post("k-1", reordered) // a bare token names the same key as the sf-string
	if replay.status != http.StatusCreated || replay.header.Get("Idempotency-Replayed") != "true" || !bytes.Equal(replay.body, first.body) ||
		replay.header.Get("Location") != first.header.Get("Location") {
		t.Fatalf("replay: %v, first %v", replay, first)
	}

	other := strings.Replace(a.orderBody(), `"qty":2`, `"qty":3`, 1)
	a.post("k-1", other).problem(t, http.StatusUnprocessableEntity, idemhttp.ProblemKeyReused)

	a.post("k-2", `{"customer_id":"c-1","items":[],"amount_cents":0,"currency":"US"}`).problem(t, http.StatusBadRequest, order.ProblemInvalidOrder)
	a.post("k-2", `{"customer_id":"c-1","surprise":1}`).problem(t, http.StatusBadRequest, order.ProblemInvalidOrder)
	a.do(http.MethodPost, "/orders", a.orderBody()).problem(t, http.StatusBadRequest, idemhttp.ProblemKeyMissing)
	a.post(`"unterminated`, a.orderBody()).problem(t, http.StatusBadRequest, idemhttp.ProblemKeyInvalid)
	a.post(strings.Repeat("k", 250), a.orderBody()).problem(t, http.StatusBadRequest, idemhttp.ProblemKeyInvalid)
	form := a.do(http.MethodPost, "/orders", a.orderBody(), "Idempotency-Key", "k-form-"+a.sku, "Content-Type", "application/x-www-form-urlencoded")
	form.problem(t, http.StatusUnsupportedMediaType, order.ProblemUnsupportedMediaType)
	big := `{"customer_id":"` + strings.Repeat("c", 1<<20) + `"}` // over idemhttp.Config.MaxBodyBytes' default, 1 MiB
	a.post("k-3", big).problem(t, http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)
	if rows := a.orders(); len(rows) != 1 {
		t.Fatalf("refused requests placed orders: %+v", rows)
	}

	got := a.do(http.MethodGet, "/orders/"+o.OrderID, "")
	var row ledger.Order
	if err := json.Unmarshal(got.body, &row); got.status != http.StatusOK || err != nil ||
		row.ID != o.OrderID || row.Status != order.StatusCompleted || row.PaymentID != o.PaymentID || row.WorkflowID != o.WorkflowID {
		t.Fatalf("GET /orders/%s: %v", o.OrderID, got)
	}
	a.do(http.MethodGet, "/orders/no-such-order", "").problem(t, http.StatusNotFound, order.ProblemOrderNotFound)
	pays := a.do(http.MethodGet, "/payments?order_id="+o.OrderID, "")
	var pr order.PaymentsResponse
	if err := json.Unmarshal(pays.body, &pr); pays.status != http.StatusOK || err != nil ||
		len(pr.Payments) != 1 || pr.Payments[0].ID != o.PaymentID || pr.GatewayCalls != 1 {
		t.Fatalf("GET /payments: %v", pays)
	}
	a.do(http.MethodGet, "/payments", "").problem(t, http.StatusBadRequest, idemhttp.ProblemInvalidRequest)

	// The same key from another account is another request.
	theirs := a.post("k-1", a.orderBody(), "Authorization", "Bearer "+a.newKey("other-"+a.account))
	if theirs.status != http.StatusCreated || theirs.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("another principal: %v", theirs)
	}
	if to := theirs.order(t); to.OrderID == o.OrderID || to.WorkflowID == o.WorkflowID {
		t.Fatalf("another principal's order is the first one: %+v", to)
	}
	if rows := a.orders(); len(rows) != 2 {
		t.Fatalf("want two orders, got %+v", rows)
	}
}

// TestOrderAPIConcurrentRequestsPlaceOneOrder: 50 concurrent POSTs of one
// key and body place one order: one workflow (one order row), one gateway
// call, one payment; every answer is the 201, a 409 with Retry-After, a
// 202, a 429 with Retry-After past the account's rate limit, or, on a
// machine so loaded that a Redis call outlasts the store's command
// timeout (a cold CI run compiles beside it), a 503 with Retry-After: the
// request was not processed, which changes nothing of the one order.
func TestOrderAPIConcurrentRequestsPlaceOneOrder(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		a := newAPI(t, dsn)
		a.serve(order.GatewayConfig{Latency: 300 * time.Millisecond}, 0)
		body := a.orderBody()
		replies := make([]reply, 50)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Go(func() { replies[i] = a.post("same-key", body) })
		}
		wg.Wait()
		var created []order.OrderResponse
		counts := map[int]int{}
		for _, r := range replies {
			counts[r.status]++
			switch r.status {
			case http.StatusCreated:
				created = append(created, r.order(t))
			case http.StatusConflict:
				r.problem(t, http.StatusConflict, idemhttp.ProblemInProgress)
				if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
					t.Fatalf("409 without a Retry-After: %v", r)
				}
			case http.StatusAccepted:
			case http.StatusServiceUnavailable:
				r.problem(t, http.StatusServiceUnavailable, idemhttp.ProblemStoreUnavailable)
				if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
					t.Fatalf("503 without a Retry-After: %v", r)
				}
			case http.StatusTooManyRequests: // past the account's rate limit (20 at once): not processed
				r.problem(t, http.StatusTooManyRequests, order.ProblemRateLimited)
				if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
					t.Fatalf("429 without a Retry-After: %v", r)
				}
			default:
				t.Fatalf("unexpected answer %v", r)
			}
		}
		if len(created) == 0 {
			t.Fatalf("no 201 among %v", counts)
		}
		for _, o := range created[1:] {
			if o != created[0] {
				t.Fatalf("two orders answered: %+v and %+v", created[0], o)
			}
		}
		a.oneOrderOnce(created[0].OrderID)
		t.Logf("answers: %v", counts)
	})
}

// TestOrderAPIPreferWaitGetsTheStoredAnswer: while the first request runs,
// another gets a 409 at once and one with Prefer: wait=5 gets the first
// one's 201 when it is stored.
func TestOrderAPIPreferWaitGetsTheStoredAnswer(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.serve(order.GatewayConfig{Latency: 1500 * time.Millisecond}, 0)
	body := a.orderBody()
	firstc := make(chan reply, 1)
	go func() { firstc <- a.post("k-wait", body) }()
	a.waitFor("the order's row", func() bool { return len(a.orders()) == 1 })

	busy := a.post("k-wait", body)
	busy.problem(t, http.StatusConflict, idemhttp.ProblemInProgress)
	if busy.header.Get("Retry-After") == "" {
		t.Fatalf("409 without Retry-After: %v", busy)
	}
	// The longest wait the API grants (idemhttp.Config.MaxWait, 10s): the
	// order's four steps take several seconds on a loaded 2-core machine.
	waited := a.post("k-wait", body, "Prefer", "wait=10")
	first := <-firstc
	if first.status != http.StatusCreated || waited.status != http.StatusCreated || !bytes.Equal(waited.body, first.body) ||
		waited.header.Get("Idempotency-Replayed") != "true" || waited.header.Get("Preference-Applied") != "wait=10" {
		t.Fatalf("first %v; waited %v", first, waited)
	}
	a.oneOrderOnce(first.order(t).OrderID)
}

// TestOrderAPIAcceptsASlowOrder: an order slower than the API's wait is
// answered 202 with its Location (not stored); the order goes on, and a
// retry with the key after it ended answers its 201, then replays it.
func TestOrderAPIAcceptsASlowOrder(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.serve(order.GatewayConfig{Latency: time.Second}, 200*time.Millisecond)
	accepted := a.post("k-slow", a.orderBody())
	o := accepted.order(t)
	if accepted.status != http.StatusAccepted || o.Status != order.StatusProcessing || accepted.header.Get("Location") != "/orders/"+o.OrderID ||
		accepted.header.Get("Retry-After") == "" {
		t.Fatalf("accepted: %v", accepted)
	}
	// Polled at 5 a second, within the account's rate limit (10 a
	// second), as a client that honours the 202's Retry-After is.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var row ledger.Order
		r := a.do(http.MethodGet, accepted.header.Get("Location"), "")
		if r.status == http.StatusOK && json.Unmarshal(r.body, &row) == nil && row.Status == order.StatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the order to complete: %v", r)
		}
	}
	again := a.post("k-slow", a.orderBody())
	if again.status != http.StatusCreated || again.header.Get("Idempotency-Replayed") != "" || again.order(t).OrderID != o.OrderID {
		t.Fatalf("after completion: %v", again)
	}
	replay := a.post("k-slow", a.orderBody())
	if replay.status != http.StatusCreated || replay.header.Get("Idempotency-Replayed") != "true" || !bytes.Equal(replay.body, again.body) {
		t.Fatalf("replay: %v", replay)
	}
	a.oneOrderOnce(o.OrderID)
}

// TestOrderAPISurvivesRestartAndRedisLoss: a retry after the worker
// restarted replays the stored answer; a retry after FLUSHALL runs the
// handler again, which attaches to the same (finished) workflow: the same
// order, one gateway call, one payment.
func TestOrderAPISurvivesRestartAndRedisLoss(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	srv := redistest.Start(t) // a Redis of its own, to flush
	a.redis, a.rdb = srv.Addr(), redistest.NewClient(t, srv.Addr())
	stop := a.serve(order.GatewayConfig{}, 0)
	first := a.post("k-restart", a.orderBody())
	o := first.order(t)
	if first.status != http.StatusCreated {
		t.Fatalf("first: %v", first)
	}
	stop()
	a.serve(order.GatewayConfig{}, 0)
	replay := a.post("k-restart", a.orderBody())
	if replay.status != http.StatusCreated || replay.header.Get("Idempotency-Replayed") != "true" || !bytes.Equal(replay.body, first.body) {
		t.Fatalf("after a restart: %v", replay)
	}
	if err := a.rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	lost := a.post("k-restart", a.orderBody())
	if lost.status != http.StatusCreated || lost.header.Get("Idempotency-Replayed") != "" || lost.order(t) != o {
		t.Fatalf("after FLUSHALL: %v, first %+v", lost, o)
	}
	a.oneOrderOnce(o.OrderID)
}

// TestOrderAPIFailsClosedWithoutRedis: with Redis down the API answers 503
// with Retry-After, saying the idempotency store is unavailable, and
// starts nothing; with Redis back the same request places the order.
func TestOrderAPIFailsClosedWithoutRedis(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	srv := redistest.Start(t)
	a.redis, a.rdb = srv.Addr(), redistest.NewClient(t, srv.Addr())
	a.serve(order.GatewayConfig{}, 0)
	srv.Kill()
	down := a.post("k-down", a.orderBody())
	p := down.problem(t, http.StatusServiceUnavailable, idemhttp.ProblemStoreUnavailable)
	if down.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", down)
	}
	// It says the store is down, not that the request ended early.
	if p.Title != "Idempotency store unavailable" || !strings.Contains(p.Detail, "store is unavailable") {
		t.Fatalf("a store outage answered %+v", p)
	}
	if rows := a.orders(); len(rows) != 0 {
		t.Fatalf("an order was placed with Redis down: %+v", rows)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var back reply
	a.waitFor("Redis to answer the worker again", func() bool {
		back = a.post("k-down", a.orderBody())
		// A 429: polled past the account's rate limit, not processed.
		return back.status != http.StatusServiceUnavailable && back.status != http.StatusTooManyRequests
	})
	if back.status != http.StatusCreated {
		t.Fatalf("with Redis back: %v", back)
	}
	a.oneOrderOnce(back.order(t).OrderID)
}

// TestOrderAPIWebhookIsRecordedAndSignalledOnce: a payment event
// delivered five times, twice concurrently, is recorded once in the
// ledger and signalled once to the order's workflow.
func TestOrderAPIWebhookIsRecordedAndSignalledOnce(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.serve(order.GatewayConfig{Latency: 3 * time.Second}, 0)
	async := a.post("k-hook", a.orderBody(), "Prefer", "respond-async")
	o := async.order(t)
	if async.status != http.StatusAccepted || async.header.Get("Preference-Applied") != "respond-async" || o.Status != order.StatusProcessing {
		t.Fatalf("respond-async: %v", async)
	}
	a.waitFor("the order's row", func() bool { return len(a.orders()) == 1 })
	event := fmt.Sprintf(`{"event_id":"evt-%s","order_id":%q,"type":"payment.captured","amount_cents":1999}`, a.sku, o.OrderID)
	deliver := func() reply {
		return a.do(http.MethodPost, "/webhooks/payment-events", event)
	}
	var replies []reply
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			r := deliver()
			mu.Lock()
			replies = append(replies, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	for range 3 {
		replies = append(replies, deliver())
	}
	fresh := 0
	for _, r := range replies {
		switch {
		case r.status == http.StatusOK && r.header.Get("Idempotency-Replayed") == "":
			fresh++
			fallthrough
		case r.status == http.StatusOK:
			var e order.PaymentEventResponse
			if err := json.Unmarshal(r.body, &e); err != nil || !e.Signalled || e.OrderID != o.OrderID {
				t.Fatalf("delivery: %v", r)
			}
		case r.status == http.StatusConflict:
			r.problem(t, http.StatusConflict, idemhttp.ProblemInProgress)
		default:
			t.Fatalf("delivery: %v", r)
		}
	}
	if fresh != 1 {
		t.Fatalf("want one delivery handled, got %d: %v", fresh, replies)
	}
	a.do(http.MethodPost, "/webhooks/payment-events", `{"order_id":"x","type":"y"}`).problem(t, http.StatusBadRequest, idemhttp.ProblemKeyMissing)
	a.do(http.MethodPost, "/webhooks/payment-events", `{"event_id":"e","type":"y"}`).problem(t, http.StatusBadRequest, order.ProblemInvalidEvent)

	run := a.tc.GetWorkflow(context.Background(), o.WorkflowID, "")
	if res := a.result(run); res.Status != order.StatusCompleted {
		t.Fatalf("order: %+v", res)
	}
	signals := 0
	for _, e := range a.history(run).GetEvents() {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED &&
			e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == order.PaymentEventSignal {
			signals++
		}
	}
	events, err := a.l.WebhookEvents(context.Background(), o.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	if signals != 1 || len(events) != 1 || events[0].SignalledAt.IsZero() {
		t.Fatalf("want one signal and one recorded event; got %d signals, events %+v", signals, events)
	}
	q, err := a.tc.QueryWorkflow(context.Background(), o.WorkflowID, "", order.PaymentEventsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var seen []order.PaymentEvent
	if err := q.Get(&seen); err != nil || len(seen) != 1 || seen[0].Type != "payment.captured" {
		t.Fatalf("the workflow's events: %+v (%v)", seen, err)
	}
}
