package e2e_test

// End-to-end tests of the order API against hostile and careless bodies
// (issue 19, the HTTP door): a real HTTP client against the worker's
// server, on a real Temporal server and Redis.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemhttp/webhook"
)

// TestOrderAPIRefusesBodiesItCannotFingerprintFaithfully: the same
// members with "Amount_Cents" and "amount_cents" in either order decode
// to two different orders (encoding/json: case-insensitive, the last one
// wins) but sorted by exact bytes shared a fingerprint, so the second was
// replayed the first's answer; invalid UTF-8 made two bodies one; an
// amount of 2^63-1 cents was charged. Each is a 400 before any claim, and
// nothing is placed; the key then serves a good order.
func TestOrderAPIRefusesBodiesItCannotFingerprintFaithfully(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.serve(order.GatewayConfig{}, 0)
	items := fmt.Sprintf(`"items":[{"sku":%q,"qty":2}]`, a.sku)
	for _, body := range []string{
		`{"customer_id":"c-1",` + items + `,"currency":"USD","Amount_Cents":100000,"amount_cents":1999}`,
		`{"customer_id":"c-1",` + items + `,"currency":"USD","amount_cents":1999,"Amount_Cents":100000}`,
		`{"customer_id":"c-1",` + items + `,"currency":"USD","amount_cents":1999,"amount_cents":100000}`,
		fmt.Sprintf(`{"customer_id":"c-1","items":[{"sku":%q,"qty":2,"QTY":200}],"currency":"USD","amount_cents":1999}`, a.sku),
		"{\"customer_id\":\"c-\xff\"," + items + `,"currency":"USD","amount_cents":1999}`,
		"{\"customer_id\":\"c-\xfe\"," + items + `,"currency":"USD","amount_cents":1999}`,
		`{"customer_id":"c-\udfff",` + items + `,"currency":"USD","amount_cents":1999}`,
	} {
		p := a.post("k-collide", body).problem(t, http.StatusBadRequest, idemhttp.ProblemInvalidRequest)
		if p.Title != "Invalid request body" {
			t.Fatalf("%q: %+v", body, p)
		}
	}
	for _, amount := range []string{"9223372036854775807", fmt.Sprint(order.MaxAmountCents + 1)} {
		body := `{"customer_id":"c-1",` + items + `,"currency":"USD","amount_cents":` + amount + `}`
		p := a.post("k-collide", body).problem(t, http.StatusBadRequest, order.ProblemInvalidOrder)
		if !strings.Contains(p.Detail, fmt.Sprintf("amount_cents must be at most %d", order.MaxAmountCents)) {
			t.Fatalf("amount %s: %+v", amount, p)
		}
	}
	if rows := a.orders(); len(rows) != 0 {
		t.Fatalf("refused bodies placed orders: %+v", rows)
	}
	good := a.post("k-collide", a.orderBody())
	if good.status != http.StatusCreated || good.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("the key after the refusals: %v", good)
	}
	if o := good.order(t); o.ChargedCents != 1999 {
		t.Fatalf("charged %d", o.ChargedCents)
	}
	a.oneOrderOnce(good.order(t).OrderID)
}

// TestOrderAPIWebhookSendersAreApart: two senders that use one event ID
// each get their own event (Redis scoped it per sender; the ledger keyed
// it by the ID alone, so the second sender got a fresh 200 with the first
// sender's order ID and its event was dropped). A body keyed by a field
// that nests too deep is an invalid body, not an invalid key; a body with
// "event_id" and "Event_ID" is refused.
func TestOrderAPIWebhookSendersAreApart(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.serve(order.GatewayConfig{}, 0)
	id := "evt-" + a.sku
	deliver := func(sender, orderID string) order.PaymentEventResponse {
		t.Helper()
		body := fmt.Sprintf(`{"event_id":%q,"order_id":%q,"type":"payment.captured"}`, id, orderID)
		r := a.do(http.MethodPost, "/webhooks/payment-events", body, webhook.SignatureHeader, webhook.Sign(time.Now(), []byte(body), e2eSenders[sender]))
		var e order.PaymentEventResponse
		if err := json.Unmarshal(r.body, &e); r.status != http.StatusOK || err != nil {
			t.Fatalf("%s: %v", sender, r)
		}
		return e
	}
	orderA, orderB := "order-a-"+a.sku, "order-b-"+a.sku
	if e := deliver("psp-a", orderA); e.OrderID != orderA || e.EventID != id {
		t.Fatalf("sender a: %+v", e)
	}
	if e := deliver("psp-b", orderB); e.OrderID != orderB || e.EventID != id {
		t.Fatalf("sender b, the same event ID: answered %+v; want its own order %s", e, orderB)
	}
	if e := deliver("psp-a", orderA); e.OrderID != orderA {
		t.Fatalf("sender a again: %+v", e)
	}
	for _, o := range []string{orderA, orderB} {
		es, err := a.l.WebhookEvents(context.Background(), o)
		if err != nil || len(es) != 1 || es[0].EventID != id {
			t.Fatalf("the ledger's events of %s: %+v, %v", o, es, err)
		}
	}

	deep := fmt.Sprintf(`{"event_id":%q,"order_id":"x","type":"y","x":%s%s}`, id+"-deep", strings.Repeat("[", 20_000), strings.Repeat("]", 20_000))
	p := a.do(http.MethodPost, "/webhooks/payment-events", deep).problem(t, http.StatusBadRequest, idemhttp.ProblemInvalidRequest)
	if !strings.Contains(p.Detail, "nested deeper than 1000 levels") {
		t.Fatalf("a deep body: %+v", p)
	}
	a.do(http.MethodPost, "/webhooks/payment-events", fmt.Sprintf(`{"event_id":%q,"Event_ID":"other","order_id":"x","type":"y"}`, id+"-case")).
		problem(t, http.StatusBadRequest, idemhttp.ProblemInvalidRequest)
}
