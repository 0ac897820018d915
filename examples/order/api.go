package order

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemhttp/webhook"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/worker"
)

// The order API's operation codes: each route behind the idempotency
// middleware has its own records.
const (
	OrdersAPICode   onceflow.OperationCode = "orders-api"
	WebhooksAPICode onceflow.OperationCode = "payment-webhooks"
)

// OrdersRoute is the route pattern of POST /orders: part of every order
// key's record (operator.HTTPRef), so the tools that look an HTTP key up
// use it too.
const OrdersRoute = "POST /orders"

// Problem types of the order API, besides idemhttp's.
const (
	ProblemInvalidOrder   = "urn:onceflow:problem:invalid-order"
	ProblemInvalidEvent   = "urn:onceflow:problem:invalid-payment-event"
	ProblemOrderNotFound  = "urn:onceflow:problem:order-not-found"
	ProblemOrderFailed    = "urn:onceflow:problem:order-failed"
	ProblemBackendFailure = "urn:onceflow:problem:backend-unavailable"
)

// DefaultAPIWait is how long POST /orders waits for the order to end
// before it answers 202.
const DefaultAPIWait = 10 * time.Second

// WorkflowIDPrefix starts the workflow ID of an order placed through the
// API; the rest is the digest of the request's record (idemhttp.Info).
const WorkflowIDPrefix = "order-http-"

// memoOrderID is the memo field that names a workflow's order.
const memoOrderID = "order_id"

// APIConfig configures the order API. Empty fields take their defaults.
type APIConfig struct {
	// Client starts and signals the workflows. Required.
	Client client.Client
	// Ledger answers the reads and records the webhook events. Required.
	Ledger *ledger.Ledger
	// Executor and Digester run the idempotency middleware. Required.
	Executor *idemstore.Executor
	Digester *onceflow.Digester
	// TaskQueue is where PlaceOrder runs. Default "onceflow", the worker's
	// (worker.Config.TaskQueue).
	TaskQueue string
	// Wait bounds how long POST /orders waits for the order's result
	// before it answers 202 with the order's Location. Default
	// DefaultAPIWait; it must stay well below the lease, which the
	// middleware renews meanwhile.
	Wait time.Duration
	// Webhooks verifies the payment providers' signed deliveries to
	// POST /webhooks/payment-events (package webhook): each sender's name
	// and secrets. Without any sender every delivery is refused (401).
	// Its MaxBytes (default 64 KiB) bounds an event's body.
	Webhooks webhook.Config
	// AccountLimit bounds one account's requests, every key and route of
	// it together; APIKeyLimit the requests that present one API key
	// (known or not, before it is looked up); FailedAuthLimit one client
	// address's requests without a valid key. Past one: 429 with
	// Retry-After, before the body is read (MetricRateLimited counts
	// them). Defaults DefaultAccountLimit, DefaultAPIKeyLimit,
	// DefaultFailedAuthLimit; a negative Rate turns one off.
	AccountLimit, APIKeyLimit, FailedAuthLimit RateLimit
	// MeterProvider receives the API's metrics (MetricRateLimited,
	// MetricWebhookEventsLimited). Default: none.
	MeterProvider metric.MeterProvider
	// Logger receives the API's lines. Default: discard.
	Logger *slog.Logger
}

// API is the order API: POST /orders, GET /orders/{id}, GET /payments and
// POST /webhooks/payment-events.
//
// Every route but the webhook's needs an API key of an account in the
// ledger (ledger.IssueAPIKey), sent as Authorization: Bearer <key>; the
// account ID is the principal that scopes Idempotency-Keys, so a client
// that retries with its key re-formatted ("bearer", other whitespace) or
// with another key of its account meets the same record. An order belongs
// to the account that placed it: the routes that name an order answer
// another account 404, as for an order that does not exist. Requests are
// rate limited per account, per API key and, without a valid key, per
// client address (APIConfig.AccountLimit and the like). The webhook
// route needs a delivery signed by a known sender (package webhook); the
// sender is the principal that scopes event IDs.
type API struct {
	cfg      APIConfig
	orders   *idemhttp.Middleware
	webhooks *idemhttp.Middleware
	verifier *webhook.Verifier
	limits   *limits
}

// NewAPI validates cfg and returns the API.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.Client == nil || cfg.Ledger == nil || cfg.Executor == nil || cfg.Digester == nil {
		return nil, errors.New("order: APIConfig.Client, Ledger, Executor and Digester are required")
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = worker.DefaultConfig().TaskQueue
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultAPIWait
	}
	if cfg.Wait < 0 {
		return nil, errors.New("order: APIConfig.Wait must not be negative")
	}
	verifier, err := webhook.New(cfg.Webhooks)
	if err != nil {
		return nil, fmt.Errorf("order: APIConfig.Webhooks: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	limits, err := newLimits(cfg)
	if err != nil {
		return nil, err
	}
	orders, err := idemhttp.New(idemhttp.Config{
		Executor: cfg.Executor, Digester: cfg.Digester, Code: OrdersAPICode,
		Principal: idemhttp.ContextPrincipal, Validate: validateOrder, Logger: cfg.Logger,
		// The handler starts the order's workflow by ID (USE_EXISTING) and
		// reads it: running it again attaches to the same order.
		IdempotentHandler: true,
	})
	if err != nil {
		return nil, err
	}
	webhooks, err := idemhttp.New(idemhttp.Config{
		Executor: cfg.Executor, Digester: cfg.Digester, Code: WebhooksAPICode,
		Principal: idemhttp.ContextPrincipal, Key: idemhttp.JSONFieldKey("event_id"), Validate: validateEvent, Logger: cfg.Logger,
		MaxBodyBytes: verifier.MaxBytes(),
		// The event is recorded by its ID (UNIQUE) and the workflow keeps
		// one per ID: delivering it again changes nothing.
		IdempotentHandler: true,
	})
	if err != nil {
		return nil, err
	}
	return &API{cfg: cfg, orders: orders, webhooks: webhooks, verifier: verifier, limits: limits}, nil
}

// RegisterAPI serves the order API on the worker's HTTP mux (-http), with
// the worker's client, executor and task queue, waiting up to wait
// (APIConfig.Wait) and verifying webhooks with hooks (APIConfig.Webhooks).
func RegisterAPI(r worker.Registry, l *ledger.Ledger, wait time.Duration, hooks webhook.Config) error {
	return RegisterAPIConfig(r, APIConfig{Ledger: l, Wait: wait, Webhooks: hooks})
}

// RegisterAPIConfig serves the order API of cfg on the worker's HTTP mux;
// the fields cfg leaves empty of Client, Executor, Digester, TaskQueue,
// MeterProvider and Logger are the worker's.
func RegisterAPIConfig(r worker.Registry, cfg APIConfig) error {
	if cfg.Client == nil {
		cfg.Client = r.Client
	}
	if cfg.Executor == nil {
		cfg.Executor = r.Executor
	}
	if cfg.Digester == nil {
		cfg.Digester = r.Digester
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = r.TaskQueue
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = r.MeterProvider
	}
	if cfg.Logger == nil {
		cfg.Logger = r.Logger
	}
	api, err := NewAPI(cfg)
	if err != nil {
		return err
	}
	api.Register(r.HTTP)
	return nil
}

// Register adds the API's routes to mux. Every answer says
// X-Content-Type-Options: nosniff.
func (a *API) Register(mux *http.ServeMux) {
	mux.Handle(OrdersRoute, nosniff(a.authenticate(a.orders.Handler(http.HandlerFunc(a.createOrder)))))
	mux.Handle("GET /orders/{id}", nosniff(a.authenticate(http.HandlerFunc(a.getOrder))))
	mux.Handle("GET /payments", nosniff(a.authenticate(http.HandlerFunc(a.listPayments))))
	mux.Handle("POST /webhooks/payment-events", nosniff(a.verifier.Handler(a.webhooks.Handler(http.HandlerFunc(a.paymentEvent)))))
}

// nosniff says X-Content-Type-Options: nosniff on next's answers: a
// browser never guesses a type the API did not send.
func nosniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// ProblemInvalidAPIKey (401) is the problem type of a request without a
// valid API key.
const ProblemInvalidAPIKey = idemhttp.ProblemUnauthenticated

// bearerToken reads Authorization: Bearer <token>: the scheme in any case
// (RFC 9110 §11.1), whitespace around and between tolerated.
func bearerToken(h string) (string, bool) {
	h = strings.TrimSpace(h)
	i := strings.IndexAny(h, " \t")
	if i < 0 || !strings.EqualFold(h[:i], "Bearer") {
		return "", false
	}
	token := strings.TrimSpace(h[i:])
	return token, token != ""
}

// authenticate finds the account of the request's API key in the ledger
// and names it in the context (idemhttp.WithPrincipal): the principal
// that scopes the account's Idempotency-Keys is the account, never the
// credential's bytes. No key, or one the ledger does not know (or has
// revoked): 401, before the body is read. The ledger unreachable: 503.
// Past a rate limit: 429 with Retry-After, before the body is read: the
// key's (APIKeyLimit) before the ledger is asked, the address's
// (FailedAuthLimit) in place of a 401, the account's (AccountLimit) once
// it is known.
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		key, ok := bearerToken(r.Header.Get("Authorization"))
		account := ""
		if ok {
			if wait := a.limits.keys.take(keyDigest(key), now); wait > 0 {
				a.limits.tooMany(w, r, "api_key", wait)
				return
			}
			var err error
			account, ok, err = a.cfg.Ledger.AccountByAPIKey(r.Context(), key)
			if err != nil {
				a.cfg.Logger.WarnContext(r.Context(), "order API: looking an API key up failed", "err", err)
				refuse(w, r, &idemhttp.Problem{Type: idemhttp.ProblemAuthUnavailable, Title: "Authentication unavailable",
					Status: http.StatusServiceUnavailable, RetryAfter: time.Second,
					Detail: "the API key could not be checked, and the request was not processed; retry it with the same Idempotency-Key"})
				return
			}
		}
		if !ok {
			if wait := a.limits.failures.take(clientAddr(r.RemoteAddr), now); wait > 0 {
				a.limits.tooMany(w, r, "failed_auth", wait)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="orders"`)
			refuse(w, r, &idemhttp.Problem{Type: ProblemInvalidAPIKey, Title: "Unauthenticated", Status: http.StatusUnauthorized,
				Detail: "send your account's API key as Authorization: Bearer KEY (worker api-key issues one; -dev logs its own), and the same Idempotency-Key when you retry"})
			return
		}
		if wait := a.limits.accounts.take(account, now); wait > 0 {
			a.limits.tooMany(w, r, "account", wait)
			return
		}
		next.ServeHTTP(w, r.WithContext(idemhttp.WithPrincipal(r.Context(), account)))
	})
}

// OrderRequest is the body of POST /orders. Each member at most once (a
// name twice, or two names that differ only in case, is a 400 before any
// claim: idemhttp.CanonicalJSON).
type OrderRequest struct {
	CustomerID string        `json:"customer_id"`
	Items      []ledger.Item `json:"items"`
	// AmountCents is 1 to MaxAmountCents.
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// OrderResponse is the answer of POST /orders: how the order ended
// (201), or status "processing" (202).
type OrderResponse struct {
	OrderResult
	WorkflowID string `json:"workflow_id"`
}

// StatusProcessing is the status a 202 answer reports.
const StatusProcessing = "processing"

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

// ProblemUnsupportedMediaType is the problem type of a body that is not
// declared as JSON.
const ProblemUnsupportedMediaType = "urn:onceflow:problem:unsupported-media-type"

// jsonOnly refuses a body not sent as application/json: the fingerprint
// canonicalises JSON only when the request says it is JSON.
func jsonOnly(r *http.Request) *idemhttp.Problem {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" || strings.HasSuffix(ct, "+json") {
		return nil
	}
	return &idemhttp.Problem{Type: ProblemUnsupportedMediaType, Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType,
		Detail: "send the body as JSON, with Content-Type: application/json"}
}

// validateOrder refuses a malformed order before anything is claimed, so
// a corrected order may reuse its key.
func validateOrder(r *http.Request, body []byte) *idemhttp.Problem {
	if p := jsonOnly(r); p != nil {
		return p
	}
	var req OrderRequest
	err := decodeStrict(body, &req)
	if err == nil {
		in := PlaceOrderInput{OrderID: "-", CustomerID: req.CustomerID, Items: req.Items, AmountCents: req.AmountCents, Currency: req.Currency}
		err = in.Validate()
	}
	if err == nil {
		return nil
	}
	return &idemhttp.Problem{Type: ProblemInvalidOrder, Title: "Invalid order", Status: http.StatusBadRequest,
		Detail: "fix the order and send it again (the same key may be reused): " + strings.ReplaceAll(err.Error(), "\n", "; ")}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// backendProblem is the answer when Temporal or the ledger fails: a 503,
// which the middleware does not store, so a retry with the same key runs
// again (and attaches to the same workflow).
func backendProblem(what string, err error) *idemhttp.Problem {
	return &idemhttp.Problem{Type: ProblemBackendFailure, Title: "Service unavailable", Status: http.StatusServiceUnavailable,
		Detail: what + " failed (" + err.Error() + "); retry with the same Idempotency-Key", RetryAfter: time.Second}
}

// createOrder starts the order's workflow, named by its record's
// digest, and waits a while for its result (not with Prefer:
// respond-async, which gets the 202 at once). The workflow ID is the second
// line of defence: a retry that Redis has forgotten attaches to the same
// workflow (USE_EXISTING) or finds it finished (REJECT_DUPLICATE) and
// answers its result; the ledger's UNIQUE keys are the third.
func (a *API) createOrder(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	info, ok := idemhttp.InfoFrom(ctx)
	if !ok {
		idemhttp.WriteProblem(w, &idemhttp.Problem{Type: ProblemBackendFailure, Title: "Misconfigured route", Status: http.StatusInternalServerError,
			Detail: "POST /orders must be served behind the idempotency middleware"})
		return
	}
	var req OrderRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil { // validated by validateOrder
		idemhttp.WriteProblem(w, &idemhttp.Problem{Type: ProblemInvalidOrder, Title: "Invalid order", Status: http.StatusBadRequest, Detail: err.Error()})
		return
	}
	in := PlaceOrderInput{OrderID: NewOrderID(), CustomerID: req.CustomerID, Items: req.Items, AmountCents: req.AmountCents, Currency: req.Currency}
	wfID := WorkflowIDPrefix + info.Ref.Digest.Hex
	// The order is the account's before its workflow starts: its reads
	// answer no one else (ledger.AccountOrder).
	account, err := idemhttp.ContextPrincipal(r)
	if err == nil {
		err = a.cfg.Ledger.SetOrderAccount(ctx, wfID, account)
	}
	if err != nil {
		idemhttp.WriteProblem(w, backendProblem("recording the order's account", err))
		return
	}
	run, err := a.cfg.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: wfID, TaskQueue: a.cfg.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		Memo:                     map[string]any{memoOrderID: in.OrderID},
	}, PlaceOrder, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		run = a.cfg.Client.GetWorkflow(ctx, wfID, "") // it has ended: answer its result
	case err != nil:
		idemhttp.WriteProblem(w, backendProblem("starting the order's workflow", err))
		return
	}
	var res OrderResult
	async := respondAsync(r)
	if async {
		err = errRespondAsync
	} else {
		wctx, cancel := context.WithTimeout(ctx, a.cfg.Wait)
		err = run.Get(wctx, &res)
		cancel()
	}
	switch {
	case err == nil:
		writeCreated(w, res, wfID)
	case ctx.Err() != nil:
		idemhttp.WriteProblem(w, backendProblem("waiting for the order", ctx.Err()))
	default:
		// The wait ran out (the SDK may report it before wctx is done),
		// or the workflow failed: its description tells which.
		d, derr := a.cfg.Client.DescribeWorkflowExecution(ctx, wfID, run.GetRunID())
		if derr != nil {
			idemhttp.WriteProblem(w, backendProblem("describing the order's workflow", derr))
			return
		}
		info := d.GetWorkflowExecutionInfo()
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED && run.Get(ctx, &res) == nil { // it ended meanwhile
			writeCreated(w, res, wfID)
			return
		}
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			a.cfg.Logger.ErrorContext(ctx, "order API: the order's workflow failed", "workflow_id", wfID, "status", info.GetStatus().String(), "err", err)
			idemhttp.WriteProblem(w, &idemhttp.Problem{Type: ProblemOrderFailed, Title: "Order failed", Status: http.StatusInternalServerError,
				Detail: "the order's workflow " + wfID + " ended " + info.GetStatus().String() + "; an operator must look at it (the Temporal UI, worker ledger)"})
			return
		}
		orderID, derr := memoOrderIDOf(wfID, info.GetMemo().GetFields()[memoOrderID])
		if derr != nil {
			idemhttp.WriteProblem(w, backendProblem("reading the order's workflow", derr))
			return
		}
		w.Header().Set("Location", "/orders/"+orderID)
		w.Header().Set("Retry-After", "1")
		if async {
			w.Header().Set("Preference-Applied", "respond-async")
		}
		writeJSON(w, http.StatusAccepted, OrderResponse{OrderResult: OrderResult{OrderID: orderID, Status: StatusProcessing}, WorkflowID: wfID})
	}
}

var errRespondAsync = errors.New("the client prefers respond-async")

// respondAsync says whether the request asks for Prefer: respond-async
// (RFC 7240): a 202 at once instead of a wait for the order's end.
func respondAsync(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for _, p := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "respond-async") {
				return true
			}
		}
	}
	return false
}

// writeCreated answers how the order ended: 201, its Location and result.
func writeCreated(w http.ResponseWriter, res OrderResult, wfID string) {
	w.Header().Set("Location", "/orders/"+res.OrderID)
	writeJSON(w, http.StatusCreated, OrderResponse{OrderResult: res, WorkflowID: wfID})
}

// memoOrderIDOf decodes the order ID from a workflow's memo field.
func memoOrderIDOf(wfID string, p *commonpb.Payload) (string, error) {
	if p == nil {
		return "", fmt.Errorf("workflow %s has no %s memo", wfID, memoOrderID)
	}
	var id string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &id); err != nil {
		return "", fmt.Errorf("workflow %s: memo %s: %w", wfID, memoOrderID, err)
	}
	return id, nil
}

// accountOrder reads the order the request names, if the request's
// account placed it; else it answers the request 404, the same for an
// order of another account as for none (a 403 would tell another
// account's order IDs from unknown ones), and returns false.
func (a *API) accountOrder(w http.ResponseWriter, r *http.Request, id string) (ledger.Order, bool) {
	account, err := idemhttp.ContextPrincipal(r)
	if err != nil {
		idemhttp.WriteProblem(w, backendProblem("naming the account", err))
		return ledger.Order{}, false
	}
	o, ok, err := a.cfg.Ledger.AccountOrder(r.Context(), account, id)
	switch {
	case err != nil:
		idemhttp.WriteProblem(w, backendProblem("reading the ledger", err))
		return ledger.Order{}, false
	case !ok:
		idemhttp.WriteProblem(w, &idemhttp.Problem{Type: ProblemOrderNotFound, Title: "Order not found", Status: http.StatusNotFound,
			Detail: "your account has no order " + strconv.Quote(id) + ": check the ID (an order just accepted appears within a second)"})
		return ledger.Order{}, false
	}
	return o, true
}

func (a *API) getOrder(w http.ResponseWriter, r *http.Request) {
	if o, ok := a.accountOrder(w, r, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, o)
	}
}

// PaymentsResponse is the answer of GET /payments.
type PaymentsResponse struct {
	Payments []ledger.Payment `json:"payments"`
	// GatewayCalls counts the order's calls to the gateway: each one
	// charged, declined or failed once.
	GatewayCalls int `json:"gateway_calls"`
}

func (a *API) listPayments(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("order_id")
	if id == "" {
		idemhttp.WriteProblem(w, &idemhttp.Problem{Type: idemhttp.ProblemInvalidRequest, Title: "Missing order_id", Status: http.StatusBadRequest,
			Detail: "name the order: GET /payments?order_id=<order id>"})
		return
	}
	if _, ok := a.accountOrder(w, r, id); !ok {
		return
	}
	ps, err := a.cfg.Ledger.Payments(r.Context(), id)
	if err != nil {
		idemhttp.WriteProblem(w, backendProblem("reading the ledger", err))
		return
	}
	calls, err := a.cfg.Ledger.GatewayCalls(r.Context(), id)
	if err != nil {
		idemhttp.WriteProblem(w, backendProblem("reading the ledger", err))
		return
	}
	if ps == nil {
		ps = []ledger.Payment{}
	}
	writeJSON(w, http.StatusOK, PaymentsResponse{Payments: ps, GatewayCalls: len(calls)})
}

// PaymentEventRequest is the body of POST /webhooks/payment-events. Other
// fields are kept in the ledger as they came.
type PaymentEventRequest struct {
	EventID string `json:"event_id"`
	OrderID string `json:"order_id"`
	Type    string `json:"type"`
}

// PaymentEventResponse is the answer to a payment event.
type PaymentEventResponse struct {
	EventID string `json:"event_id"`
	OrderID string `json:"order_id"`
	// Signalled says whether the order's workflow was sent the event
	// (false when the order is unknown or its workflow has ended, or when
	// Limited).
	Signalled bool `json:"signalled"`
	// Limited says that the event was recorded but not signalled: its
	// sender had MaxSignalledEventsPerSender events signalled into the
	// order's workflow already.
	Limited bool `json:"limited,omitempty"`
}

// Bounds of the payment events of one order, which reach its workflow's
// history (a history past Temporal's limits terminates the workflow):
const (
	// MaxEventsPerOrder events are recorded for one order, every sender's
	// together; one more is refused 429 (ProblemTooManyEvents) and not
	// recorded, now or on a redelivery.
	MaxEventsPerOrder = 50
	// MaxSignalledEventsPerSender events of one sender are signalled into
	// one order's workflow; the sender's events past them are recorded,
	// not signalled ("limited": true).
	MaxSignalledEventsPerSender = 10
)

// ProblemTooManyEvents (429) is the problem type of a payment event for
// an order that has MaxEventsPerOrder events: it is not recorded.
const ProblemTooManyEvents = "urn:onceflow:problem:too-many-events"

// Bounds of a payment event's fields: the event ID and type reach the
// order's workflow history (PaymentEvent), the order ID the ledger. A
// field beyond its bound is a 400 invalid payment event, before anything
// is claimed.
const (
	// MaxEventIDLen: an event ID is 1 to 255 printable ASCII characters.
	MaxEventIDLen = 255
	// MaxEventTypeLen: an event type is 1 to 64 characters of
	// [A-Za-z0-9._:-], such as payment.captured.
	MaxEventTypeLen = 64
	// MaxOrderIDLen: an order ID is 1 to 128 printable ASCII characters
	// without spaces (PlaceOrderInput.OrderID).
	MaxOrderIDLen = 128
)

// validEventType checks an event type against MaxEventTypeLen and its
// characters.
func validEventType(t string) bool {
	if t == "" || len(t) > MaxEventTypeLen {
		return false
	}
	for _, c := range []byte(t) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// printableASCII says whether s is 1 to max characters of printable
// ASCII, with the space or without it.
func printableASCII(s string, max int, space bool) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, c := range []byte(s) {
		if c < 0x20 || c > 0x7e || c == ' ' && !space {
			return false
		}
	}
	return true
}

func validateEvent(r *http.Request, body []byte) *idemhttp.Problem {
	if p := jsonOnly(r); p != nil {
		return p
	}
	invalid := func(detail string) *idemhttp.Problem {
		return &idemhttp.Problem{Type: ProblemInvalidEvent, Title: "Invalid payment event", Status: http.StatusBadRequest, Detail: detail}
	}
	var e PaymentEventRequest
	if err := json.Unmarshal(body, &e); err != nil || e.OrderID == "" || e.Type == "" {
		return invalid(`send a JSON object with "event_id", "order_id" and "type" strings`)
	}
	var errs []string
	if !printableASCII(e.EventID, MaxEventIDLen, true) {
		errs = append(errs, fmt.Sprintf("event_id must be 1 to %d printable ASCII characters", MaxEventIDLen))
	}
	if !printableASCII(e.OrderID, MaxOrderIDLen, false) {
		errs = append(errs, fmt.Sprintf("order_id must be 1 to %d printable ASCII characters without spaces", MaxOrderIDLen))
	}
	if !validEventType(e.Type) {
		errs = append(errs, fmt.Sprintf("type must be 1 to %d characters of letters, digits, '.', '_', ':' and '-', such as payment.captured", MaxEventTypeLen))
	}
	if errs != nil {
		return invalid(strings.Join(errs, "; "))
	}
	return nil
}

// senderDigest names a webhook sender in the ledger: a digest under the
// worker's secret (the Digester), as every principal is kept. Its first
// 16 hex digits tag the sender's events in the order's workflow.
func (a *API) senderDigest(sender string) string {
	return a.cfg.Digester.Digest("payment-event-sender", sender).Hex
}

// paymentEvent records a payment provider's event once (the ledger's
// key: sender and event ID) and signals it to the order's workflow once
// (the ledger's signalled_at; the workflow also keeps one per sender and
// event ID, the sender named by an opaque digest).
func (a *API) paymentEvent(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		idemhttp.WriteProblem(w, backendProblem("reading the event", err))
		return
	}
	var req PaymentEventRequest
	_ = json.Unmarshal(body.Bytes(), &req) // validated by validateEvent
	// The event is the sender's: keyed by (sender, event ID) in the ledger
	// as in Redis, so another sender's event of the same ID is neither
	// answered here nor dropped. The sender is the one whose secret
	// signed the delivery (webhook.Verifier), kept as a keyed digest.
	name, err := idemhttp.ContextPrincipal(r)
	if err != nil {
		idemhttp.WriteProblem(w, backendProblem("naming the sender", err))
		return
	}
	sender := a.senderDigest(name)
	e, _, err := a.cfg.Ledger.RecordWebhookEventWithin(ctx, ledger.WebhookEvent{
		EventID: req.EventID, Sender: sender, OrderID: req.OrderID, Kind: req.Type, Payload: body.Bytes(),
	}, MaxEventsPerOrder)
	if errors.Is(err, ledger.ErrTooManyEvents) {
		a.limits.count(ctx, a.limits.events, "order")
		idemhttp.WriteProblem(w, &idemhttp.Problem{Type: ProblemTooManyEvents, Title: "Too many events for this order", Status: http.StatusTooManyRequests,
			Detail: fmt.Sprintf("order %s has %d payment events, as many as it takes: this one is not recorded, now or on a redelivery", strconv.Quote(req.OrderID), MaxEventsPerOrder)})
		return
	}
	if err != nil {
		idemhttp.WriteProblem(w, backendProblem("recording the event", err))
		return
	}
	resp := PaymentEventResponse{EventID: e.EventID, OrderID: e.OrderID, Signalled: !e.SignalledAt.IsZero()}
	if !resp.Signalled {
		o, ok, err := a.cfg.Ledger.Order(ctx, e.OrderID)
		if err != nil {
			idemhttp.WriteProblem(w, backendProblem("reading the ledger", err))
			return
		}
		if ok && o.WorkflowID != "" {
			// Checked before each signal: deliveries of one sender for one
			// order at the same instant may pass it by those in flight.
			n, err := a.cfg.Ledger.SignalledWebhookEvents(ctx, e.OrderID, sender)
			if err != nil {
				idemhttp.WriteProblem(w, backendProblem("reading the ledger", err))
				return
			}
			if n >= MaxSignalledEventsPerSender {
				a.limits.count(ctx, a.limits.events, "sender")
				resp.Limited = true
				ok = false
			}
		}
		if ok && o.WorkflowID != "" {
			err := a.cfg.Client.SignalWorkflow(ctx, o.WorkflowID, "", PaymentEventSignal, PaymentEvent{EventID: e.EventID, Type: e.Kind, Sender: sender[:16]})
			var nf *serviceerror.NotFound
			switch {
			case errors.As(err, &nf): // the workflow has ended: the event stays in the ledger
			case err != nil:
				idemhttp.WriteProblem(w, backendProblem("signalling the order's workflow", err))
				return
			default:
				if err := a.cfg.Ledger.MarkWebhookEventSignalled(ctx, sender, e.EventID); err != nil {
					idemhttp.WriteProblem(w, backendProblem("recording the signal", err))
					return
				}
				resp.Signalled = true
			}
		}
	}
	writeJSON(w, http.StatusOK, resp)
}
