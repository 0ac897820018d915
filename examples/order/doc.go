// Package order is onceflow's example application, in two sizes.
//
// The quick start (order.go): ChargeOrder, a workflow that charges a card
// through one idempotent activity against an in-memory provider.
//
// The order system (saga.go, activities.go, gateway.go and the ledger
// package): PlaceOrder, a saga of idempotent steps — reserve inventory,
// charge the card, create the shipment, send the confirmation — each an
// activity with its own operation code and a business key
// "<order id>/<step>", run through idemwf.Execute so that an unknown effect
// goes to the step's reconcile activity, then to an operator's decision.
// A declined card releases the reservation (compensation, itself an
// idempotent step) and ends the order "declined". The payment gateway is a
// simulator that is deliberately not idempotent (every call charges) and
// records its calls in the ledger, a SQL database (SQLite or PostgreSQL)
// whose UNIQUE keys and fencing tokens are the last line of defence when
// Redis has lost a record.
//
// The order API (api.go): NewAPI serves POST /orders behind an
// idemhttp.Middleware (the Idempotency-Key header), starting PlaceOrder
// under a workflow ID derived from the key's scope digest, so a retry that
// Redis has forgotten attaches to the same workflow; GET /orders/{id};
// GET /payments; and POST /webhooks/payment-events, keyed by the event ID,
// which records each event once in the ledger and signals it once to the
// order's workflow. Callers authenticate with an API key of an account in
// the ledger (Authorization: Bearer), and the account, not the key's
// bytes, scopes their Idempotency-Keys; payment providers sign their
// deliveries (package idemhttp/webhook), and the signing sender scopes its
// event IDs. Every field that reaches the ledger or a workflow's history
// is bounded (PlaceOrderInput.Validate, MaxEventTypeLen and its
// neighbours). dev.go has the -dev worker's public account and provider.
//
// `go run ./examples/order/cmd/worker -dev` registers all of it and serves the API on
// -http; `go run ./examples/order/cmd/worker order` places an order from the command
// line.
package order
