package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/sqlfence"
)

// database is one database the tests run on.
type database struct {
	name    string
	dialect sqlfence.Dialect
	open    func(t *testing.T) *sql.DB
}

// databases are SQLite always, and PostgreSQL when LEDGER_DSN (or
// SQLFENCE_POSTGRES_DSN) names one; scripts/test sets it to the local
// PostgreSQL. Under CI=true a missing PostgreSQL fails the test instead of
// leaving it out.
func databases(t *testing.T) []database {
	t.Helper()
	dbs := []database{{"sqlite", sqlfence.SQLite, func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "fence.db")+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}}}
	dsn := os.Getenv("SQLFENCE_POSTGRES_DSN")
	if dsn == "" {
		dsn = os.Getenv("LEDGER_DSN")
	}
	if !strings.HasPrefix(dsn, "postgres") {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, but no PostgreSQL: set LEDGER_DSN=postgres://… (scripts/test does when one answers on 127.0.0.1:5432)")
		}
		t.Log("PostgreSQL left out: set LEDGER_DSN=postgres://… to run these tests on it too")
		return dbs
	}
	return append(dbs, database{"postgresql", sqlfence.PostgreSQL, func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}})
}

var tables atomic.Int64

// newTable creates a fenced table of its own for one test and drops it
// afterwards.
func newTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	name := fmt.Sprintf("fenced_%d_%d", os.Getpid(), tables.Add(1))
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+name+` (
		op_key TEXT PRIMARY KEY,
		fence_epoch BIGINT NOT NULL,
		fence_attempt BIGINT NOT NULL,
		fence_rev BIGINT NOT NULL,
		status TEXT NOT NULL,
		first_writer TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE "+name) })
	return name
}

type row struct {
	fence         onceflow.Fence
	status, first string
}

func readRow(t *testing.T, db *sql.DB, d sqlfence.Dialect, table, key string) (row, bool) {
	t.Helper()
	var r row
	err := db.QueryRowContext(context.Background(), d.Rebind("SELECT fence_epoch, fence_attempt, fence_rev, status, first_writer FROM "+table+" WHERE op_key = ?"), key).
		Scan(&r.fence.Epoch, &r.fence.Attempt, &r.fence.Rev, &r.status, &r.first)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

func write(table, key string, f onceflow.Fence, status string) sqlfence.Write {
	return sqlfence.Write{
		Table: table, KeyColumn: "op_key", Key: key, Fence: f,
		Columns: []string{"status", "first_writer"},
		Values:  []any{status, status},
		Update:  []string{"status"},
	}
}

// TestUpsert is the fencing rule on each database: a missing row is
// inserted, a newer or equal fence overwrites, an older one (a zombie) is
// refused with the stored fence, and the columns left out of Update keep
// the first writer's values.
func TestUpsert(t *testing.T) {
	t.Parallel()
	for _, d := range databases(t) {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db := d.open(t)
			ctx := context.Background()
			for _, c := range []struct {
				name string
				// existing is the row's fence before the write (nil: no row).
				existing *onceflow.Fence
				write    onceflow.Fence
				stale    bool
			}{
				{name: "missing row is inserted", write: onceflow.Fence{Epoch: 5, Attempt: 1, Rev: 2}},
				{name: "newer rev wins", existing: &onceflow.Fence{Epoch: 5, Attempt: 1, Rev: 2}, write: onceflow.Fence{Epoch: 5, Attempt: 1, Rev: 3}},
				{name: "newer attempt wins over a greater rev", existing: &onceflow.Fence{Epoch: 5, Attempt: 1, Rev: 9}, write: onceflow.Fence{Epoch: 5, Attempt: 2, Rev: 1}},
				{name: "newer epoch wins over a greater attempt", existing: &onceflow.Fence{Epoch: 5, Attempt: 9, Rev: 20}, write: onceflow.Fence{Epoch: 6, Attempt: 1, Rev: 2}},
				{name: "known epoch wins over an unknown one", existing: &onceflow.Fence{Attempt: 9, Rev: 20}, write: onceflow.Fence{Epoch: 1, Attempt: 1, Rev: 1}},
				{name: "equal fence repeats its write", existing: &onceflow.Fence{Epoch: 5, Attempt: 2, Rev: 3}, write: onceflow.Fence{Epoch: 5, Attempt: 2, Rev: 3}},
				{name: "zombie with an older rev is refused", existing: &onceflow.Fence{Epoch: 5, Attempt: 2, Rev: 3}, write: onceflow.Fence{Epoch: 5, Attempt: 2, Rev: 2}, stale: true},
				{name: "zombie with an older attempt is refused", existing: &onceflow.Fence{Epoch: 5, Attempt: 2, Rev: 1}, write: onceflow.Fence{Epoch: 5, Attempt: 1, Rev: 7}, stale: true},
				{name: "zombie of a lost record is refused", existing: &onceflow.Fence{Epoch: 6, Attempt: 1, Rev: 2}, write: onceflow.Fence{Epoch: 5, Attempt: 9, Rev: 20}, stale: true},
			} {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					table := newTable(t, db)
					if c.existing != nil {
						if err := sqlfence.Upsert(ctx, db, d.dialect, write(table, "k", *c.existing, "first")); err != nil {
							t.Fatal(err)
						}
					}
					err := sqlfence.Upsert(ctx, db, d.dialect, write(table, "k", c.write, "second"))
					got, ok := readRow(t, db, d.dialect, table, "k")
					if !ok {
						t.Fatal("no row after the write")
					}
					if c.stale {
						var se *sqlfence.StaleError
						if !errors.Is(err, sqlfence.ErrStale) || !errors.As(err, &se) {
							t.Fatalf("Upsert = %v, want a *StaleError", err)
						}
						if se.Stored != *c.existing || se.Attempted != c.write || se.Table != table || se.Key != "k" {
							t.Errorf("StaleError = %+v, want stored %v, attempted %v", se, *c.existing, c.write)
						}
						if got.fence != *c.existing || got.status != "first" {
							t.Errorf("row = %+v after a refused write, want the first writer's", got)
						}
						return
					}
					if err != nil {
						t.Fatalf("Upsert = %v, want it written", err)
					}
					if got.fence != c.write || got.status != "second" {
						t.Errorf("row = %+v, want fence %v and status second", got, c.write)
					}
					if want := "first"; c.existing != nil && got.first != want {
						t.Errorf("first_writer = %q, want %q (not in Update)", got.first, want)
					}
					if f, ok, err := sqlfence.Stored(ctx, db, d.dialect, table, "op_key", "k"); err != nil || !ok || f != c.write {
						t.Errorf("Stored = %v, %v, %v; want %v", f, ok, err, c.write)
					}
				})
			}
		})
	}
}

// TestStoredMissingRow: no row is (zero, false), not an error.
func TestStoredMissingRow(t *testing.T) {
	t.Parallel()
	for _, d := range databases(t) {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db := d.open(t)
			table := newTable(t, db)
			f, ok, err := sqlfence.Stored(context.Background(), db, d.dialect, table, "op_key", "nobody")
			if err != nil || ok || f != (onceflow.Fence{}) {
				t.Fatalf("Stored = %v, %v, %v; want zero, false, nil", f, ok, err)
			}
		})
	}
}

// TestUpsertInATransaction: the write joins the caller's transaction, and
// a rollback takes it back.
func TestUpsertInATransaction(t *testing.T) {
	t.Parallel()
	for _, d := range databases(t) {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db := d.open(t)
			table := newTable(t, db)
			ctx := context.Background()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := sqlfence.Upsert(ctx, tx, d.dialect, write(table, "k", onceflow.Fence{Attempt: 1, Rev: 1}, "tx")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if r, ok := readRow(t, db, d.dialect, table, "k"); ok {
				t.Fatalf("row %+v survived the rollback", r)
			}
		})
	}
}

// TestUpsertRefusesBadWrites: identifiers are checked before any SQL runs,
// and the fence columns come from Fence only.
func TestUpsertRefusesBadWrites(t *testing.T) {
	t.Parallel()
	for name, w := range map[string]sqlfence.Write{
		"injection in the table":  {Table: "t; DROP TABLE x", KeyColumn: "k"},
		"upper-case column":       {Table: "t", KeyColumn: "K"},
		"values do not match":     {Table: "t", KeyColumn: "k", Columns: []string{"a"}},
		"fence column in Columns": {Table: "t", KeyColumn: "k", Columns: []string{"fence_rev"}, Values: []any{1}},
		"update not in Columns":   {Table: "t", KeyColumn: "k", Columns: []string{"a"}, Values: []any{1}, Update: []string{"b"}},
	} {
		if err := sqlfence.Upsert(context.Background(), nil, sqlfence.SQLite, w); err == nil || !strings.HasPrefix(err.Error(), "sqlfence: ") {
			t.Errorf("%s: Upsert = %v, want a sqlfence error", name, err)
		}
	}
}

func TestRebind(t *testing.T) {
	t.Parallel()
	q := "SELECT a FROM t WHERE b = ? AND c = ?"
	if got := sqlfence.SQLite.Rebind(q); got != q {
		t.Errorf("SQLite.Rebind = %q", got)
	}
	if got, want := sqlfence.PostgreSQL.Rebind(q), "SELECT a FROM t WHERE b = $1 AND c = $2"; got != want {
		t.Errorf("PostgreSQL.Rebind = %q, want %q", got, want)
	}
}
