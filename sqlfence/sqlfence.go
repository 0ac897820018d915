package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow"
)

// The three fence columns a fenced table has, BIGINT (INTEGER in SQLite).
const (
	EpochColumn   = "fence_epoch"
	AttemptColumn = "fence_attempt"
	RevColumn     = "fence_rev"
)

var fenceColumns = []string{EpochColumn, AttemptColumn, RevColumn}

// Dialect is the SQL a database speaks where SQLite and PostgreSQL differ
// for a fenced write: how parameters are written.
type Dialect int

const (
	// SQLite writes parameters as ?.
	SQLite Dialect = iota
	// PostgreSQL writes parameters as $1, $2, ….
	PostgreSQL
)

// String returns "sqlite" or "postgresql".
func (d Dialect) String() string {
	if d == PostgreSQL {
		return "postgresql"
	}
	return "sqlite"
}

// Rebind turns the ? placeholders of q into the dialect's. q must not hold
// a ? inside a string literal.
func (d Dialect) Rebind(q string) string {
	if d != PostgreSQL {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// ErrStale is what a write with an older fence than the stored row's is
// refused with; errors.Is finds it in a *StaleError.
var ErrStale = errors.New("sqlfence: stale fence")

// StaleError says a fenced write was refused: a newer attempt wrote the
// row. The writer is a zombie (its lease was taken over, or its record
// was lost and created again); it must not retry the write, and its
// result must not be used.
type StaleError struct {
	Table, Key string
	// Stored is the fence of the row; Attempted the refused write's.
	Stored, Attempted onceflow.Fence
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("sqlfence: %s %q was written by attempt %s; the write of attempt %s is stale (its lease was taken over) and was refused",
		e.Table, e.Key, e.Stored, e.Attempted)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// DB is what a fenced write goes through: a *sql.DB, *sql.Tx or *sql.Conn.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Write is one row written under a fence.
type Write struct {
	// Table is the table, and KeyColumn its UNIQUE (or primary key)
	// column; Key the row's value of it. Plain lower-case SQL identifiers,
	// none of them a reserved word (Reserved).
	Table     string
	KeyColumn string
	Key       any
	// Fence is the writing attempt's (onceactivity.Fence).
	Fence onceflow.Fence
	// Columns and Values are the row's other columns, written on insert.
	Columns []string
	Values  []any
	// Update names the columns (of Columns) that a write with a newer or
	// equal fence overwrites; the others keep the first writer's values
	// (an ID, a creation time). The fence columns are always updated.
	Update []string
}

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// reserved are the words the generated statements cannot take unquoted
// as a table or column name: PostgreSQL's reserved key words (categories R
// and T of pg_get_keywords(), PostgreSQL 15), the key words SQLite (3.46)
// refuses there, and excluded, the name both give the proposed row in
// ON CONFLICT … DO UPDATE: a table named excluded makes SQLite compare the
// new fence with itself, so every write wins and the fence is gone.
// TestUpsertTakesEveryOtherKeyword checks that every other key word of
// both works.
var reserved = map[string]bool{
	"add": true, "all": true, "alter": true, "analyse": true, "analyze": true, "and": true, "any": true, "array": true,
	"as": true, "asc": true, "asymmetric": true, "authorization": true, "autoincrement": true, "between": true,
	"binary": true, "both": true, "case": true, "cast": true, "check": true, "collate": true, "collation": true,
	"column": true, "commit": true, "concurrently": true, "constraint": true, "create": true, "cross": true,
	"current_catalog": true, "current_date": true, "current_role": true, "current_schema": true, "current_time": true,
	"current_timestamp": true, "current_user": true, "default": true, "deferrable": true, "delete": true, "desc": true,
	"distinct": true, "do": true, "drop": true, "else": true, "end": true, "escape": true, "except": true,
	"excluded": true, "exists": true, "false": true, "fetch": true, "for": true, "foreign": true, "freeze": true,
	"from": true, "full": true, "grant": true, "group": true, "having": true, "ilike": true, "in": true, "index": true,
	"initially": true, "inner": true, "insert": true, "intersect": true, "into": true, "is": true, "isnull": true,
	"join": true, "lateral": true, "leading": true, "left": true, "like": true, "limit": true, "localtime": true,
	"localtimestamp": true, "natural": true, "not": true, "nothing": true, "notnull": true, "null": true, "offset": true,
	"on": true, "only": true, "or": true, "order": true, "outer": true, "overlaps": true, "placing": true,
	"primary": true, "raise": true, "references": true, "returning": true, "right": true, "select": true,
	"session_user": true, "set": true, "similar": true, "some": true, "symmetric": true, "table": true,
	"tablesample": true, "then": true, "to": true, "trailing": true, "transaction": true, "true": true, "union": true,
	"unique": true, "update": true, "user": true, "using": true, "values": true, "variadic": true, "verbose": true,
	"when": true, "where": true, "window": true, "with": true,
}

// Reserved reports whether name is a word Upsert and Stored refuse as a
// table or column name (case-insensitively): excluded, and the SQL key
// words SQLite or PostgreSQL do not take unquoted in the statements they
// generate.
func Reserved(name string) bool { return reserved[strings.ToLower(name)] }

// checkIdentifier refuses a name the statements cannot take as it is.
func checkIdentifier(name string) error {
	if Reserved(name) {
		return fmt.Errorf("%q is a reserved word in SQLite or PostgreSQL, which the generated statement cannot take as a name "+
			"(excluded would even compare the written fence with itself and let every stale write through): rename the table or column", name)
	}
	if !identifier.MatchString(name) {
		return fmt.Errorf("%q is not a plain lower-case SQL identifier", name)
	}
	return nil
}

func (w Write) check() error {
	if len(w.Columns) != len(w.Values) {
		return fmt.Errorf("sqlfence: write to %s: %d columns, %d values", w.Table, len(w.Columns), len(w.Values))
	}
	inColumns := make(map[string]bool, len(w.Columns))
	for _, n := range append([]string{w.Table, w.KeyColumn}, w.Columns...) {
		if err := checkIdentifier(n); err != nil {
			return fmt.Errorf("sqlfence: write to %s: %w", w.Table, err)
		}
		inColumns[n] = true
	}
	for _, c := range fenceColumns {
		if inColumns[c] {
			return fmt.Errorf("sqlfence: write to %s: %s is written from Fence; leave it out of Columns", w.Table, c)
		}
	}
	for _, n := range w.Update {
		if !inColumns[n] || n == w.KeyColumn || n == w.Table {
			return fmt.Errorf("sqlfence: write to %s: Update names %q, which is not one of Columns", w.Table, n)
		}
	}
	return nil
}

// Upsert inserts w's row, or, when a row with its key exists, overwrites
// its Update columns and its fence if and only if the stored fence is not
// newer than w.Fence (Fence.Less, in SQL a row comparison of the three
// columns): one statement, so two writers cannot interleave between a
// check and a write. A write with an equal fence wins, so an attempt may
// repeat its own write.
//
// It returns nil when the row was written, and a *StaleError (errors.Is
// ErrStale) when a newer attempt's write stands. In SQL, for a table
// payments keyed by idempotency_key:
//
//	INSERT INTO payments (idempotency_key, fence_epoch, fence_attempt, fence_rev, status, …)
//	VALUES (?, ?, ?, ?, ?, …)
//	ON CONFLICT (idempotency_key) DO UPDATE SET
//	  fence_epoch = excluded.fence_epoch, fence_attempt = excluded.fence_attempt,
//	  fence_rev = excluded.fence_rev, status = excluded.status
//	WHERE (payments.fence_epoch, payments.fence_attempt, payments.fence_rev)
//	   <= (excluded.fence_epoch, excluded.fence_attempt, excluded.fence_rev)
func Upsert(ctx context.Context, db DB, d Dialect, w Write) error {
	if err := w.check(); err != nil {
		return err
	}
	cols := append([]string{w.KeyColumn, EpochColumn, AttemptColumn, RevColumn}, w.Columns...)
	args := append([]any{w.Key, w.Fence.Epoch, w.Fence.Attempt, w.Fence.Rev}, w.Values...)
	set := make([]string, 0, 3+len(w.Update))
	for _, c := range append(fenceColumns[:3:3], w.Update...) {
		set = append(set, c+" = excluded."+c)
	}
	t := w.Table
	q := "INSERT INTO " + t + " (" + strings.Join(cols, ", ") + ") VALUES (?" + strings.Repeat(", ?", len(cols)-1) + ")" +
		" ON CONFLICT (" + w.KeyColumn + ") DO UPDATE SET " + strings.Join(set, ", ") +
		" WHERE (" + t + ".fence_epoch, " + t + ".fence_attempt, " + t + ".fence_rev) <= (excluded.fence_epoch, excluded.fence_attempt, excluded.fence_rev)"
	res, err := db.ExecContext(ctx, d.Rebind(q), args...)
	if err != nil {
		return fmt.Errorf("sqlfence: write to %s: %w", t, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: write to %s: %w", t, err)
	}
	if n > 0 {
		return nil
	}
	stored, found, err := Stored(ctx, db, d, t, w.KeyColumn, w.Key)
	if err != nil {
		return fmt.Errorf("sqlfence: write to %s was refused as stale, and reading the newer fence failed: %w", t, err)
	}
	if !found {
		return fmt.Errorf("sqlfence: write to %s %v changed no row, and no row has that key: is %s UNIQUE?", t, w.Key, w.KeyColumn)
	}
	return &StaleError{Table: t, Key: fmt.Sprint(w.Key), Stored: stored, Attempted: w.Fence}
}

// Stored returns the fence of the row of table whose keyColumn is key, and
// false when there is no such row.
func Stored(ctx context.Context, db DB, d Dialect, table, keyColumn string, key any) (onceflow.Fence, bool, error) {
	for _, n := range []string{table, keyColumn} {
		if err := checkIdentifier(n); err != nil {
			return onceflow.Fence{}, false, fmt.Errorf("sqlfence: read the fence of %s: %w", table, err)
		}
	}
	var f onceflow.Fence
	err := db.QueryRowContext(ctx, d.Rebind("SELECT fence_epoch, fence_attempt, fence_rev FROM "+table+" WHERE "+keyColumn+" = ?"), key).
		Scan(&f.Epoch, &f.Attempt, &f.Rev)
	if errors.Is(err, sql.ErrNoRows) {
		return onceflow.Fence{}, false, nil
	}
	if err != nil {
		return onceflow.Fence{}, false, fmt.Errorf("sqlfence: read the fence of %s %v: %w", table, key, err)
	}
	return f, true, nil
}
