package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// DefaultStock is the stock a SKU the ledger has not seen starts with.
const DefaultStock = 1000

// Reservation statuses.
const (
	Reserved   = "reserved"
	Released   = "released"
	OutOfStock = "out_of_stock"
)

// Reservation is an order's inventory reservation.
type Reservation struct {
	OrderID    string    `json:"order_id"`
	Items      []Item    `json:"items"`
	Status     string    `json:"status"`
	ReservedAt time.Time `json:"reserved_at"`
	ReleasedAt time.Time `json:"released_at,omitzero"`
}

func (l *Ledger) reservation(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, orderID string) (Reservation, bool, error) {
	var r Reservation
	var items string
	var reserved, released int64
	err := q.QueryRowContext(ctx, l.dialect.Rebind("SELECT order_id, items, status, reserved_at, released_at FROM inventory_reservations WHERE order_id = ?"), orderID).
		Scan(&r.OrderID, &items, &r.Status, &reserved, &released)
	if errors.Is(err, sql.ErrNoRows) {
		return Reservation{}, false, nil
	}
	if err != nil {
		return Reservation{}, false, fmt.Errorf("ledger: read the reservation of order %s: %w", orderID, err)
	}
	if err := json.Unmarshal([]byte(items), &r.Items); err != nil {
		return Reservation{}, false, fmt.Errorf("ledger: the reservation of order %s has items that do not decode: %w", orderID, err)
	}
	r.ReservedAt, r.ReleasedAt = fromMillis(reserved), fromMillis(released)
	return r, true, nil
}

// ReservationOf reads an order's reservation.
func (l *Ledger) ReservationOf(ctx context.Context, orderID string) (Reservation, bool, error) {
	return l.reservation(ctx, l.db, orderID)
}

// Reserve takes the items from stock for an order, in one transaction. An
// order that has a reservation gets it back and takes nothing; an item
// short of stock makes the reservation OutOfStock and takes nothing.
func (l *Ledger) Reserve(ctx context.Context, orderID string, items []Item) (Reservation, error) {
	var out Reservation
	err := l.tx(ctx, func(tx *sql.Tx) error {
		if r, ok, err := l.reservation(ctx, tx, orderID); err != nil || ok {
			out = r
			return err
		}
		status := Reserved
		for _, it := range items {
			if _, err := tx.ExecContext(ctx, l.dialect.Rebind("INSERT INTO inventory (sku, available) VALUES (?, ?) ON CONFLICT (sku) DO NOTHING"), it.SKU, DefaultStock); err != nil {
				return err
			}
			var available int64
			if err := tx.QueryRowContext(ctx, l.dialect.Rebind("SELECT available FROM inventory WHERE sku = ?"), it.SKU).Scan(&available); err != nil {
				return err
			}
			if available < int64(it.Qty) {
				status = OutOfStock
			}
		}
		if status == Reserved {
			for _, it := range items {
				if _, err := tx.ExecContext(ctx, l.dialect.Rebind("UPDATE inventory SET available = available - ? WHERE sku = ?"), it.Qty, it.SKU); err != nil {
					return err
				}
			}
		}
		b, err := json.Marshal(items)
		if err != nil {
			return err
		}
		now := l.now().UTC()
		if _, err := tx.ExecContext(ctx, l.dialect.Rebind("INSERT INTO inventory_reservations (order_id, items, status, reserved_at) VALUES (?, ?, ?, ?)"),
			orderID, string(b), status, now.UnixMilli()); err != nil {
			return err
		}
		out = Reservation{OrderID: orderID, Items: items, Status: status, ReservedAt: fromMillis(now.UnixMilli())}
		return nil
	})
	if err != nil {
		return Reservation{}, fmt.Errorf("ledger: reserve the items of order %s: %w", orderID, err)
	}
	return out, nil
}

// Release gives a reservation's items back to stock, once: only a
// reservation in status Reserved is released; any other is returned as it
// is.
func (l *Ledger) Release(ctx context.Context, orderID string) (Reservation, error) {
	var out Reservation
	err := l.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, l.dialect.Rebind("UPDATE inventory_reservations SET status = ?, released_at = ? WHERE order_id = ? AND status = ?"),
			Released, l.millis(), orderID, Reserved)
		if err != nil {
			return err
		}
		r, ok, err := l.reservation(ctx, tx, orderID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("order %s has no reservation", orderID)
		}
		out = r
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		for _, it := range r.Items {
			if _, err := tx.ExecContext(ctx, l.dialect.Rebind("UPDATE inventory SET available = available + ? WHERE sku = ?"), it.Qty, it.SKU); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Reservation{}, fmt.Errorf("ledger: release the items of order %s: %w", orderID, err)
	}
	return out, nil
}

// Stock returns the stock of a SKU (DefaultStock when it was never
// reserved).
func (l *Ledger) Stock(ctx context.Context, sku string) (int64, error) {
	var n int64
	err := l.queryRow(ctx, "SELECT available FROM inventory WHERE sku = ?", sku).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return DefaultStock, nil
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: read the stock of %s: %w", sku, err)
	}
	return n, nil
}

// Shipment is an order's shipment: one per order.
type Shipment struct {
	ID        string    `json:"shipment_id"`
	OrderID   string    `json:"order_id"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateShipment creates the order's shipment, or returns the one it has.
func (l *Ledger) CreateShipment(ctx context.Context, orderID string) (Shipment, error) {
	_, err := l.exec(ctx, "INSERT INTO shipments (shipment_id, order_id, created_at) VALUES (?, ?, ?) ON CONFLICT (order_id) DO NOTHING",
		uuid.Must(uuid.NewV7()).String(), orderID, l.millis())
	if err != nil {
		return Shipment{}, fmt.Errorf("ledger: create the shipment of order %s: %w", orderID, err)
	}
	s, ok, err := l.ShipmentOf(ctx, orderID)
	if err == nil && !ok {
		err = fmt.Errorf("ledger: the shipment of order %s vanished after it was created", orderID)
	}
	return s, err
}

// ShipmentOf reads an order's shipment.
func (l *Ledger) ShipmentOf(ctx context.Context, orderID string) (Shipment, bool, error) {
	var s Shipment
	var at int64
	err := l.queryRow(ctx, "SELECT shipment_id, order_id, created_at FROM shipments WHERE order_id = ?", orderID).Scan(&s.ID, &s.OrderID, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Shipment{}, false, nil
	}
	if err != nil {
		return Shipment{}, false, fmt.Errorf("ledger: read the shipment of order %s: %w", orderID, err)
	}
	s.CreatedAt = fromMillis(at)
	return s, true, nil
}

// Confirmation is the confirmation sent for an order: one per order.
type Confirmation struct {
	OrderID   string    `json:"order_id"`
	PaymentID string    `json:"payment_id"`
	SentAt    time.Time `json:"sent_at"`
}

// RecordConfirmation records that the order's confirmation was sent, or
// returns the one recorded.
func (l *Ledger) RecordConfirmation(ctx context.Context, orderID, paymentID string) (Confirmation, error) {
	if _, err := l.exec(ctx, "INSERT INTO confirmations (order_id, payment_id, sent_at) VALUES (?, ?, ?) ON CONFLICT (order_id) DO NOTHING",
		orderID, paymentID, l.millis()); err != nil {
		return Confirmation{}, fmt.Errorf("ledger: record the confirmation of order %s: %w", orderID, err)
	}
	var c Confirmation
	var at int64
	if err := l.queryRow(ctx, "SELECT order_id, payment_id, sent_at FROM confirmations WHERE order_id = ?", orderID).Scan(&c.OrderID, &c.PaymentID, &at); err != nil {
		return Confirmation{}, fmt.Errorf("ledger: read the confirmation of order %s: %w", orderID, err)
	}
	c.SentAt = fromMillis(at)
	return c, nil
}

// WebhookEvent is an event a payment provider delivered. An event ID is
// its sender's: the ledger keys events by (Sender, EventID), so a second
// sender that uses an event ID another one used has its own event.
type WebhookEvent struct {
	EventID string `json:"event_id"`
	// Sender names who delivered it (the order API's principal: by
	// default the SHA-256 of its Authorization header).
	Sender     string          `json:"sender"`
	OrderID    string          `json:"order_id"`
	Kind       string          `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
	ReceivedAt time.Time       `json:"received_at"`
	// SignalledAt is when the order's workflow was sent the event; zero
	// until then.
	SignalledAt time.Time `json:"signalled_at,omitzero"`
}

// RecordWebhookEvent records an event once per sender and event ID
// (the primary key) and returns the stored event of that sender and ID,
// with whether this call recorded it. It never returns another sender's
// event.
func (l *Ledger) RecordWebhookEvent(ctx context.Context, e WebhookEvent) (WebhookEvent, bool, error) {
	if e.Sender == "" || e.EventID == "" {
		return WebhookEvent{}, false, errors.New("ledger: a webhook event needs its sender and event ID")
	}
	res, err := l.exec(ctx, "INSERT INTO webhook_events (sender, event_id, order_id, kind, payload, received_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sender, event_id) DO NOTHING",
		e.Sender, e.EventID, e.OrderID, e.Kind, string(e.Payload), l.millis())
	if err != nil {
		return WebhookEvent{}, false, fmt.Errorf("ledger: record webhook event %s: %w", e.EventID, err)
	}
	n, _ := res.RowsAffected()
	stored, ok, err := l.WebhookEvent(ctx, e.Sender, e.EventID)
	if err == nil && !ok {
		err = fmt.Errorf("ledger: webhook event %s vanished after it was recorded", e.EventID)
	}
	return stored, n > 0, err
}

const webhookColumns = "sender, event_id, order_id, kind, payload, received_at, signalled_at"

func scanWebhookEvent(row interface{ Scan(...any) error }) (WebhookEvent, error) {
	var e WebhookEvent
	var payload string
	var at, signalled int64
	if err := row.Scan(&e.Sender, &e.EventID, &e.OrderID, &e.Kind, &payload, &at, &signalled); err != nil {
		return WebhookEvent{}, err
	}
	e.Payload, e.ReceivedAt, e.SignalledAt = json.RawMessage(payload), fromMillis(at), fromMillis(signalled)
	return e, nil
}

// WebhookEvent reads a sender's event.
func (l *Ledger) WebhookEvent(ctx context.Context, sender, eventID string) (WebhookEvent, bool, error) {
	e, err := scanWebhookEvent(l.queryRow(ctx, "SELECT "+webhookColumns+" FROM webhook_events WHERE sender = ? AND event_id = ?", sender, eventID))
	if errors.Is(err, sql.ErrNoRows) {
		return WebhookEvent{}, false, nil
	}
	if err != nil {
		return WebhookEvent{}, false, fmt.Errorf("ledger: read webhook event %s: %w", eventID, err)
	}
	return e, true, nil
}

// MarkWebhookEventSignalled records that the order's workflow was sent
// a sender's event.
func (l *Ledger) MarkWebhookEventSignalled(ctx context.Context, sender, eventID string) error {
	if _, err := l.exec(ctx, "UPDATE webhook_events SET signalled_at = ? WHERE sender = ? AND event_id = ? AND signalled_at = 0", l.millis(), sender, eventID); err != nil {
		return fmt.Errorf("ledger: mark webhook event %s signalled: %w", eventID, err)
	}
	return nil
}

// WebhookEvents lists an order's events, every sender's, oldest first.
func (l *Ledger) WebhookEvents(ctx context.Context, orderID string) ([]WebhookEvent, error) {
	rows, err := l.query(ctx, "SELECT "+webhookColumns+" FROM webhook_events WHERE order_id = ? ORDER BY received_at, sender, event_id", orderID)
	if err != nil {
		return nil, fmt.Errorf("ledger: list the webhook events of order %s: %w", orderID, err)
	}
	defer rows.Close()
	out := []WebhookEvent{}
	for rows.Next() {
		e, err := scanWebhookEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: list the webhook events of order %s: %w", orderID, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// tx runs fn in a transaction and commits it unless fn fails.
func (l *Ledger) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
