package order

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow/examples/order/ledger"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// Order statuses, as the ledger's orders table and OrderResult carry them.
const (
	StatusPending   = "pending"
	StatusReserved  = "reserved"
	StatusCharged   = "charged"
	StatusCompleted = "completed"
	// StatusDeclined: the card was declined; the reservation is released.
	StatusDeclined = "declined"
	// StatusRejected: an item is out of stock; nothing was charged.
	StatusRejected = "rejected"
	// StatusFailed: a step failed for good (an operator's fail decision,
	// a gateway that stayed unavailable, a shipment that could not be
	// made); whatever the gateway took is refunded and the reservation is
	// released.
	StatusFailed = "failed"
)

// TypeInvalidOrder is the error type of an order PlaceOrder refuses.
const TypeInvalidOrder = "order.InvalidOrder"

// PlaceOrder's signal and query of payment events (webhooks).
const (
	// PaymentEventSignal carries a PaymentEvent to the order's workflow.
	PaymentEventSignal = "order.paymentEvent"
	// PaymentEventsQuery answers the []PaymentEvent the workflow has, one
	// per sender and event ID.
	PaymentEventsQuery = "order.paymentEvents"
)

// PaymentEvent is a payment provider's event about an order.
type PaymentEvent struct {
	EventID string `json:"event_id"`
	Type    string `json:"type"`
	// Sender tells apart two senders' events of one ID: an opaque tag of
	// the sender (empty in events signalled before it was added).
	Sender string `json:"sender,omitempty"`
}

// PlaceOrderInput is an order.
type PlaceOrderInput struct {
	// OrderID names the order: a UUIDv7 (NewOrderID) by convention, but
	// any string of 1–128 printable characters. Every step's business key
	// derives from it, so two workflows placing one order ID charge once.
	OrderID     string        `json:"order_id"`
	CustomerID  string        `json:"customer_id"`
	Items       []ledger.Item `json:"items"`
	AmountCents int64         `json:"amount_cents"`
	Currency    string        `json:"currency"`
	// SkipChargeReconcile leaves a charge whose effect is unknown to an
	// operator's decision instead of asking the gateway first (the README
	// walk-through and tests use it).
	SkipChargeReconcile bool `json:"skip_charge_reconcile,omitempty"`
}

// Validate checks an order: every bound below, each field's text
// included (validText). The order API answers 400 for an order it
// refuses, before anything is claimed.
func (in PlaceOrderInput) Validate() error { return in.validate(checks{amount: true, text: true}) }

// Bounds of an order's text fields. The fields are stored in the ledger,
// recorded in the order's workflow history and printed by the operator
// tools, so each is bounded and holds printable Unicode only: no control
// character (a newline forged lines in worker trace, an escape sequence
// reached an operator's terminal, a NUL byte is refused by PostgreSQL's
// TEXT), no format character (bidirectional overrides), valid UTF-8.
const (
	// MaxCustomerIDLen: customer_id is 1 to 128 bytes of printable Unicode.
	MaxCustomerIDLen = 128
	// MaxSKULen: an item's sku is 1 to 64 bytes of printable Unicode.
	MaxSKULen = 64
	// MaxItems: an order lists 1 to 100 items.
	MaxItems = 100
	// MaxItemQty: an item's qty is 1 to 1,000,000.
	MaxItemQty = 1_000_000
)

// textBoundChange names the change that bounded the order's text fields
// (workflow.GetVersion): a workflow started before it replays without the
// bounds.
const textBoundChange = "text-bound"

// checks are the bounds a run applies: the ones it was started under.
type checks struct{ amount, text bool }

// validText checks a text field: 1 to max bytes of valid UTF-8, every
// rune printable (unicode.IsPrint: letters, marks, numbers, punctuation,
// symbols and the ASCII space; no control or format character).
func validText(s string, max int) error {
	switch {
	case s == "" || len(s) > max:
		return fmt.Errorf("must be 1 to %d bytes, got %d", max, len(s))
	case !utf8.ValidString(s):
		return errors.New("must be valid UTF-8")
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("must be printable text, without control characters (found %U)", r)
		}
	}
	return nil
}

// MaxAmountCents is the largest amount_cents an order may have: 10^10
// cents, 100,000,000.00 in the order's currency. A larger one is refused
// (the order API answers 400), far below what int64 cents overflow at.
const MaxAmountCents int64 = 10_000_000_000

// amountBoundChange names the change that bounded amount_cents by
// MaxAmountCents (workflow.GetVersion): a workflow started before it
// replays without the bound.
const amountBoundChange = "amount-bound"

// validate is Validate, with the bounds c says (a run replays under the
// ones it was started with).
func (in PlaceOrderInput) validate(c checks) error {
	var errs []error
	if n := len(in.OrderID); n == 0 || n > 128 {
		errs = append(errs, fmt.Errorf("order_id must be 1 to 128 characters, got %d", n))
	}
	for _, r := range in.OrderID {
		if r < 0x21 || r > 0x7e {
			errs = append(errs, errors.New("order_id must be printable ASCII without spaces"))
			break
		}
	}
	if in.CustomerID == "" {
		errs = append(errs, errors.New("customer_id is required"))
	} else if err := validText(in.CustomerID, MaxCustomerIDLen); c.text && err != nil {
		errs = append(errs, fmt.Errorf("customer_id %w", err))
	}
	if len(in.Items) == 0 {
		errs = append(errs, errors.New("items must list at least one item"))
	}
	if c.text && len(in.Items) > MaxItems {
		errs = append(errs, fmt.Errorf("items must list at most %d items, got %d", MaxItems, len(in.Items)))
	}
	for i, it := range in.Items {
		if i == MaxItems && c.text {
			break
		}
		if it.SKU == "" || it.Qty <= 0 {
			errs = append(errs, fmt.Errorf("items[%d] needs a sku and a positive qty", i))
			continue
		}
		if !c.text {
			continue
		}
		if err := validText(it.SKU, MaxSKULen); err != nil {
			errs = append(errs, fmt.Errorf("items[%d].sku %w", i, err))
		}
		if it.Qty > MaxItemQty {
			errs = append(errs, fmt.Errorf("items[%d].qty must be at most %d, got %d", i, MaxItemQty, it.Qty))
		}
	}
	switch {
	case in.AmountCents <= 0:
		errs = append(errs, errors.New("amount_cents must be positive"))
	case c.amount && in.AmountCents > MaxAmountCents:
		errs = append(errs, fmt.Errorf("amount_cents must be at most %d (100,000,000.00 in the currency), got %d", MaxAmountCents, in.AmountCents))
	}
	if len(in.Currency) != 3 || c.text && strings.Trim(in.Currency, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		errs = append(errs, errors.New("currency must be a three-letter code such as USD"))
	}
	return errors.Join(errs...)
}

// OrderResult is how an order ended.
type OrderResult struct {
	OrderID      string `json:"order_id"`
	Status       string `json:"status"`
	PaymentID    string `json:"payment_id,omitempty"`
	ChargedCents int64  `json:"charged_cents"`
	// RefundedCents is what the refund compensation gave back: an order
	// that ends declined or failed keeps no money.
	RefundedCents int64  `json:"refunded_cents,omitempty"`
	ShipmentID    string `json:"shipment_id,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// StepActivityOptions are the options of PlaceOrder's idempotent steps:
// the heartbeat timeout drives the lease renewal and detects a dead worker
// within 5 s; in-progress waits happen inside the activity, so a few
// attempts cover a gateway that is briefly unavailable.
var StepActivityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 2 * time.Minute,
	HeartbeatTimeout:    5 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
		MaximumAttempts:    8,
	},
}

// CompensationActivityOptions are the options of the steps that undo
// what an order took (the refund, the release of the stock): a step's,
// retried until they succeed, as the bookkeeping is. A compensation that
// gave up after a step's eight attempts (a Redis whose durable writes kept
// failing through failovers) failed the workflow and left the order
// reserved, perhaps with the money taken
// (TestACompensationOutlastsTheStepsRetries).
var CompensationActivityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: StepActivityOptions.StartToCloseTimeout,
	HeartbeatTimeout:    StepActivityOptions.HeartbeatTimeout,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
	},
}

// bookkeeping are the options of the ledger writes that are idempotent by
// themselves (an UPDATE to a status, an insert-or-get): retried until the
// database answers.
var bookkeeping = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
	},
}

// PlaceOrder is the order saga: reserve the items, charge the card, create
// the shipment, send the confirmation. Each step runs through
// idemwf.Execute, which decides an unknown effect by itself where the
// answer is known: the reserve, shipment and confirmation steps declare
// their downstream idempotent and are retried; the charge's reconcile
// activity asks the ledger and the gateway, and a charge it finds
// completes the step, none found after ChargeSettle retries it. Only what
// remains (a charge without the reconcile: SkipChargeReconcile, or a
// reconcile that failed) waits in the pending list for an operator's
// decision (`worker pending`, `worker resolve`). A declined card,
// a failed charge or a failed shipment refunds whatever the gateway took
// under the charge's key (the refund step) and releases the reservation.
// The workflow returns the OrderResult, whatever the status; it fails only
// on an invalid order (TypeInvalidOrder) or when a compensation itself
// cannot run.
func PlaceOrder(ctx workflow.Context, in PlaceOrderInput) (OrderResult, error) {
	c := checks{
		amount: workflow.GetVersion(ctx, amountBoundChange, workflow.DefaultVersion, 1) >= 1,
		text:   workflow.GetVersion(ctx, textBoundChange, workflow.DefaultVersion, 1) >= 1,
	}
	if err := in.validate(c); err != nil {
		return OrderResult{}, temporal.NewNonRetryableApplicationError("order: "+err.Error(), TypeInvalidOrder, nil)
	}
	// The pending search attribute: `worker pending`, the console and the
	// onceflow_pending_recoveries gauge find the waiting orders by it.
	rec, err := idemwf.NewRecoveryWithOptions(ctx, idemwf.RecoveryOptions{PendingSearchAttribute: true})
	if err != nil {
		return OrderResult{}, err
	}
	if err := listenForPaymentEvents(ctx); err != nil {
		return OrderResult{}, err
	}
	s := saga{ctx: ctx, rec: rec, in: in, book: bookCtx{workflow.WithActivityOptions(ctx, bookkeeping)}}
	result := OrderResult{OrderID: in.OrderID}
	if err := s.book.run(CreateOrderActivity, in); err != nil {
		return result, err
	}

	reservation, err := idemwf.Execute[ledger.Reservation](ctx, rec, s.step(""), ReserveActivity, ReserveInput{OrderID: in.OrderID, Items: in.Items})
	if err != nil {
		// A reserve step that may have reserved (an attempt's effect was
		// unknown, and an operator failed the step) gives its stock back:
		// the saga compensates a step that may have acted, not only one
		// that completed.
		if _, acted := idemwf.MayHaveActed(err); acted && workflow.GetVersion(ctx, releaseFailedReserveChange, workflow.DefaultVersion, 1) >= 1 {
			if err := s.release(); err != nil {
				return result, err
			}
		}
		return s.fail(result, ReasonReserveFailed, "reserve", err)
	}
	if reservation.Status != ledger.Reserved {
		return s.end(result, StatusRejected, "out of stock")
	}
	s.status(StatusReserved, "", "")

	charge := ChargeInput{OrderID: in.OrderID, CustomerID: in.CustomerID, AmountCents: in.AmountCents, Currency: in.Currency}
	reconcile := ReconcileChargeActivity
	if in.SkipChargeReconcile {
		reconcile = ""
	}
	payment, err := idemwf.Execute[ledger.Payment](ctx, rec, s.step(reconcile), ChargeCardActivity, charge)
	if err != nil {
		// Execute returns an error when the charge did not happen (the
		// gateway stayed unavailable) or an operator decided it failed,
		// which is not proof that no money was taken: refund whatever the
		// gateway holds under the charge's key, and give the stock back.
		if err := s.compensate(&result, charge); err != nil {
			return result, err
		}
		return s.fail(result, ReasonChargeFailed, "charge", err)
	}
	// The ledger's row is the payment of record, whatever path the result
	// took (the action, a reconcile, an operator's decision).
	if err := s.book.get(RecordPaymentActivity, RecordPaymentInput{Charge: charge, Payment: payment}, &payment); err != nil {
		return result, err
	}
	result.PaymentID = payment.ID
	if payment.Status == ledger.PaymentDeclined {
		// Declined now; an earlier attempt may still have charged (its
		// record lost): refund it, so no money is kept for a declined
		// order.
		if err := s.compensate(&result, charge); err != nil {
			return result, err
		}
		return s.end(result, StatusDeclined, "the card was declined")
	}
	result.ChargedCents = payment.AmountCents
	s.status(StatusCharged, payment.ID, "")

	shipment, err := idemwf.Execute[ledger.Shipment](ctx, rec, s.step(""), ShipActivity, OrderRef{OrderID: in.OrderID})
	if err != nil {
		// The money is taken and nothing shipped: refund it.
		if s.compensates() {
			if err := s.compensate(&result, charge); err != nil {
				return result, err
			}
		}
		return s.fail(result, ReasonShipFailed, "ship", err)
	}
	result.ShipmentID = shipment.ID
	if _, err := idemwf.Execute[ledger.Confirmation](ctx, rec, s.step(""), ConfirmActivity, ConfirmInput{OrderID: in.OrderID, PaymentID: payment.ID}); err != nil {
		s.logStep("confirm", err)
		if !s.compensates() {
			return s.end(result, StatusFailed, ReasonConfirmFailed)
		}
		// Paid and shipped: the order stands without its confirmation.
		return s.end(result, StatusCompleted, ReasonConfirmFailed)
	}
	return s.end(result, StatusCompleted, "")
}

// refundChange names the change that added the refund compensation
// (workflow.GetVersion): histories recorded before it replay without it.
const refundChange = "refund-compensation"

// compensates reports whether this run compensates a charge with a refund
// (every run started since refundChange).
func (s saga) compensates() bool {
	return workflow.GetVersion(s.ctx, refundChange, workflow.DefaultVersion, 1) >= 1
}

// compensate refunds whatever the gateway took under the order's charge
// key (in runs since refundChange) and gives the stock back. r records the
// refund.
func (s saga) compensate(r *OrderResult, charge ChargeInput) error {
	if s.compensates() {
		refund, err := idemwf.Execute[Refund](s.ctx, s.rec, s.compensation(), RefundActivity, charge)
		if err != nil {
			return err
		}
		r.RefundedCents = refund.RefundedCents
		if refund.RefundedCents > 0 {
			r.ChargedCents = 0
		}
	}
	return s.release()
}

// listenForPaymentEvents keeps the payment events the workflow is sent,
// one per sender and event ID however often it is delivered, for
// PaymentEventsQuery. (Only the query's state depends on the key: no
// command does, so the histories of earlier versions replay.)
func listenForPaymentEvents(ctx workflow.Context) error {
	events := []PaymentEvent{}
	if err := workflow.SetQueryHandler(ctx, PaymentEventsQuery, func() ([]PaymentEvent, error) { return events, nil }); err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(ctx, PaymentEventSignal)
	seen := map[string]bool{}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var e PaymentEvent
			ch.Receive(ctx, &e)
			if k := e.Sender + "\x00" + e.EventID; !seen[k] {
				seen[k] = true
				events = append(events, e)
			}
		}
	})
	return nil
}

type saga struct {
	ctx  workflow.Context
	rec  *idemwf.Recovery
	in   PlaceOrderInput
	book bookCtx
}

// bookCtx runs the bookkeeping activities.
type bookCtx struct{ ctx workflow.Context }

func (b bookCtx) run(activity string, arg any) error {
	return workflow.ExecuteActivity(b.ctx, activity, arg).Get(b.ctx, nil)
}

func (b bookCtx) get(activity string, arg, out any) error {
	return workflow.ExecuteActivity(b.ctx, activity, arg).Get(b.ctx, out)
}

func (s saga) step(reconcile string) idemwf.Options {
	o := idemwf.Options{Activity: StepActivityOptions, Reconcile: reconcile}
	if reconcile != "" {
		o.Settle = ChargeSettle
	}
	return o
}

// ChargeSettle is the charge's settle time (idemwf.Options.Settle): once
// it has passed since the charge's attempt, the gateway's lookup by the
// operation key is authoritative, so "no call took money under the key"
// proves that nothing was charged and the workflow retries the charge by
// itself. The simulated gateway records each call before it answers, so
// its lookup is authoritative as soon as the attempt has ended; a real
// gateway's settle time is its own request timeout.
const ChargeSettle = 5 * time.Second

// compensation is the options of a compensating step
// (CompensationActivityOptions).
func (s saga) compensation() idemwf.Options {
	return idemwf.Options{Activity: CompensationActivityOptions}
}

func (s saga) release() error {
	_, err := idemwf.Execute[ledger.Reservation](s.ctx, s.rec, s.compensation(), ReleaseActivity, OrderRef{OrderID: s.in.OrderID})
	return err
}

// status records a status on the order row; the row is bookkeeping, so a
// failure to write it is logged, not fatal.
func (s saga) status(status, paymentID, why string) {
	err := s.book.run(SetStatusActivity, StatusInput{OrderID: s.in.OrderID, Status: status, PaymentID: paymentID, Reason: why})
	if err != nil {
		workflow.GetLogger(s.ctx).Warn("order: could not record the status", "status", status, "err", err)
	}
}

// The reasons an order failed, as its clients read them (OrderResult.Reason
// and the ledger's order row): stable texts. What failed inside, the
// step's error, is for operators: the workflow's log line and history.
const (
	ReasonReserveFailed = "the items could not be reserved"
	ReasonChargeFailed  = "the payment could not be completed"
	ReasonShipFailed    = "the shipment could not be created"
	ReasonConfirmFailed = "the confirmation could not be sent"
)

// releaseFailedReserveChange names the change that releases the stock of
// a reserve step a decision failed after it may have reserved
// (workflow.GetVersion): histories recorded before it replay without the
// release.
const releaseFailedReserveChange = "release-failed-reserve"

// fail ends the order failed with the stable reason why; the step's error
// goes to the operators' log.
func (s saga) fail(r OrderResult, why, step string, err error) (OrderResult, error) {
	s.logStep(step, err)
	return s.end(r, StatusFailed, why)
}

// logStep logs a step's failure for operators.
func (s saga) logStep(step string, err error) {
	workflow.GetLogger(s.ctx).Warn("order: a step failed", "order_id", s.in.OrderID, "step", step, "error", err)
}

func (s saga) end(r OrderResult, status, why string) (OrderResult, error) {
	r.Status, r.Reason = status, why
	s.status(status, r.PaymentID, why)
	return r, nil
}
