// Package ledger is the order system's relational ledger: orders, payments
// with UNIQUE(idempotency_key) and a fencing token, the gateway's calls,
// inventory reservations, shipments, confirmations and webhook events. It
// speaks database/sql to SQLite (modernc.org/sqlite, pure Go) or PostgreSQL
// (pgx): the program that opens it imports the driver, as cmd/worker does:
//
//	import (
//		_ "github.com/jackc/pgx/v5/stdlib"
//		_ "modernc.org/sqlite"
//	)
//
// The ledger is the third line of defence, after the Redis record and the
// Temporal workflow ID: a step that runs again after Redis lost its record
// finds its row (or cannot insert a second one), and a fenced write (package sqlfence) keeps a
// zombie attempt from overwriting a newer attempt's write.
package ledger

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/onceflow/onceflow/sqlfence"
)

//go:embed schema.sql
var schema string

// Dialect is the SQL a database speaks (sqlfence.Dialect).
type Dialect = sqlfence.Dialect

// The dialects.
const (
	SQLite   = sqlfence.SQLite
	Postgres = sqlfence.PostgreSQL
)

// driverName is the database/sql driver name of the dialect.
func driverName(d Dialect) string {
	if d == Postgres {
		return "pgx"
	}
	return "sqlite"
}

// ParseDSN reads a ledger DSN: "sqlite:<path>" (a file, created if
// missing) or "postgres://…" / "postgresql://…".
func ParseDSN(dsn string) (Dialect, string, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return 0, "", errors.New("ledger: the DSN sqlite: needs a file, such as sqlite:onceflow-ledger.db")
		}
		// WAL and a busy timeout: the worker and the HTTP API share it.
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		source := "file:" + path + sep + "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
		// Transactions take the write lock when they begin: a deferred
		// one that read first and then writes fails at once with
		// SQLITE_BUSY, without waiting, when another connection wrote in
		// between (workers that start together on a new file and all
		// create the schema: TestWorkersMigrateOneDatabaseTogether). A
		// read-only ledger (mode=ro) takes no write lock.
		if !strings.Contains(path, "mode=ro") {
			source += "&_txlock=immediate"
		}
		return SQLite, source, nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return Postgres, dsn, nil
	}
	return 0, "", fmt.Errorf("ledger: DSN %q: want sqlite:<path> or postgres://…", RedactDSN(dsn))
}

// RedactDSN hides the password of a DSN, for logs and errors.
func RedactDSN(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		if at := strings.Index(dsn[i+3:], "@"); at >= 0 {
			return dsn[:i+3] + "…@" + dsn[i+3+at+1:]
		}
	}
	return dsn
}

// Ledger is an open ledger. It is safe for concurrent use.
type Ledger struct {
	db      *sql.DB
	dialect Dialect
	now     func() time.Time
}

// Open opens the ledger at dsn, creates its tables if they are missing and
// brings a ledger an earlier version made up to date (the columns added
// since; webhook_events keyed by sender and event ID), in one transaction.
func Open(ctx context.Context, dsn string) (*Ledger, error) {
	d, source, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(driverName(d), source)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s (is the %s driver imported?): %w", RedactDSN(dsn), driverName(d), err)
	}
	if d == SQLite {
		db.SetMaxOpenConns(1) // one writer: SQLite serialises writes anyway
		if err := connectSQLite(ctx, db); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("ledger: %s: %w", RedactDSN(dsn), err)
		}
	}
	l := &Ledger{db: db, dialect: d, now: time.Now}
	if err := l.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ledger: %s: %w", RedactDSN(dsn), err)
	}
	return l, nil
}

// OpenReadOnly opens the ledger at dsn for reading, and creates nothing:
// a SQLite ledger must exist (else the error wraps fs.ErrNotExist) and is
// opened read-only (SQLite's mode=ro); a PostgreSQL one is opened as by
// Open, whose schema check changes nothing on an up-to-date ledger.
func OpenReadOnly(ctx context.Context, dsn string) (*Ledger, error) {
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		file, _, _ := strings.Cut(path, "?")
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("ledger: there is no ledger at %s, and a reading command does not create one: %w", file, err)
		} else if err != nil {
			return nil, fmt.Errorf("ledger: %s: %w", file, err)
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		dsn += sep + "mode=ro"
	}
	return Open(ctx, dsn)
}

// connectSQLite makes the first connection. The first connections to a
// new file race to switch it to WAL, and SQLite answers the losers
// SQLITE_BUSY at once, without waiting out busy_timeout; a loser tries
// again (TestConcurrentOpensOfANewSQLiteFile), for as long as ctx and at
// most the busy timeout allow.
func connectSQLite(ctx context.Context, db *sql.DB) error {
	const sqliteBusy = 5
	deadline := time.Now().Add(5 * time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := db.PingContext(ctx)
		var coded interface{ Code() int }
		if err == nil || !errors.As(err, &coded) || coded.Code()&0xff != sqliteBusy || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("connect: %w", err)
			}
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("connect: %w (gave up: %w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// migrationLock is the PostgreSQL advisory lock key that serialises
// schema creation: concurrent CREATE TABLE IF NOT EXISTS of one table fail
// with a unique violation on pg_type, so workers that start together on
// one database take turns.
const migrationLock = 0x6f6e6365666c6f77 // "onceflow"

func (l *Ledger) migrate(ctx context.Context) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create the schema: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if l.dialect == Postgres {
		// Held until the transaction ends; PostgreSQL's DDL is
		// transactional, so the schema appears whole or not at all.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
			return fmt.Errorf("lock the schema for its creation: %w", err)
		}
	}
	for _, stmt := range strings.Split(schema, ";\n") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create the schema: %w", err)
		}
	}
	// Columns added since a table was first created: a ledger made by an
	// earlier version gains them here.
	for _, c := range []struct{ table, column, def string }{
		{"webhook_events", "signalled_at", "BIGINT NOT NULL DEFAULT 0"},
		{"payments", "fence_epoch", "BIGINT NOT NULL DEFAULT 0"},
	} {
		has, err := l.hasColumn(ctx, tx, c.table, c.column)
		if err != nil {
			return fmt.Errorf("look for column %s.%s: %w", c.table, c.column, err)
		}
		if has {
			continue
		}
		if _, err := tx.ExecContext(ctx, "ALTER TABLE "+c.table+" ADD COLUMN "+c.column+" "+c.def); err != nil {
			return fmt.Errorf("add column %s.%s: %w", c.table, c.column, err)
		}
	}
	if err := l.rekeyWebhookEvents(ctx, tx); err != nil {
		return fmt.Errorf("key webhook_events by sender and event ID: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create the schema: %w", err)
	}
	return nil
}

// rekeyWebhookEvents moves a webhook_events table made with PRIMARY KEY
// (event_id), by a version that keyed events by their ID alone, to
// PRIMARY KEY (sender, event_id), keeping its rows (each unique under the
// new key too). It runs in the migration's transaction: PostgreSQL swaps
// the constraint; SQLite, which cannot alter a key, rebuilds the table
// from schema.sql's definition. A ledger on the new key is left alone.
func (l *Ledger) rekeyWebhookEvents(ctx context.Context, tx *sql.Tx) error {
	var q string
	if l.dialect == Postgres {
		q = `SELECT c.conname, a.attname FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
			WHERE c.conrelid = to_regclass('webhook_events') AND c.contype = 'p' ORDER BY a.attname`
	} else {
		q = `SELECT 'pk', name FROM pragma_table_info('webhook_events') WHERE pk > 0 ORDER BY name`
	}
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	var constraint string
	var key []string
	for rows.Next() {
		var column string
		if err := rows.Scan(&constraint, &column); err != nil {
			rows.Close()
			return err
		}
		key = append(key, column)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	switch strings.Join(key, ",") {
	case "event_id,sender":
		return nil
	case "event_id":
	default:
		return fmt.Errorf("its primary key is (%s); want (sender, event_id) or, to move it, (event_id)", strings.Join(key, ", "))
	}
	var stmts []string
	if l.dialect == Postgres {
		stmts = []string{`ALTER TABLE webhook_events DROP CONSTRAINT "` + strings.ReplaceAll(constraint, `"`, `""`) + `", ADD PRIMARY KEY (sender, event_id)`}
	} else {
		create := schemaStatement("CREATE TABLE IF NOT EXISTS webhook_events ")
		if create == "" {
			return errors.New("schema.sql does not create webhook_events")
		}
		const columns = "sender, event_id, order_id, kind, payload, received_at, signalled_at"
		stmts = []string{
			"ALTER TABLE webhook_events RENAME TO webhook_events_by_id",
			create,
			"INSERT INTO webhook_events (" + columns + ") SELECT " + columns + " FROM webhook_events_by_id",
			"DROP TABLE webhook_events_by_id", // and its indexes
		}
		if index := schemaStatement("CREATE INDEX IF NOT EXISTS webhook_events_"); index != "" {
			stmts = append(stmts, index)
		}
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// schemaStatement is the statement of schema.sql that starts with prefix
// (comments aside), or "".
func schemaStatement(prefix string) string {
	for _, stmt := range strings.Split(schema, ";\n") {
		if s := strings.TrimSpace(stripComments(stmt)); strings.HasPrefix(s, prefix) {
			return s
		}
	}
	return ""
}

// hasColumn reports whether table has column, without an error that would
// abort a PostgreSQL transaction.
func (l *Ledger) hasColumn(ctx context.Context, tx *sql.Tx, table, column string) (bool, error) {
	var n int
	var err error
	if l.dialect == Postgres {
		err = tx.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2",
			table, column).Scan(&n)
	} else {
		err = tx.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_info(?) WHERE name = ?", table, column).Scan(&n)
	}
	return n > 0, err
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// Close closes the database.
func (l *Ledger) Close() error { return l.db.Close() }

// DB is the database, for queries of your own.
func (l *Ledger) DB() *sql.DB { return l.db }

// Dialect is the database's dialect.
func (l *Ledger) Dialect() Dialect { return l.dialect }

func (l *Ledger) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return l.db.ExecContext(ctx, l.dialect.Rebind(q), args...)
}

func (l *Ledger) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return l.db.QueryRowContext(ctx, l.dialect.Rebind(q), args...)
}

func (l *Ledger) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return l.db.QueryContext(ctx, l.dialect.Rebind(q), args...)
}

func (l *Ledger) millis() int64 { return l.now().UnixMilli() }

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Item is one line of an order.
type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Order is an order row.
type Order struct {
	ID          string    `json:"order_id"`
	CustomerID  string    `json:"customer_id"`
	Items       []Item    `json:"items"`
	AmountCents int64     `json:"amount_cents"`
	Currency    string    `json:"currency"`
	Status      string    `json:"status"`
	PaymentID   string    `json:"payment_id,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	WorkflowID  string    `json:"workflow_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Amount is the order's amount in FormatMoney's format ("123.45 USD").
func (o Order) Amount() string { return FormatMoney(o.AmountCents, o.Currency) }

const orderColumns = "order_id, customer_id, items, amount_cents, currency, status, payment_id, reason, workflow_id, created_at, updated_at"

func scanOrder(row interface{ Scan(...any) error }) (Order, error) {
	var o Order
	var items string
	var created, updated int64
	err := row.Scan(&o.ID, &o.CustomerID, &items, &o.AmountCents, &o.Currency, &o.Status, &o.PaymentID, &o.Reason, &o.WorkflowID, &created, &updated)
	if err != nil {
		return Order{}, err
	}
	if err := json.Unmarshal([]byte(items), &o.Items); err != nil {
		return Order{}, fmt.Errorf("ledger: order %s has items that do not decode: %w", o.ID, err)
	}
	o.CreatedAt, o.UpdatedAt = fromMillis(created), fromMillis(updated)
	return o, nil
}

// CreateOrder records an order in status "pending", or returns the order
// already recorded under its ID.
func (l *Ledger) CreateOrder(ctx context.Context, o Order) (Order, error) {
	items, err := json.Marshal(o.Items)
	if err != nil {
		return Order{}, err
	}
	now := l.millis()
	if o.Status == "" {
		o.Status = "pending"
	}
	_, err = l.exec(ctx, "INSERT INTO orders ("+orderColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (order_id) DO NOTHING",
		o.ID, o.CustomerID, string(items), o.AmountCents, o.Currency, o.Status, o.PaymentID, o.Reason, o.WorkflowID, now, now)
	if err != nil {
		return Order{}, fmt.Errorf("ledger: create order %s: %w", o.ID, err)
	}
	stored, ok, err := l.Order(ctx, o.ID)
	if err == nil && !ok {
		err = fmt.Errorf("ledger: order %s vanished after it was created", o.ID)
	}
	return stored, err
}

// SetOrderStatus moves an order to status (with the payment and a reason,
// when given).
func (l *Ledger) SetOrderStatus(ctx context.Context, id, status, paymentID, reason string) error {
	_, err := l.exec(ctx, "UPDATE orders SET status = ?, payment_id = CASE WHEN ? = '' THEN payment_id ELSE ? END, reason = ?, updated_at = ? WHERE order_id = ?",
		status, paymentID, paymentID, reason, l.millis(), id)
	if err != nil {
		return fmt.Errorf("ledger: set the status of order %s: %w", id, err)
	}
	return nil
}

// Order reads an order.
func (l *Ledger) Order(ctx context.Context, id string) (Order, bool, error) {
	o, err := scanOrder(l.queryRow(ctx, "SELECT "+orderColumns+" FROM orders WHERE order_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("ledger: read order %s: %w", id, err)
	}
	return o, true, nil
}

// OrderByWorkflow reads the order the workflow wfID places (the latest,
// should there be more than one).
func (l *Ledger) OrderByWorkflow(ctx context.Context, wfID string) (Order, bool, error) {
	o, err := scanOrder(l.queryRow(ctx, "SELECT "+orderColumns+" FROM orders WHERE workflow_id = ? ORDER BY created_at DESC LIMIT 1", wfID))
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("ledger: read the order of workflow %s: %w", wfID, err)
	}
	return o, true, nil
}

// OrderRows are every row of one order.
type OrderRows struct {
	Order        *Order        `json:"order"`
	Reservation  *Reservation  `json:"reservation"`
	Payments     []Payment     `json:"payments"`
	GatewayCalls []GatewayCall `json:"gateway_calls"`
	// Refunds are the gateway's refunds of the order's charges.
	Refunds  []GatewayRefund `json:"refunds"`
	Shipment *Shipment       `json:"shipment"`
}

// Kept is the money the gateway kept of the order: what it charged less
// what it refunded, in minor units of the order's currency.
func (r OrderRows) Kept() int64 {
	var kept int64
	for _, c := range r.GatewayCalls {
		if c.Charged() {
			kept += c.AmountCents
		}
	}
	for _, f := range r.Refunds {
		kept -= f.AmountCents
	}
	return kept
}

// ReadOrderRows reads every row of an order; OrderRows.Order is nil when
// the ledger has no such order.
func (l *Ledger) ReadOrderRows(ctx context.Context, orderID string) (OrderRows, error) {
	var r OrderRows
	o, ok, err := l.Order(ctx, orderID)
	if err != nil || !ok {
		return r, err
	}
	r.Order = &o
	if res, ok, err := l.ReservationOf(ctx, orderID); err != nil {
		return r, err
	} else if ok {
		r.Reservation = &res
	}
	if r.Payments, err = l.Payments(ctx, orderID); err != nil {
		return r, err
	}
	if r.GatewayCalls, err = l.GatewayCalls(ctx, orderID); err != nil {
		return r, err
	}
	if r.Refunds, err = l.GatewayRefunds(ctx, orderID); err != nil {
		return r, err
	}
	if s, ok, err := l.ShipmentOf(ctx, orderID); err != nil {
		return r, err
	} else if ok {
		r.Shipment = &s
	}
	return r, nil
}

// RecentOrders lists the latest orders, newest first.
func (l *Ledger) RecentOrders(ctx context.Context, limit int) ([]Order, error) {
	rows, err := l.query(ctx, "SELECT "+orderColumns+" FROM orders ORDER BY created_at DESC, order_id DESC LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: list orders: %w", err)
	}
	defer rows.Close()
	var out []Order
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}
