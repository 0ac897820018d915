package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
)

// SetOrderAccount records that account places the order of workflow
// wfID (the order API does, before it starts the workflow); recording it
// again changes nothing. A workflow ID another account placed is an
// error: one workflow ID is one account's.
func (l *Ledger) SetOrderAccount(ctx context.Context, wfID, account string) error {
	if wfID == "" || account == "" {
		return errors.New("ledger: an order's account needs the workflow ID and the account")
	}
	if _, err := l.exec(ctx, "INSERT INTO order_accounts (workflow_id, account_id, created_at) VALUES (?, ?, ?) ON CONFLICT (workflow_id) DO NOTHING",
		wfID, account, l.millis()); err != nil {
		return fmt.Errorf("ledger: record the account of workflow %s: %w", wfID, err)
	}
	var owner string
	if err := l.queryRow(ctx, "SELECT account_id FROM order_accounts WHERE workflow_id = ?", wfID).Scan(&owner); err != nil {
		return fmt.Errorf("ledger: record the account of workflow %s: %w", wfID, err)
	}
	if owner != account {
		return fmt.Errorf("ledger: workflow %s places an order of another account", wfID)
	}
	return nil
}

// AccountOrder reads the order id if account placed it (SetOrderAccount):
// ok is false both when there is no such order and when it is another
// account's, so that a caller cannot tell the two apart.
func (l *Ledger) AccountOrder(ctx context.Context, account, id string) (Order, bool, error) {
	o, err := scanOrder(l.queryRow(ctx, "SELECT "+orderColumns+" FROM orders WHERE order_id = ? AND workflow_id <> '' AND workflow_id IN "+
		"(SELECT workflow_id FROM order_accounts WHERE account_id = ?)", id, account))
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("ledger: read order %s: %w", id, err)
	}
	return o, true, nil
}

// ErrTooManyEvents is what RecordWebhookEventWithin returns when the
// order already has as many events as it may.
var ErrTooManyEvents = errors.New("ledger: the order has as many webhook events as it may")

// RecordWebhookEventWithin is RecordWebhookEvent for an order that may
// have at most max events, every sender's together: a new event past them
// is not recorded (ErrTooManyEvents); one already recorded is returned as
// RecordWebhookEvent returns it. The count and the insert are one step
// (one statement on SQLite, under a lock of the order on PostgreSQL), so
// deliveries at the same instant do not pass max.
func (l *Ledger) RecordWebhookEventWithin(ctx context.Context, e WebhookEvent, max int) (WebhookEvent, bool, error) {
	if e.Sender == "" || e.EventID == "" {
		return WebhookEvent{}, false, errors.New("ledger: a webhook event needs its sender and event ID")
	}
	var n int64
	err := l.tx(ctx, func(tx *sql.Tx) error {
		if l.dialect == Postgres {
			h := fnv.New64a()
			_, _ = h.Write([]byte("webhook_events:" + e.OrderID))
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, l.dialect.Rebind("INSERT INTO webhook_events (sender, event_id, order_id, kind, payload, received_at) "+
			"SELECT ?, ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM webhook_events WHERE order_id = ?) < ? ON CONFLICT (sender, event_id) DO NOTHING"),
			e.Sender, e.EventID, e.OrderID, e.Kind, string(e.Payload), l.millis(), e.OrderID, max)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return WebhookEvent{}, false, fmt.Errorf("ledger: record webhook event %s: %w", e.EventID, err)
	}
	stored, ok, err := l.WebhookEvent(ctx, e.Sender, e.EventID)
	switch {
	case err != nil:
		return WebhookEvent{}, false, err
	case !ok && n > 0:
		return WebhookEvent{}, false, fmt.Errorf("ledger: webhook event %s vanished after it was recorded", e.EventID)
	case !ok:
		return WebhookEvent{}, false, fmt.Errorf("%w (%d): event %s of order %s is not recorded", ErrTooManyEvents, max, e.EventID, e.OrderID)
	}
	return stored, n > 0, nil
}

// SignalledWebhookEvents counts a sender's events of an order that were
// signalled to its workflow.
func (l *Ledger) SignalledWebhookEvents(ctx context.Context, orderID, sender string) (int, error) {
	var n int
	if err := l.queryRow(ctx, "SELECT count(*) FROM webhook_events WHERE order_id = ? AND sender = ? AND signalled_at > 0", orderID, sender).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger: count the signalled webhook events of order %s: %w", orderID, err)
	}
	return n, nil
}
