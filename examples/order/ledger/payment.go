package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/sqlfence"
)

// Payment statuses.
const (
	PaymentCaptured = "captured"
	PaymentDeclined = "declined"
)

// Payment is a payments row: one per charge, by idempotency key.
type Payment struct {
	ID string `json:"payment_id"`
	// IdempotencyKey is the charge's operation key (onceactivity.OperationKey):
	// UNIQUE, so a charge that runs again cannot add a second row.
	IdempotencyKey  string `json:"idempotency_key"`
	OrderID         string `json:"order_id"`
	AmountCents     int64  `json:"amount_cents"`
	Currency        string `json:"currency"`
	GatewayChargeID string `json:"gateway_charge_id"`
	Status          string `json:"status"`
	// Fence is the attempt that wrote the row.
	Fence     onceflow.Fence `json:"fence"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

const paymentColumns = "payment_id, idempotency_key, order_id, amount_cents, currency, gateway_charge_id, status, fence_epoch, fence_attempt, fence_rev, created_at, updated_at"

func scanPayment(row interface{ Scan(...any) error }) (Payment, error) {
	var p Payment
	var created, updated int64
	err := row.Scan(&p.ID, &p.IdempotencyKey, &p.OrderID, &p.AmountCents, &p.Currency, &p.GatewayChargeID, &p.Status,
		&p.Fence.Epoch, &p.Fence.Attempt, &p.Fence.Rev, &created, &updated)
	p.CreatedAt, p.UpdatedAt = fromMillis(created), fromMillis(updated)
	return p, err
}

// PaymentByKey reads the payment of an idempotency key.
func (l *Ledger) PaymentByKey(ctx context.Context, key string) (Payment, bool, error) {
	p, err := scanPayment(l.queryRow(ctx, "SELECT "+paymentColumns+" FROM payments WHERE idempotency_key = ?", key))
	if errors.Is(err, sql.ErrNoRows) {
		return Payment{}, false, nil
	}
	if err != nil {
		return Payment{}, false, fmt.Errorf("ledger: read the payment of %s: %w", key, err)
	}
	return p, true, nil
}

// Payments lists an order's payments, oldest first.
func (l *Ledger) Payments(ctx context.Context, orderID string) ([]Payment, error) {
	rows, err := l.query(ctx, "SELECT "+paymentColumns+" FROM payments WHERE order_id = ? ORDER BY created_at, payment_id", orderID)
	if err != nil {
		return nil, fmt.Errorf("ledger: list the payments of order %s: %w", orderID, err)
	}
	defer rows.Close()
	out := []Payment{}
	for rows.Next() {
		p, err := scanPayment(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// RecordPayment writes p under its fence (sqlfence.Upsert keyed by
// IdempotencyKey) and returns the stored row. A new row gets p.ID, or a
// new UUIDv7 when it is empty; a row that exists keeps its ID and creation
// time, so a step that runs again after Redis lost its record answers
// with the original payment. A write whose fence is older than the stored
// row's is refused with a *sqlfence.StaleError (and the stored row).
func (l *Ledger) RecordPayment(ctx context.Context, p Payment) (Payment, error) {
	if p.IdempotencyKey == "" {
		return Payment{}, errors.New("ledger: a payment needs an idempotency key")
	}
	if p.ID == "" {
		p.ID = uuid.Must(uuid.NewV7()).String()
	}
	now := l.millis()
	err := sqlfence.Upsert(ctx, l.db, l.dialect, sqlfence.Write{
		Table: "payments", KeyColumn: "idempotency_key", Key: p.IdempotencyKey, Fence: p.Fence,
		Columns: []string{"payment_id", "order_id", "amount_cents", "currency", "gateway_charge_id", "status", "created_at", "updated_at"},
		Values:  []any{p.ID, p.OrderID, p.AmountCents, p.Currency, p.GatewayChargeID, p.Status, now, now},
		Update:  []string{"gateway_charge_id", "status", "updated_at"},
	})
	stale := errors.Is(err, sqlfence.ErrStale)
	if err != nil && !stale {
		return Payment{}, fmt.Errorf("ledger: record the payment of %s: %w", p.IdempotencyKey, err)
	}
	stored, ok, rerr := l.PaymentByKey(ctx, p.IdempotencyKey)
	if rerr == nil && !ok {
		rerr = fmt.Errorf("ledger: the payment of %s vanished after it was written", p.IdempotencyKey)
	}
	if rerr != nil {
		return Payment{}, rerr
	}
	if stale {
		return stored, err
	}
	return stored, nil
}

// EnsurePayment inserts p unless a payment with its idempotency key exists,
// and returns the stored row either way, with whether it inserted it. It
// never overwrites: it is for writers without a fence (a reconcile, an
// operator's decision), whose row an attempt that holds a fence may later
// overwrite.
func (l *Ledger) EnsurePayment(ctx context.Context, p Payment) (Payment, bool, error) {
	if p.IdempotencyKey == "" {
		return Payment{}, false, errors.New("ledger: a payment needs an idempotency key")
	}
	if p.ID == "" {
		p.ID = uuid.Must(uuid.NewV7()).String()
	}
	now := l.millis()
	res, err := l.exec(ctx, "INSERT INTO payments ("+paymentColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING",
		p.ID, p.IdempotencyKey, p.OrderID, p.AmountCents, p.Currency, p.GatewayChargeID, p.Status, p.Fence.Epoch, p.Fence.Attempt, p.Fence.Rev, now, now)
	if err != nil {
		return Payment{}, false, fmt.Errorf("ledger: record the payment of %s: %w", p.IdempotencyKey, err)
	}
	n, _ := res.RowsAffected()
	stored, ok, err := l.PaymentByKey(ctx, p.IdempotencyKey)
	if err == nil && !ok {
		err = fmt.Errorf("ledger: the payment of %s vanished after it was written", p.IdempotencyKey)
	}
	return stored, n > 0, err
}

// Gateway call outcomes.
const (
	CallCharged            = "charged"
	CallChargedThenTimeout = "charged-then-timeout"
	CallChargedThenCrash   = "charged-then-crash"
	CallDeclined           = "declined"
	CallUnavailable        = "unavailable"
	// CallTimeoutBeforeCharge: the caller heard a timeout, and nothing
	// was charged.
	CallTimeoutBeforeCharge = "timeout-before-charge"
)

// GatewayCall is one call the gateway simulator took.
type GatewayCall struct {
	ID           string    `json:"call_id"`
	OperationKey string    `json:"operation_key"`
	OrderID      string    `json:"order_id"`
	AmountCents  int64     `json:"amount_cents"`
	Currency     string    `json:"currency"`
	Outcome      string    `json:"outcome"`
	ChargeID     string    `json:"charge_id,omitempty"`
	CalledAt     time.Time `json:"called_at"`
}

// Charged reports whether the call took money (whatever the caller heard).
func (c GatewayCall) Charged() bool {
	return c.Outcome == CallCharged || c.Outcome == CallChargedThenTimeout || c.Outcome == CallChargedThenCrash
}

const callColumns = "call_id, operation_key, order_id, amount_cents, currency, outcome, charge_id, called_at"

// RecordGatewayCall records a call; c.ID and c.CalledAt are filled in when
// empty.
func (l *Ledger) RecordGatewayCall(ctx context.Context, c GatewayCall) (GatewayCall, error) {
	if c.ID == "" {
		c.ID = uuid.Must(uuid.NewV7()).String()
	}
	if c.CalledAt.IsZero() {
		c.CalledAt = l.now().UTC()
	}
	_, err := l.exec(ctx, "INSERT INTO gateway_calls ("+callColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		c.ID, c.OperationKey, c.OrderID, c.AmountCents, c.Currency, c.Outcome, c.ChargeID, c.CalledAt.UnixMilli())
	if err != nil {
		return GatewayCall{}, fmt.Errorf("ledger: record a gateway call for order %s: %w", c.OrderID, err)
	}
	return c, nil
}

// UpdateGatewayCallOutcome changes what a call's caller heard (a charge
// then a timeout or a crash).
func (l *Ledger) UpdateGatewayCallOutcome(ctx context.Context, id, outcome string) error {
	if _, err := l.exec(ctx, "UPDATE gateway_calls SET outcome = ? WHERE call_id = ?", outcome, id); err != nil {
		return fmt.Errorf("ledger: update gateway call %s: %w", id, err)
	}
	return nil
}

func (l *Ledger) gatewayCalls(ctx context.Context, where string, arg any) ([]GatewayCall, error) {
	rows, err := l.query(ctx, "SELECT "+callColumns+" FROM gateway_calls WHERE "+where+" = ? ORDER BY called_at, call_id", arg)
	if err != nil {
		return nil, fmt.Errorf("ledger: list gateway calls: %w", err)
	}
	defer rows.Close()
	out := []GatewayCall{}
	for rows.Next() {
		var c GatewayCall
		var at int64
		if err := rows.Scan(&c.ID, &c.OperationKey, &c.OrderID, &c.AmountCents, &c.Currency, &c.Outcome, &c.ChargeID, &at); err != nil {
			return nil, err
		}
		c.CalledAt = fromMillis(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// GatewayCallsByKey lists the calls made under an operation key, oldest
// first: what a reconcile asks.
func (l *Ledger) GatewayCallsByKey(ctx context.Context, key string) ([]GatewayCall, error) {
	return l.gatewayCalls(ctx, "operation_key", key)
}

// GatewayCalls lists an order's calls, oldest first.
func (l *Ledger) GatewayCalls(ctx context.Context, orderID string) ([]GatewayCall, error) {
	return l.gatewayCalls(ctx, "order_id", orderID)
}

// GatewayRefund is one refund the gateway simulator made: of one charge,
// once (UNIQUE charge_id).
type GatewayRefund struct {
	ID           string    `json:"refund_id"`
	ChargeID     string    `json:"charge_id"`
	OperationKey string    `json:"operation_key"`
	OrderID      string    `json:"order_id"`
	AmountCents  int64     `json:"amount_cents"`
	Currency     string    `json:"currency"`
	RefundedAt   time.Time `json:"refunded_at"`
}

const refundColumns = "refund_id, charge_id, operation_key, order_id, amount_cents, currency, refunded_at"

// RecordGatewayRefund records the refund of r.ChargeID unless that charge
// was refunded already, and returns the refund of record with whether it
// inserted it.
func (l *Ledger) RecordGatewayRefund(ctx context.Context, r GatewayRefund) (GatewayRefund, bool, error) {
	if r.ChargeID == "" {
		return GatewayRefund{}, false, errors.New("ledger: a refund needs the charge it refunds")
	}
	if r.ID == "" {
		r.ID = "re_" + uuid.Must(uuid.NewV7()).String()
	}
	if r.RefundedAt.IsZero() {
		r.RefundedAt = l.now().UTC()
	}
	res, err := l.exec(ctx, "INSERT INTO gateway_refunds ("+refundColumns+") VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (charge_id) DO NOTHING",
		r.ID, r.ChargeID, r.OperationKey, r.OrderID, r.AmountCents, r.Currency, r.RefundedAt.UnixMilli())
	if err != nil {
		return GatewayRefund{}, false, fmt.Errorf("ledger: record the refund of charge %s: %w", r.ChargeID, err)
	}
	n, _ := res.RowsAffected()
	refunds, err := l.gatewayRefunds(ctx, "charge_id", r.ChargeID)
	if err == nil && len(refunds) != 1 {
		err = fmt.Errorf("ledger: the refund of charge %s vanished after it was written", r.ChargeID)
	}
	if err != nil {
		return GatewayRefund{}, false, err
	}
	return refunds[0], n > 0, nil
}

func (l *Ledger) gatewayRefunds(ctx context.Context, where string, arg any) ([]GatewayRefund, error) {
	rows, err := l.query(ctx, "SELECT "+refundColumns+" FROM gateway_refunds WHERE "+where+" = ? ORDER BY refunded_at, refund_id", arg)
	if err != nil {
		return nil, fmt.Errorf("ledger: list gateway refunds: %w", err)
	}
	defer rows.Close()
	out := []GatewayRefund{}
	for rows.Next() {
		var r GatewayRefund
		var at int64
		if err := rows.Scan(&r.ID, &r.ChargeID, &r.OperationKey, &r.OrderID, &r.AmountCents, &r.Currency, &at); err != nil {
			return nil, err
		}
		r.RefundedAt = fromMillis(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// GatewayRefunds lists an order's refunds, oldest first.
func (l *Ledger) GatewayRefunds(ctx context.Context, orderID string) ([]GatewayRefund, error) {
	return l.gatewayRefunds(ctx, "order_id", orderID)
}

// GatewayRefundsByKey lists the refunds of the charges made under an
// operation key.
func (l *Ledger) GatewayRefundsByKey(ctx context.Context, key string) ([]GatewayRefund, error) {
	return l.gatewayRefunds(ctx, "operation_key", key)
}

// PaymentRefunded is the status of a payment whose charge was refunded.
const PaymentRefunded = "refunded"

// MarkPaymentRefunded moves the payment of an idempotency key, if there is
// one and it was captured, to PaymentRefunded.
func (l *Ledger) MarkPaymentRefunded(ctx context.Context, key string) error {
	if _, err := l.exec(ctx, "UPDATE payments SET status = ?, updated_at = ? WHERE idempotency_key = ? AND status = ?",
		PaymentRefunded, l.millis(), key, PaymentCaptured); err != nil {
		return fmt.Errorf("ledger: mark the payment of %s refunded: %w", key, err)
	}
	return nil
}
