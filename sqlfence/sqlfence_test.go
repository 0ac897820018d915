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

// TestUpsertRefusesReservedNames: a table named excluded (the name ON
// CONFLICT gives the proposed row) made SQLite compare the written fence
// with itself, so a zombie's stale write overwrote a newer one; other
// reserved words made the statement fail to parse, at the first write.
// Both are refused before any SQL runs, whatever the case, and the
// message says why and what to do.
func TestUpsertRefusesReservedNames(t *testing.T) {
	t.Parallel()
	for _, d := range databases(t) {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db := d.open(t)
			db.SetMaxOpenConns(1) // PostgreSQL: the temporary table is the session's
			ctx := context.Background()
			if _, err := db.ExecContext(ctx, `CREATE TEMPORARY TABLE excluded (op_key TEXT PRIMARY KEY,
				fence_epoch BIGINT NOT NULL, fence_attempt BIGINT NOT NULL, fence_rev BIGINT NOT NULL, status TEXT NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE excluded") })
			w := func(f onceflow.Fence, status string) sqlfence.Write {
				return sqlfence.Write{Table: "excluded", KeyColumn: "op_key", Key: "k", Fence: f, Columns: []string{"status"}, Values: []any{status}, Update: []string{"status"}}
			}
			newer := sqlfence.Upsert(ctx, db, d.dialect, w(onceflow.Fence{Epoch: 5, Attempt: 2, Rev: 3}, "newer"))
			stale := sqlfence.Upsert(ctx, db, d.dialect, w(onceflow.Fence{Epoch: 5, Attempt: 1, Rev: 1}, "zombie"))
			var status string
			_ = db.QueryRowContext(ctx, "SELECT status FROM excluded WHERE op_key = 'k'").Scan(&status)
			for _, err := range []error{newer, stale} {
				if err == nil || !strings.Contains(err.Error(), `"excluded" is a reserved word`) || !strings.Contains(err.Error(), "rename") {
					t.Fatalf("writes to a table named excluded: the newer got %v, the stale one %v (the row's status is %q); want both refused, naming the word",
						newer, stale, status)
				}
			}
			if status != "" {
				t.Fatalf("a refused write wrote %q", status)
			}
			if _, _, err := sqlfence.Stored(ctx, db, d.dialect, "excluded", "op_key", "k"); err == nil || !strings.Contains(err.Error(), "reserved") {
				t.Fatalf("Stored on a table named excluded: %v", err)
			}
		})
	}
	for _, name := range []string{"excluded", "Excluded", "EXCLUDED", "order", "user", "values", "select", "table"} {
		for what, w := range map[string]sqlfence.Write{
			"table":      {Table: name, KeyColumn: "k"},
			"key column": {Table: "t", KeyColumn: name},
			"column":     {Table: "t", KeyColumn: "k", Columns: []string{name}, Values: []any{1}},
		} {
			err := sqlfence.Upsert(context.Background(), nil, sqlfence.SQLite, w)
			if err == nil || !strings.Contains(err.Error(), "reserved word") || !sqlfence.Reserved(name) {
				t.Errorf("%s as the %s: %v, want it refused as a reserved word", name, what, err)
			}
		}
	}
}

// sqliteKeywords are SQLite's key words (https://sqlite.org/lang_keywords.html).
const sqliteKeywords = `ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE BEGIN BETWEEN BY
CASCADE CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP
DATABASE DEFAULT DEFERRABLE DEFERRED DELETE DESC DETACH DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE EXISTS
EXPLAIN FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP GROUPS HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED
INITIALLY INNER INSERT INSTEAD INTERSECT INTO IS ISNULL JOIN KEY LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL NO NOT NOTHING
NOTNULL NULL NULLS OF OFFSET ON OR ORDER OTHERS OUTER OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY QUERY RAISE RANGE RECURSIVE
REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT ROLLBACK ROW ROWS SAVEPOINT SELECT SET TABLE TEMP
TEMPORARY THEN TIES TO TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE UPDATE USING VACUUM VALUES VIEW VIRTUAL WHEN WHERE WINDOW WITH WITHOUT`

// TestUpsertTakesEveryOtherKeyword: the reserved list is not too short
// nor too long. Every key word of SQLite and of the PostgreSQL under test
// that Reserved lets through works as a table name and as its key column,
// fence included (a stale write is refused), in one rolled-back
// transaction per database.
func TestUpsertTakesEveryOtherKeyword(t *testing.T) {
	t.Parallel()
	for _, d := range databases(t) {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db := d.open(t)
			ctx := context.Background()
			words := map[string]bool{}
			for _, w := range strings.Fields(sqliteKeywords) {
				words[strings.ToLower(w)] = true
			}
			if d.dialect == sqlfence.PostgreSQL {
				rows, err := db.QueryContext(ctx, "SELECT word FROM pg_get_keywords()")
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var w string
					if err := rows.Scan(&w); err != nil {
						t.Fatal(err)
					}
					words[w] = true
				}
				if err := rows.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// PostgreSQL looks types up in the temporary schema first: once
			// a table named text exists, TEXT would be its row type.
			text, bigint := "TEXT", "BIGINT"
			if d.dialect == sqlfence.PostgreSQL {
				text, bigint = "pg_catalog.text", "pg_catalog.int8"
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			taken := 0
			for w := range words {
				if sqlfence.Reserved(w) {
					continue
				}
				taken++
				q := `"` + w + `"`
				if _, err := tx.ExecContext(ctx, "CREATE TEMPORARY TABLE "+q+" ("+q+" "+text+" PRIMARY KEY, fence_epoch "+bigint+
					" NOT NULL, fence_attempt "+bigint+" NOT NULL, fence_rev "+bigint+" NOT NULL)"); err != nil {
					t.Fatalf("create a table named %s: %v", w, err)
				}
				write := sqlfence.Write{Table: w, KeyColumn: w, Key: "k", Fence: onceflow.Fence{Epoch: 2, Attempt: 2, Rev: 2}}
				if err := sqlfence.Upsert(ctx, tx, d.dialect, write); err != nil {
					t.Fatalf("%s, a key word Reserved lets through, as a table and its key column: %v", w, err)
				}
				write.Fence = onceflow.Fence{Epoch: 1, Attempt: 1, Rev: 1}
				if err := sqlfence.Upsert(ctx, tx, d.dialect, write); !errors.Is(err, sqlfence.ErrStale) {
					t.Fatalf("%s as a table and its key column: a stale write got %v, want ErrStale", w, err)
				}
			}
			t.Logf("%d key words taken as names, %d refused", taken, len(words)-taken)
		})
	}
}
