package e2e_test

// End-to-end tests of who may call the order API (issue 31): accounts
// and their API keys, signed webhooks, the bounds of what reaches the
// ledger and the workflows' histories. A real HTTP client against the
// worker's server, on a real Temporal server and Redis.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemhttp/webhook"
)

// TestOrderAPIRetryWithAnotherFormOfTheKeyMeetsTheSameOrder: the client
// retries its order with its API key written "bearer T", with whitespace
// around and between, and with a second key of its account (a rotation);
// each retry is the same request of the same account, replayed: one
// order, one gateway call, one payment. When the principal was the
// Authorization header's bytes each of these retries placed a second
// order and charged the card again. A request without a key, with a key
// the ledger does not know, or with a revoked one is a 401 before anything
// is claimed.
func TestOrderAPIRetryWithAnotherFormOfTheKeyMeetsTheSameOrder(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		a := newAPI(t, dsn)
		a.serve(order.GatewayConfig{}, 0)
		body := a.orderBody()
		first := a.post("k-auth", body)
		if first.status != http.StatusCreated {
			t.Fatalf("first: %v", first)
		}
		o := first.order(t)
		rotated := a.newKey(a.account)
		for _, authz := range []string{
			"bearer " + a.key,
			"BEARER " + a.key,
			"Bearer  " + a.key,
			" \tBearer\t" + a.key + "  ",
			"Bearer " + rotated,
		} {
			r := a.post("k-auth", body, "Authorization", authz)
			if r.status != http.StatusCreated || r.header.Get("Idempotency-Replayed") != "true" {
				t.Fatalf("Authorization %q: want the first order replayed, got %v", authz, r)
			}
			if got := r.order(t); got.OrderID != o.OrderID || got.WorkflowID != o.WorkflowID {
				t.Fatalf("Authorization %q: another order %+v, want %+v", authz, got, o)
			}
		}
		a.oneOrderOnce(o.OrderID)

		revoked := a.newKey(a.account)
		if _, err := a.l.RevokeAPIKey(context.Background(), revoked); err != nil {
			t.Fatal(err)
		}
		for _, authz := range []string{"", "Bearer", "Bearer ofk_not-a-key-of-anyone-000000", "Basic " + a.key, a.key, "Bearer " + revoked} {
			r := a.post("k-unauth", body, "Authorization", authz)
			r.problem(t, http.StatusUnauthorized, order.ProblemInvalidAPIKey)
			if r.header.Get("WWW-Authenticate") == "" {
				t.Fatalf("Authorization %q: a 401 without WWW-Authenticate: %v", authz, r)
			}
		}
		a.do(http.MethodGet, "/orders/"+o.OrderID, "", "Authorization", "").problem(t, http.StatusUnauthorized, order.ProblemInvalidAPIKey)
		a.do(http.MethodGet, "/payments?order_id="+o.OrderID, "", "Authorization", "").problem(t, http.StatusUnauthorized, order.ProblemInvalidAPIKey)
		if rows := a.orders(); len(rows) != 1 {
			t.Fatalf("unauthenticated requests placed orders: %+v", rows)
		}
	})
}

// TestOrderAPIRefusesControlCharactersInOrderText: a customer ID with a
// newline (it forged lines in the operators' output), an escape sequence
// (it reached their terminals) or a NUL byte (PostgreSQL refused it after
// the order was accepted, the workflow stuck) is a 400 invalid order
// before anything is claimed, on SQLite and PostgreSQL; so is a SKU with
// one. The key then serves a good order.
func TestOrderAPIRefusesControlCharactersInOrderText(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		a := newAPI(t, dsn)
		a.serve(order.GatewayConfig{}, 0)
		for _, customer := range []string{"c-1\nledger: forged line", "\x1b[31mc-1", "c-1\x00", "c-1\u202e"} {
			body, _ := json.Marshal(map[string]any{"customer_id": customer, "items": []map[string]any{{"sku": a.sku, "qty": 2}}, "amount_cents": 1999, "currency": "USD"})
			p := a.post("k-text", string(body)).problem(t, http.StatusBadRequest, order.ProblemInvalidOrder)
			if !strings.Contains(p.Detail, "customer_id must be printable text") || strings.ContainsAny(p.Detail, "\n\x1b\x00") {
				t.Fatalf("customer %q: %+v", customer, p)
			}
		}
		body, _ := json.Marshal(map[string]any{"customer_id": "c-1", "items": []map[string]any{{"sku": a.sku + "\n", "qty": 2}}, "amount_cents": 1999, "currency": "USD"})
		a.post("k-text", string(body)).problem(t, http.StatusBadRequest, order.ProblemInvalidOrder)
		if rows := a.orders(); len(rows) != 0 {
			t.Fatalf("refused orders were placed: %+v", rows)
		}
		good := a.post("k-text", a.orderBody())
		if good.status != http.StatusCreated || good.header.Get("Idempotency-Replayed") != "" {
			t.Fatalf("the key after the refusals: %v", good)
		}
	})
}

// TestOrderAPIWebhooksAreSignedAndBounded: a delivery must be signed by a
// known sender: unsigned, signed with an unknown secret, signed over
// another body or too long ago, it is a 401 and nothing is recorded (the
// endpoint took anyone's event, so anyone could squat a provider's event
// ID before the provider sent it). The sender is kept in the ledger as a
// digest under the workers' secret, neither its name nor a plain SHA-256.
// Every value that reaches the order's workflow history is bounded: an
// event type of 65 characters, or with a newline, an order ID over 128
// characters, a body over 64 KiB are refused (a large type pushed the saga
// towards Temporal's history limit).
func TestOrderAPIWebhooksAreSignedAndBounded(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.serve(order.GatewayConfig{}, 0)
	const route = "/webhooks/payment-events"
	event := func(id, orderID, typ string) string {
		b, _ := json.Marshal(order.PaymentEventRequest{EventID: id, OrderID: orderID, Type: typ})
		return string(b)
	}
	orderID := "order-" + a.sku
	body := event("evt-"+a.sku, orderID, "payment.captured")
	for name, sig := range map[string]string{
		"unsigned":        "",
		"unknown secret":  webhook.Sign(time.Now(), []byte(body), []byte("someone-else-secret-0123456789")),
		"another body":    webhook.Sign(time.Now(), []byte(body+" "), e2eSenders["psp"]),
		"stale":           webhook.Sign(time.Now().Add(-6*time.Minute), []byte(body), e2eSenders["psp"]), // past webhook.Config.Tolerance, 5 minutes
		"a bearer header": "",
	} {
		headers := []string{webhook.SignatureHeader, sig}
		if name == "a bearer header" {
			headers = append(headers, "Authorization", "Bearer psp-secret")
		}
		a.do(http.MethodPost, route, body, headers...).problem(t, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated)
	}
	if es, err := a.l.WebhookEvents(context.Background(), orderID); err != nil || len(es) != 0 {
		t.Fatalf("refused deliveries were recorded: %+v, %v", es, err)
	}

	for name, bad := range map[string]string{
		"long type":     event("evt-1-"+a.sku, orderID, strings.Repeat("t", order.MaxEventTypeLen+1)),
		"type newline":  event("evt-2-"+a.sku, orderID, "payment.captured\nforged"),
		"type escape":   event("evt-3-"+a.sku, orderID, "\x1b[2J"),
		"long order ID": event("evt-4-"+a.sku, strings.Repeat("o", order.MaxOrderIDLen+1), "payment.captured"),
		"order ID NUL":  event("evt-5-"+a.sku, "o\x00", "payment.captured"),
	} {
		p := a.do(http.MethodPost, route, bad).problem(t, http.StatusBadRequest, order.ProblemInvalidEvent)
		if name == "long type" && !strings.Contains(p.Detail, "type must be 1 to 64 characters") {
			t.Fatalf("%s: %+v", name, p)
		}
	}
	big := fmt.Sprintf(`{"event_id":"evt-big-%s","order_id":%q,"type":"payment.captured","pad":%q}`, a.sku, orderID, strings.Repeat("x", 64<<10)) // over webhook.Config.MaxBytes, 64 KiB
	a.do(http.MethodPost, route, big).problem(t, http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)

	ok := a.do(http.MethodPost, route, body)
	if ok.status != http.StatusOK {
		t.Fatalf("a signed delivery: %v", ok)
	}
	es, err := a.l.WebhookEvents(context.Background(), orderID)
	if err != nil || len(es) != 1 {
		t.Fatalf("the ledger's events: %+v, %v", es, err)
	}
	dig, err := onceflow.NewDigester([]byte(e2eSecret), 1)
	if err != nil {
		t.Fatal(err)
	}
	plain := sha256.Sum256([]byte("psp"))
	if got, want := es[0].Sender, dig.Digest("payment-event-sender", "psp").Hex; got != want || got == "psp" || got == hex.EncodeToString(plain[:]) {
		t.Fatalf("the sender is stored as %q; want the keyed digest %q", got, want)
	}
}

// devCredentials checks what the docs' curl commands send to a -dev
// worker: an order with the dev account's public key (and its retry with
// the key re-formatted: a replay), a key `worker api-key -dev` issues, a
// delivery signed with the dev provider's public secret, and an unsigned
// one refused.
func (d *devWorker) devCredentials() {
	d.t.Helper()
	send := func(path, body string, headers ...string) *http.Response {
		d.t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+d.httpAddr+path, strings.NewReader(body))
		if err != nil {
			d.t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			d.t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	body := `{"customer_id":"c-1","items":[{"sku":"A-1","qty":2}],"amount_cents":1999,"currency":"USD"}`
	if r := send("/orders", body, "Authorization", "Bearer "+order.DevAPIKey, "Idempotency-Key", `"order-dev-1"`); r.StatusCode != http.StatusCreated {
		d.t.Fatalf("an order with the dev key: %d", r.StatusCode)
	}
	if r := send("/orders", body, "Authorization", "bearer  "+order.DevAPIKey, "Idempotency-Key", `"order-dev-1"`); r.Header.Get("Idempotency-Replayed") != "true" {
		d.t.Fatalf("the dev key re-formatted: %d, not replayed", r.StatusCode)
	}
	key := strings.TrimSpace(d.run("api-key", "-dev", "-account", "alice"))
	if r := send("/orders", body, "Authorization", "Bearer "+key, "Idempotency-Key", `"order-dev-1"`); r.StatusCode != http.StatusCreated || r.Header.Get("Idempotency-Replayed") != "" {
		d.t.Fatalf("another account's key %q: %d %v, want its own order", key, r.StatusCode, r.Header)
	}
	event := `{"event_id":"evt-dev-1","order_id":"o-none","type":"payment.captured"}`
	if r := send("/webhooks/payment-events", event, webhook.SignatureHeader, webhook.Sign(time.Now(), []byte(event), []byte(order.DevWebhookSecret))); r.StatusCode != http.StatusOK {
		d.t.Fatalf("a delivery signed with the dev secret: %d", r.StatusCode)
	}
	if r := send("/webhooks/payment-events", event); r.StatusCode != http.StatusUnauthorized {
		d.t.Fatalf("an unsigned delivery: %d", r.StatusCode)
	}
}
