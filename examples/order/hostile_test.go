package order_test

// The order API against one account reading another's orders, a sender
// flooding one order with events, and a client that sends as fast as it
// can (issue 46): the API's real handlers, ledger (SQLite) and Redis, with
// a stand-in for Temporal that places an order the way PlaceOrder's first
// step records it.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemhttp/webhook"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// fakeTemporal stands in for the Temporal client: ExecuteWorkflow records
// the order in the ledger under the workflow's ID, as PlaceOrder's first
// step does, and its run answers at once, completed; SignalWorkflow
// counts the signals each workflow gets.
type fakeTemporal struct {
	client.Client
	l       *ledger.Ledger
	mu      sync.Mutex
	signals map[string]int
}

func (f *fakeTemporal) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	in := args[0].(order.PlaceOrderInput)
	if _, err := f.l.CreateOrder(ctx, ledger.Order{ID: in.OrderID, CustomerID: in.CustomerID, Items: in.Items, AmountCents: in.AmountCents,
		Currency: in.Currency, WorkflowID: o.ID}); err != nil {
		return nil, err
	}
	return run{id: o.ID, res: order.OrderResult{OrderID: in.OrderID, Status: "completed", ChargedCents: in.AmountCents}}, nil
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, workflowID, _, _ string, _ any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals[workflowID]++
	return nil
}

func (f *fakeTemporal) signalled(workflowID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.signals[workflowID]
}

type run struct {
	client.WorkflowRun
	id  string
	res order.OrderResult
}

func (r run) GetID() string    { return r.id }
func (r run) GetRunID() string { return "run-1" }
func (r run) Get(_ context.Context, v any) error {
	*(v.(*order.OrderResult)) = r.res
	return nil
}

// shop is the order API on a ledger of its own, with accounts alice and
// bob, and a payment provider "psp".
type shop struct {
	t          *testing.T
	srv        *httptest.Server
	l          *ledger.Ledger
	tc         *fakeTemporal
	alice, bob string // their API keys
}

var pspSecret = []byte("hostile-test-webhook-secret-0123456789")

func newShop(t *testing.T, tune func(*order.APIConfig)) *shop {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, "sqlite:"+t.TempDir()+"/ledger.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	store, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("order hostile test secret, 32 b."), 1)
	if err != nil {
		t.Fatal(err)
	}
	s := &shop{t: t, l: l, tc: &fakeTemporal{l: l, signals: map[string]int{}}}
	cfg := order.APIConfig{Client: s.tc, Ledger: l, Executor: exec, Digester: dig,
		Webhooks: webhook.Config{Secrets: map[string][][]byte{"psp": {pspSecret}}}}
	if tune != nil {
		tune(&cfg)
	}
	api, err := order.NewAPI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	for _, acct := range []string{"alice", "bob"} {
		if err := l.CreateAccount(ctx, acct); err != nil {
			t.Fatal(err)
		}
		key, err := l.IssueAPIKey(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		if acct == "alice" {
			s.alice = key
		} else {
			s.bob = key
		}
	}
	return s
}

type answer struct {
	status int
	header http.Header
	body   string
}

// do sends a request with the API key (none when ""); a body to
// /webhooks/ is signed by psp.
func (s *shop) do(method, path, key, body string, headers ...string) answer {
	s.t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if strings.HasPrefix(path, "/webhooks/") {
		req.Header.Set(webhook.SignatureHeader, webhook.Sign(time.Now(), []byte(body), pspSecret))
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// place places an order as the account of key, and returns it.
func (s *shop) place(key, idemKey string) order.OrderResponse {
	s.t.Helper()
	r := s.do(http.MethodPost, "/orders", key, `{"customer_id":"c-1","items":[{"sku":"A-1","qty":1}],"amount_cents":100,"currency":"USD"}`,
		"Idempotency-Key", idemKey)
	var o order.OrderResponse
	if r.status != http.StatusCreated || json.Unmarshal([]byte(r.body), &o) != nil || o.OrderID == "" {
		s.t.Fatalf("placing an order: %d %s", r.status, r.body)
	}
	return o
}

// notFound checks r is the order API's 404, the one an unknown order
// gets.
func notFound(t *testing.T, what string, r answer) {
	t.Helper()
	var p idemhttp.Problem
	if r.status != http.StatusNotFound || json.Unmarshal([]byte(r.body), &p) != nil || p.Type != order.ProblemOrderNotFound {
		t.Errorf("%s: %d %s, want the 404 of an unknown order", what, r.status, r.body)
	}
}

// An order belongs to the account that placed it: every route that
// names an order answers another account 404, as for an order that does
// not exist (not 403, which would confirm it does), and the account that
// placed it gets it. Before, Bob's key read Alice's order, and GET
// /payments showed him her payment and charge IDs.
func TestAnOrderBelongsToTheAccountThatPlacedIt(t *testing.T) {
	t.Parallel()
	s := newShop(t, nil)
	o := s.place(s.alice, "k-1")
	for _, path := range []string{"/orders/" + o.OrderID, "/payments?order_id=" + o.OrderID} {
		if r := s.do(http.MethodGet, path, s.alice, ""); r.status != http.StatusOK {
			t.Errorf("alice, GET %s: %d %s", path, r.status, r.body)
		}
		notFound(t, "bob, GET "+path, s.do(http.MethodGet, path, s.bob, ""))
	}
	for _, path := range []string{"/orders/no-such-order", "/payments?order_id=no-such-order"} {
		notFound(t, "alice, GET "+path, s.do(http.MethodGet, path, s.alice, ""))
	}
	// Bob's order under the same Idempotency-Key is his own.
	if b := s.place(s.bob, "k-1"); b.OrderID == o.OrderID {
		t.Fatal("bob's order under alice's key is hers")
	} else {
		notFound(t, "alice, GET bob's order", s.do(http.MethodGet, "/orders/"+b.OrderID, s.alice, ""))
	}
	// An order the ledger has from elsewhere (the CLI, an older worker)
	// belongs to no account.
	if _, err := s.l.CreateOrder(context.Background(), ledger.Order{ID: "cli-order", CustomerID: "c", Items: []ledger.Item{{SKU: "A", Qty: 1}},
		AmountCents: 1, Currency: "USD", WorkflowID: "order-cli-order"}); err != nil {
		t.Fatal(err)
	}
	notFound(t, "alice, GET an order of no account", s.do(http.MethodGet, "/orders/cli-order", s.alice, ""))
}

// deliver sends psp's event id about orderID.
func (s *shop) deliver(id, orderID string) answer {
	s.t.Helper()
	return s.do(http.MethodPost, "/webhooks/payment-events", "", fmt.Sprintf(`{"event_id":%q,"order_id":%q,"type":"payment.captured"}`, id, orderID))
}

// One sender's events signalled into one order's workflow are bounded
// (order.MaxSignalledEventsPerSender), the ones past it recorded in the
// ledger with "signalled": false; the events recorded for one order are
// bounded (order.MaxEventsPerOrder), the ones past it refused 429 and not
// recorded. A redelivery is still its first answer. Before, 40 distinct
// event IDs for one order were each signalled into its workflow.
func TestWebhookEventsPerOrderAndSenderAreBounded(t *testing.T) {
	t.Parallel()
	s := newShop(t, nil)
	o := s.place(s.alice, "k-1")
	signalled, recorded, refused := 0, 0, 0
	for i := range order.MaxEventsPerOrder + 8 {
		r := s.deliver(fmt.Sprintf("evt-%d", i), o.OrderID)
		switch r.status {
		case http.StatusOK:
			recorded++
			var e order.PaymentEventResponse
			if err := json.Unmarshal([]byte(r.body), &e); err != nil {
				t.Fatal(err)
			}
			if e.Signalled {
				signalled++
			}
			if e.Limited == e.Signalled {
				t.Fatalf("event %d: %s, want it signalled or limited", i, r.body)
			}
		case http.StatusTooManyRequests:
			refused++
			var p idemhttp.Problem
			if json.Unmarshal([]byte(r.body), &p) != nil || p.Type != order.ProblemTooManyEvents {
				t.Fatalf("event %d: %s", i, r.body)
			}
		default:
			t.Fatalf("event %d: %d %s", i, r.status, r.body)
		}
	}
	if n := s.tc.signalled(o.WorkflowID); n != order.MaxSignalledEventsPerSender || signalled != n {
		t.Errorf("%d signals into the order's workflow (%d answered signalled), want %d", n, signalled, order.MaxSignalledEventsPerSender)
	}
	if recorded != order.MaxEventsPerOrder || refused != 8 {
		t.Errorf("%d events recorded and %d refused, want %d and 8", recorded, refused, order.MaxEventsPerOrder)
	}
	if es, err := s.l.WebhookEvents(context.Background(), o.OrderID); err != nil || len(es) != order.MaxEventsPerOrder {
		t.Errorf("the ledger holds %d events of the order (%v), want %d", len(es), err, order.MaxEventsPerOrder)
	}
	if r := s.deliver("evt-0", o.OrderID); r.status != http.StatusOK || r.header.Get("Idempotency-Replayed") != "true" || !strings.Contains(r.body, `"signalled":true`) {
		t.Errorf("the first event again: %d %v %s", r.status, r.header, r.body)
	}
}

// One account's requests are rate limited (order.DefaultAccountLimit: 20
// at once, then 10 a second): past it, 429 with Retry-After, and another
// account is served. Wrong API keys from one address are limited too
// (order.DefaultFailedAuthLimit: 10, then 1 a second), so a key cannot be
// guessed at the ledger's pace. Before, 300 wrong-key requests and 40
// orders of one account in 1.7 s met no limit.
func TestRequestsAreRateLimitedPerAccountAndKey(t *testing.T) {
	t.Parallel()
	s := newShop(t, nil)
	limited := func(what string, r answer) bool {
		t.Helper()
		if r.status != http.StatusTooManyRequests {
			return false
		}
		var p idemhttp.Problem
		if r.header.Get("Retry-After") == "" || json.Unmarshal([]byte(r.body), &p) != nil || p.Type != order.ProblemRateLimited {
			t.Fatalf("%s: a 429 without Retry-After or its problem: %v %s", what, r.header, r.body)
		}
		return true
	}
	// The first 429s come once the burst is spent: at the 21st and 11th
	// request, or a little later on a machine slow enough to refill.
	first := -1
	for i := range 80 {
		if limited("alice", s.do(http.MethodGet, "/orders/o-1", s.alice, "")) {
			first = i
			break
		}
	}
	if first < 20 {
		t.Fatalf("alice's first 429 came at request %d, want the 21st or later (0: none in 80)", first+1)
	}
	if r := s.do(http.MethodGet, "/orders/o-1", s.bob, ""); r.status != http.StatusNotFound {
		t.Fatalf("bob while alice is limited: %d %s", r.status, r.body)
	}
	first = -1
	for i := range 80 {
		if limited("wrong keys", s.do(http.MethodGet, "/orders/o-1", fmt.Sprintf("ofk_wrong_%d", i), "")) {
			first = i
			break
		}
	}
	if first < 10 {
		t.Fatalf("wrong keys from one address: the first 429 came at request %d, want the 11th or later (0: none in 80)", first+1)
	}
}

// The limits are configurable, and counted: an account's limit of 2 at
// once refuses its third request, and MetricRateLimited says which limit
// refused it; a negative Rate turns a limit off; a Rate without a Burst
// is refused.
func TestRateLimitsAreConfigurableAndCounted(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	s := newShop(t, func(c *order.APIConfig) {
		c.AccountLimit = order.RateLimit{Rate: 0.001, Burst: 2}
		c.FailedAuthLimit = order.RateLimit{Rate: -1}
		c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	})
	for i := range 3 {
		r := s.do(http.MethodGet, "/orders/o-1", s.alice, "")
		if want := map[bool]int{true: http.StatusTooManyRequests, false: http.StatusNotFound}[i == 2]; r.status != want {
			t.Fatalf("alice's request %d: %d, want %d", i+1, r.status, want)
		}
	}
	for i := range 30 {
		if r := s.do(http.MethodGet, "/orders/o-1", fmt.Sprintf("ofk_wrong_%d", i), ""); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong key %d with no limit on failures: %d", i+1, r.status)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counted := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == order.MetricRateLimited {
				for _, p := range sum.DataPoints {
					l, _ := p.Attributes.Value("limit")
					counted[l.AsString()] += p.Value
				}
			}
		}
	}
	if counted["account"] != 1 || len(counted) != 1 {
		t.Fatalf("%s = %v, want account 1", order.MetricRateLimited, counted)
	}
	ctx := context.Background()
	l, err := ledger.Open(ctx, "sqlite:"+t.TempDir()+"/ledger.db")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = order.NewAPI(order.APIConfig{Client: s.tc, Ledger: l, Executor: &idemstore.Executor{}, Digester: &onceflow.Digester{},
		AccountLimit: order.RateLimit{Rate: 5}})
	if err == nil || !strings.Contains(err.Error(), "AccountLimit") {
		t.Fatalf("a Rate without a Burst: %v", err)
	}
}

func TestParseRateLimit(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]order.RateLimit{"": {}, "off": {Rate: -1}, "10/20": {Rate: 10, Burst: 20}, " 0.5/1 ": {Rate: 0.5, Burst: 1}} {
		if got, err := order.ParseRateLimit(v); err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", v, got, err, want)
		}
	}
	for _, v := range []string{"10", "0/20", "-1/2", "10/0", "x/y", "10/20/30", "Inf/2"} {
		if _, err := order.ParseRateLimit(v); err == nil {
			t.Errorf("%q: no error", v)
		}
	}
}
