package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	sdkactivity "go.temporal.io/sdk/activity"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// Registered activity names of PlaceOrder.
const (
	CreateOrderActivity     = "order.CreateOrder"
	ReserveActivity         = "order.ReserveInventory"
	ChargeCardActivity      = "order.ChargeCard"
	ReconcileChargeActivity = "order.ReconcileCharge"
	RecordPaymentActivity   = "order.RecordPayment"
	ShipActivity            = "order.CreateShipment"
	ConfirmActivity         = "order.SendConfirmation"
	ReleaseActivity         = "order.ReleaseInventory"
	RefundActivity          = "order.RefundCharge"
	SetStatusActivity       = "order.SetStatus"
)

// Operation codes of the saga's idempotent steps. With the business key
// "<order id>/<step>" they name the Redis records.
const (
	ReserveCode onceflow.OperationCode = "reserve-inventory"
	ChargeCode  onceflow.OperationCode = "charge-card"
	ShipCode    onceflow.OperationCode = "create-shipment"
	ConfirmCode onceflow.OperationCode = "send-confirmation"
	ReleaseCode onceflow.OperationCode = "release-inventory"
	RefundCode  onceflow.OperationCode = "refund-charge"
)

// NewOrderID returns a new order ID: a UUIDv7, so IDs sort by time.
func NewOrderID() string { return uuid.Must(uuid.NewV7()).String() }

// ReserveInput is the reserve step's input.
type ReserveInput struct {
	OrderID string        `json:"order_id"`
	Items   []ledger.Item `json:"items"`
}

// ChargeInput is the charge step's input (and its reconcile's).
type ChargeInput struct {
	OrderID     string `json:"order_id"`
	CustomerID  string `json:"customer_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// RecordPaymentInput asks for the payment of record of a charge.
type RecordPaymentInput struct {
	Charge  ChargeInput    `json:"charge"`
	Payment ledger.Payment `json:"payment"`
}

// OrderRef names an order.
type OrderRef struct {
	OrderID string `json:"order_id"`
}

// ConfirmInput is the confirmation step's input.
type ConfirmInput struct {
	OrderID   string `json:"order_id"`
	PaymentID string `json:"payment_id"`
}

// StatusInput sets an order's status.
type StatusInput struct {
	OrderID   string `json:"order_id"`
	Status    string `json:"status"`
	PaymentID string `json:"payment_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Activities are PlaceOrder's activities over a ledger and a gateway.
type Activities struct {
	ledger  *ledger.Ledger
	gateway *Gateway
	wrapper *onceactivity.Wrapper
}

// NewActivities returns the activities; w derives operation keys outside
// the wrapped activities (the reconcile activity).
func NewActivities(l *ledger.Ledger, g *Gateway, w *onceactivity.Wrapper) *Activities {
	return &Activities{ledger: l, gateway: g, wrapper: w}
}

// Register registers PlaceOrder and its activities: the steps through
// onceflow (activity.Register), each under its name and operation code
// with its business key, the reconcile and bookkeeping activities as they
// are.
func Register(r worker.Registry, l *ledger.Ledger, g *Gateway) error {
	a := NewActivities(l, g, r.Activities)
	r.Worker.RegisterWorkflow(PlaceOrder)
	step := func(fn any, name string, code onceflow.OperationCode, opts ...onceactivity.Option) {
		onceactivity.Register(r.Worker, r.Activities, fn, append(opts, onceactivity.Name(name), onceactivity.Code(code))...)
	}
	// One reservation per order; the ledger's reservation row makes a
	// re-run after a takeover safe.
	step(a.Reserve, ReserveActivity, ReserveCode, onceactivity.BusinessKey(func(in ReserveInput) string { return in.OrderID + "/reserve" }),
		onceactivity.IdempotentDownstream())
	// One charge per order, across workflows; an attempt that takes over
	// from one that died mid-charge asks the gateway (Reconcile) instead
	// of charging again.
	step(a.Charge, ChargeCardActivity, ChargeCode, onceactivity.BusinessKey(func(in ChargeInput) string { return in.OrderID + "/charge" }),
		onceactivity.Reconcile(func(ctx context.Context, in ChargeInput, _ onceflow.Record) (ledger.Payment, bool, error) {
			fence, _ := onceactivity.Fence(ctx)
			return a.reconcile(ctx, onceactivity.OperationKey(ctx), in, fence)
		}))
	step(a.Ship, ShipActivity, ShipCode, onceactivity.BusinessKey(func(in OrderRef) string { return in.OrderID + "/ship" }),
		onceactivity.IdempotentDownstream()) // one shipment per order (UNIQUE order_id)
	step(a.Confirm, ConfirmActivity, ConfirmCode, onceactivity.BusinessKey(func(in ConfirmInput) string { return in.OrderID + "/confirm" }),
		onceactivity.IdempotentDownstream()) // one confirmation per order (primary key)
	step(a.Release, ReleaseActivity, ReleaseCode, onceactivity.BusinessKey(func(in OrderRef) string { return in.OrderID + "/release" }),
		onceactivity.IdempotentDownstream()) // releases only from status reserved
	step(a.Refund, RefundActivity, RefundCode, onceactivity.BusinessKey(func(in ChargeInput) string { return in.OrderID + "/refund" }),
		onceactivity.IdempotentDownstream()) // the gateway refunds each charge once (UNIQUE charge_id)
	reg := func(name string, fn any) {
		r.Worker.RegisterActivityWithOptions(fn, sdkactivity.RegisterOptions{Name: name})
	}
	reg(ReconcileChargeActivity, a.ReconcileCharge)
	reg(RecordPaymentActivity, a.RecordPayment)
	reg(CreateOrderActivity, a.CreateOrder)
	reg(SetStatusActivity, a.SetStatus)
	return nil
}

// Reserve reserves the order's items.
func (a *Activities) Reserve(ctx context.Context, in ReserveInput) (ledger.Reservation, error) {
	r, err := a.ledger.Reserve(ctx, in.OrderID, in.Items)
	if err != nil {
		// One transaction: when it failed, nothing was taken.
		return ledger.Reservation{}, idemstore.RetryableNoEffect(err)
	}
	return r, nil
}

// Charge charges the card through the (non-idempotent) gateway and
// records the payment under the attempt's fence.
//
// The ledger is asked first by the operation key: a step that runs again
// after Redis lost its record answers with the original payment. When the
// attempt is in doubt (an earlier attempt may have reached the gateway:
// onceactivity.AskFirst), the gateway's own record of the key is asked
// before it is called again, so a charge that reached the gateway but not
// the ledger is not repeated. (the step's Reconcile asks both before
// the action whenever there is doubt; this is the second check.) A zombie
// attempt (its lease taken over, or its record lost and created anew) that
// reaches the write finds a newer fence and is refused.
func (a *Activities) Charge(ctx context.Context, in ChargeInput) (ledger.Payment, error) {
	key := onceactivity.OperationKey(ctx)
	if p, ok, err := a.ledger.PaymentByKey(ctx, key); err != nil {
		return ledger.Payment{}, idemstore.RetryableNoEffect(err)
	} else if ok {
		return p, nil
	}
	gc, err := onceactivity.AskFirst(ctx, a.gateway.Lookup, func(ctx context.Context, key string) (GatewayCharge, error) {
		return a.gateway.Charge(ctx, ChargeRequest{OperationKey: key, OrderID: in.OrderID, AmountCents: in.AmountCents, Currency: in.Currency})
	})
	if errors.Is(err, ErrGatewayUnavailable) {
		return ledger.Payment{}, idemstore.RetryableNoEffect(err)
	}
	if err != nil {
		return ledger.Payment{}, err // the gateway may have charged: effect unknown
	}
	fence, _ := onceactivity.Fence(ctx)
	return a.ledger.RecordPayment(ctx, payment(key, in, gc, fence))
}

// Refund is the charge's compensation: it refunds every charge the gateway
// took under the charge step's operation key (the payment of an order that
// then failed, or a charge of an earlier attempt that the order never
// recorded) and marks the payment row refunded. An order that ends
// declined or failed runs it, so no money is kept for an order without a
// payment. It is idempotent: the gateway refunds each charge once.
func (a *Activities) Refund(ctx context.Context, in ChargeInput) (Refund, error) {
	key := a.wrapper.BusinessOperationKey(sdkactivity.GetInfo(ctx).Namespace, ChargeCode, in.OrderID+"/charge")
	refunds, err := a.gateway.Refund(ctx, key)
	if err != nil {
		return Refund{}, idemstore.RetryableNoEffect(err) // safe to run again: each charge is refunded once
	}
	out := Refund{Refunds: refunds}
	for _, r := range refunds {
		out.RefundedCents += r.AmountCents
	}
	if len(refunds) > 0 {
		if err := a.ledger.MarkPaymentRefunded(ctx, key); err != nil {
			return Refund{}, idemstore.RetryableNoEffect(err)
		}
	}
	return out, nil
}

// Refund is what the refund step did.
type Refund struct {
	RefundedCents int64                  `json:"refunded_cents"`
	Refunds       []ledger.GatewayRefund `json:"refunds"`
}

func payment(key string, in ChargeInput, gc GatewayCharge, fence onceflow.Fence) ledger.Payment {
	return ledger.Payment{IdempotencyKey: key, OrderID: in.OrderID, AmountCents: in.AmountCents, Currency: in.Currency,
		GatewayChargeID: gc.ChargeID, Status: gc.Status, Fence: fence}
}

// reconcile finds the effect of a charge under key: the ledger's row, or
// the gateway's call (which it then records).
func (a *Activities) reconcile(ctx context.Context, key string, in ChargeInput, fence onceflow.Fence) (ledger.Payment, bool, error) {
	if p, ok, err := a.ledger.PaymentByKey(ctx, key); err != nil || ok {
		return p, ok, err
	}
	gc, found, err := a.gateway.Lookup(ctx, key)
	if err != nil || !found {
		return ledger.Payment{}, false, err
	}
	p, _, err := a.ledger.EnsurePayment(ctx, payment(key, in, gc, fence))
	return p, err == nil, err
}

// ReconcileCharge is the charge step's reconcile activity, which
// idemwf.Execute asks when the charge's effect is unknown (a timeout after
// the gateway charged): it looks the charge's operation key up in the
// ledger and the gateway, and says what it found (ReconcileResult.Facts,
// kept with the workflow's decision).
func (a *Activities) ReconcileCharge(ctx context.Context, in ChargeInput) (idemwf.ReconcileResult, error) {
	key := a.wrapper.BusinessOperationKey(sdkactivity.GetInfo(ctx).Namespace, ChargeCode, in.OrderID+"/charge")
	p, found, err := a.reconcile(ctx, key, in, onceflow.Fence{})
	if err != nil {
		return idemwf.ReconcileResult{}, err
	}
	if !found {
		return idemwf.ReconcileResult{Facts: []string{"ledger: no payment under " + key,
			"gateway: no call under " + key + " took money or was declined"}}, nil
	}
	b, err := json.Marshal(p)
	return idemwf.ReconcileResult{Found: true, Result: b, Facts: []string{
		fmt.Sprintf("payment %s under %s: %s, gateway charge %q", p.ID, key, p.Status, p.GatewayChargeID)}}, err
}

// RecordPayment returns the payment of record of a charge, inserting the
// one given if the ledger has none: after an operator decided "completed"
// the ledger may not have it yet. An operator's result may leave out
// everything but the status (and the gateway's charge ID).
func (a *Activities) RecordPayment(ctx context.Context, in RecordPaymentInput) (ledger.Payment, error) {
	p := in.Payment
	if p.IdempotencyKey == "" {
		p.IdempotencyKey = a.wrapper.BusinessOperationKey(sdkactivity.GetInfo(ctx).Namespace, ChargeCode, in.Charge.OrderID+"/charge")
	}
	if p.OrderID == "" {
		p.OrderID, p.AmountCents, p.Currency = in.Charge.OrderID, in.Charge.AmountCents, in.Charge.Currency
	}
	if p.Status == "" {
		p.Status = ledger.PaymentCaptured
	}
	if p.Status != ledger.PaymentCaptured && p.Status != ledger.PaymentDeclined {
		return ledger.Payment{}, fmt.Errorf("order: payment status %q is neither %q nor %q", p.Status, ledger.PaymentCaptured, ledger.PaymentDeclined)
	}
	stored, _, err := a.ledger.EnsurePayment(ctx, p)
	return stored, err
}

// Ship creates the order's shipment. The ledger keeps one per order, so a
// failed write is safe to run again.
func (a *Activities) Ship(ctx context.Context, in OrderRef) (ledger.Shipment, error) {
	s, err := a.ledger.CreateShipment(ctx, in.OrderID)
	return s, noEffect(err)
}

// Confirm sends (records) the order's confirmation, one per order.
func (a *Activities) Confirm(ctx context.Context, in ConfirmInput) (ledger.Confirmation, error) {
	c, err := a.ledger.RecordConfirmation(ctx, in.OrderID, in.PaymentID)
	return c, noEffect(err)
}

// Release gives the order's reserved items back, once.
func (a *Activities) Release(ctx context.Context, in OrderRef) (ledger.Reservation, error) {
	r, err := a.ledger.Release(ctx, in.OrderID)
	return r, noEffect(err)
}

// noEffect marks a failed ledger write of an idempotent step: running it
// again is safe, so the next attempt may take over at once.
func noEffect(err error) error {
	if err == nil {
		return nil
	}
	return idemstore.RetryableNoEffect(err)
}

// CreateOrder records the order (insert-or-get).
func (a *Activities) CreateOrder(ctx context.Context, in PlaceOrderInput) error {
	info := sdkactivity.GetInfo(ctx)
	_, err := a.ledger.CreateOrder(ctx, ledger.Order{ID: in.OrderID, CustomerID: in.CustomerID, Items: in.Items,
		AmountCents: in.AmountCents, Currency: in.Currency, Status: StatusPending, WorkflowID: info.WorkflowExecution.ID})
	return err
}

// SetStatus records an order's status.
func (a *Activities) SetStatus(ctx context.Context, in StatusInput) error {
	return a.ledger.SetOrderStatus(ctx, in.OrderID, in.Status, in.PaymentID, in.Reason)
}

// Step is one of PlaceOrder's idempotent steps: its operation code and
// the business key it runs under.
type Step struct {
	Name string
	Code onceflow.OperationCode
	// Suffix follows the order ID in the step's business key.
	Suffix string
}

// Key is the step's business key for an order.
func (s Step) Key(orderID string) string { return orderID + s.Suffix }

// Steps are PlaceOrder's idempotent steps, in saga order, then the
// compensation.
var Steps = []Step{
	{"reserve", ReserveCode, "/reserve"},
	{"charge", ChargeCode, "/charge"},
	{"ship", ShipCode, "/ship"},
	{"confirm", ConfirmCode, "/confirm"},
	{"release", ReleaseCode, "/release"},
	{"refund", RefundCode, "/refund"},
}
