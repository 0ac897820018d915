package ledger_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/onceflow/onceflow/examples/order/ledger"
)

// eachLedger runs test on a SQLite ledger and, when LEDGER_DSN names a
// PostgreSQL, on that too. fresh makes the DSN of an empty database;
// open opens a *sql.DB on it (for a ledger made by hand, as an older
// version made it).
func eachLedger(t *testing.T, test func(t *testing.T, fresh func(t *testing.T) string, open func(t *testing.T, dsn string) *sql.DB)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ledger.db") },
			func(t *testing.T, dsn string) *sql.DB {
				db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(dsn, "sqlite:"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				return db
			})
	})
	base := os.Getenv("LEDGER_DSN")
	if !strings.HasPrefix(base, "postgres") {
		t.Log("PostgreSQL left out: set LEDGER_DSN=postgres://… to run these tests on it too")
		return
	}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		// A schema of its own (search_path), dropped afterwards: the
		// database is shared by every test and run.
		fresh := func(t *testing.T) string {
			admin, err := sql.Open("pgx", base)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			name := "ledger_test_" + randomHex(6)
			if _, err := admin.ExecContext(context.Background(), "CREATE SCHEMA "+name); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if admin, err := sql.Open("pgx", base); err == nil {
					_, _ = admin.ExecContext(context.Background(), "DROP SCHEMA "+name+" CASCADE")
					_ = admin.Close()
				}
			})
			sep := "?"
			if strings.Contains(base, "?") {
				sep = "&"
			}
			return base + sep + "search_path=" + name
		}
		test(t, fresh, func(t *testing.T, dsn string) *sql.DB {
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db
		})
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func openLedger(t *testing.T, dsn string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// twoSenders: a second sender that uses an event ID the first one used
// has its own event, recorded and answered with its own order; the first
// sender's redelivery still gets the first event; marking one signalled
// leaves the other. Keyed by the event ID alone, the second sender's
// event was dropped and it was answered the first sender's order.
func twoSenders(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	id := "evt-" + randomHex(6)
	orderA, orderB := "order-a-"+id, "order-b-"+id
	a, recorded, err := l.RecordWebhookEvent(ctx, ledger.WebhookEvent{EventID: id, Sender: "sender-a", OrderID: orderA, Kind: "payment.captured", Payload: []byte(`{"from":"a"}`)})
	if err != nil || !recorded || a.OrderID != orderA || a.Sender != "sender-a" {
		t.Fatalf("sender a: %+v, recorded %v, %v", a, recorded, err)
	}
	b, recorded, err := l.RecordWebhookEvent(ctx, ledger.WebhookEvent{EventID: id, Sender: "sender-b", OrderID: orderB, Kind: "payment.failed", Payload: []byte(`{"from":"b"}`)})
	if err != nil || !recorded || b.OrderID != orderB || b.Sender != "sender-b" || b.Kind != "payment.failed" || string(b.Payload) != `{"from":"b"}` {
		t.Fatalf("sender b, the same event ID: %+v, recorded %v, %v; want its own event", b, recorded, err)
	}
	again, recorded, err := l.RecordWebhookEvent(ctx, ledger.WebhookEvent{EventID: id, Sender: "sender-a", OrderID: "order-x", Kind: "payment.captured"})
	if err != nil || recorded || again.OrderID != orderA {
		t.Fatalf("sender a's redelivery: %+v, recorded %v, %v", again, recorded, err)
	}
	if err := l.MarkWebhookEventSignalled(ctx, "sender-b", id); err != nil {
		t.Fatal(err)
	}
	ea, _, err := l.WebhookEvent(ctx, "sender-a", id)
	if err != nil {
		t.Fatal(err)
	}
	eb, _, err := l.WebhookEvent(ctx, "sender-b", id)
	if err != nil || !ea.SignalledAt.IsZero() || eb.SignalledAt.IsZero() {
		t.Fatalf("signalled: a %v, b %v (%v)", ea.SignalledAt, eb.SignalledAt, err)
	}
	if _, ok, err := l.WebhookEvent(ctx, "sender-c", id); ok || err != nil {
		t.Fatalf("a third sender reads an event: %v %v", ok, err)
	}
	for order, sender := range map[string]string{orderA: "sender-a", orderB: "sender-b"} {
		es, err := l.WebhookEvents(ctx, order)
		if err != nil || len(es) != 1 || es[0].Sender != sender || es[0].EventID != id {
			t.Fatalf("the events of %s: %+v, %v", order, es, err)
		}
	}
}

func TestWebhookEventsAreKeyedBySenderAndEventID(t *testing.T) {
	t.Parallel()
	eachLedger(t, func(t *testing.T, fresh func(*testing.T) string, _ func(*testing.T, string) *sql.DB) {
		twoSenders(t, openLedger(t, fresh(t)))
	})
}

// TestOpenRekeysAnOlderLedger: a ledger made by a version that keyed
// webhook events by their ID alone (here the oldest, without
// signalled_at either) is moved to (sender, event_id) when it is opened,
// its events kept; opening it again changes nothing.
func TestOpenRekeysAnOlderLedger(t *testing.T) {
	t.Parallel()
	eachLedger(t, func(t *testing.T, fresh func(*testing.T) string, open func(*testing.T, string) *sql.DB) {
		ctx := context.Background()
		dsn := fresh(t)
		db := open(t, dsn)
		for _, stmt := range []string{
			`CREATE TABLE webhook_events (
			  event_id     TEXT PRIMARY KEY,
			  sender       TEXT NOT NULL,
			  order_id     TEXT NOT NULL,
			  kind         TEXT NOT NULL,
			  payload      TEXT NOT NULL,
			  received_at  BIGINT NOT NULL
			)`,
			`INSERT INTO webhook_events (event_id, sender, order_id, kind, payload, received_at) VALUES ('evt-old', 'sender-a', 'order-old', 'payment.captured', '{}', 1700000000000)`,
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		l := openLedger(t, dsn)
		old, ok, err := l.WebhookEvent(ctx, "sender-a", "evt-old")
		if err != nil || !ok || old.OrderID != "order-old" || old.ReceivedAt.UnixMilli() != 1700000000000 || !old.SignalledAt.IsZero() {
			t.Fatalf("the event recorded before the migration: %+v, %v, %v", old, ok, err)
		}
		b, recorded, err := l.RecordWebhookEvent(ctx, ledger.WebhookEvent{EventID: "evt-old", Sender: "sender-b", OrderID: "order-old-b", Kind: "payment.captured"})
		if err != nil || !recorded || b.OrderID != "order-old-b" {
			t.Fatalf("another sender's evt-old on the migrated ledger: %+v, recorded %v, %v", b, recorded, err)
		}
		twoSenders(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		again := openLedger(t, dsn) // on the new key: left alone
		if es, err := again.WebhookEvents(ctx, "order-old"); err != nil || len(es) != 1 || es[0].Sender != "sender-a" {
			t.Fatalf("after a second Open: %+v, %v", es, err)
		}
		twoSenders(t, again)
	})
}
