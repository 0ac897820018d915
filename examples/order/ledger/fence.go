package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/onceflow/onceflow/idemstore"
)

// Fence is a fencing token: the (epoch, attempt, rev) of the onceflow
// attempt that writes (idemstore.Fence, from onceactivity.Fence inside a
// wrapped activity). It grows on every takeover, and across a loss of the
// Redis record (the epoch is the record's creation time), so the newer of
// two writers has the greater fence.
type Fence struct {
	Epoch   int64 `json:"epoch,omitempty"`
	Attempt int64 `json:"attempt"`
	Rev     int64 `json:"rev"`
}

// FenceOf converts the library's fence.
func FenceOf(f idemstore.Fence) Fence { return Fence{Epoch: f.Epoch, Attempt: f.Attempt, Rev: f.Rev} }

// Less reports whether f is older than g.
func (f Fence) Less(g Fence) bool {
	return idemstore.Fence(f).Less(idemstore.Fence(g))
}

// String returns "attempt.rev", with "@epoch" when the epoch is known.
func (f Fence) String() string { return idemstore.Fence(f).String() }

// ErrStaleFence is what a write with an older fence than the stored row's
// is refused with; errors.Is finds it in a *StaleFenceError.
var ErrStaleFence = errors.New("ledger: stale fence")

// StaleFenceError says a fenced write was refused: a newer attempt wrote
// the row. The writer is a zombie (its lease was taken over); it must not
// retry the write, and its result must not be used.
type StaleFenceError struct {
	Table, Key string
	// Stored is the fence of the row; Attempted the refused write's.
	Stored, Attempted Fence
}

func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("ledger: %s %q was written by attempt %s; the write of attempt %s is stale (its lease was taken over) and was refused",
		e.Table, e.Key, e.Stored, e.Attempted)
}

// Is makes errors.Is(err, ErrStaleFence) true.
func (e *StaleFenceError) Is(target error) bool { return target == ErrStaleFence }

// Execer is what FencedUpsert writes through: a *sql.DB, *sql.Tx or
// *sql.Conn.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// FencedWrite is one row written under a fence. The table needs a UNIQUE
// (or primary key) KeyColumn and three BIGINT columns, fence_epoch,
// fence_attempt and fence_rev.
type FencedWrite struct {
	Table     string
	KeyColumn string
	Key       any
	Fence     Fence
	// Columns and Values are the row's other columns, written on insert.
	Columns []string
	Values  []any
	// Update names the columns (of Columns) a write with a newer or equal
	// fence overwrites; the others keep the first writer's values (an ID,
	// a creation time).
	Update []string
}

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// FencedUpsert inserts w's row, or, when a row with its key exists,
// overwrites its Update columns if and only if the stored fence is not
// newer than w.Fence: one statement, so two writers cannot interleave
// between a check and a write. It reports whether the row was written;
// false means a newer attempt's write stands (read the row to see it).
//
// In SQL, for a table payments keyed by idempotency_key:
//
//	INSERT INTO payments (idempotency_key, fence_epoch, fence_attempt, fence_rev, status, …)
//	VALUES (?, ?, ?, ?, ?, …)
//	ON CONFLICT (idempotency_key) DO UPDATE SET
//	  fence_epoch = excluded.fence_epoch, fence_attempt = excluded.fence_attempt,
//	  fence_rev = excluded.fence_rev, status = excluded.status
//	WHERE (payments.fence_epoch, payments.fence_attempt, payments.fence_rev)
//	   <= (excluded.fence_epoch, excluded.fence_attempt, excluded.fence_rev)
//
// SQLite (3.24+) and PostgreSQL (9.5+) both run it.
func FencedUpsert(ctx context.Context, db Execer, d Dialect, w FencedWrite) (written bool, err error) {
	if len(w.Columns) != len(w.Values) {
		return false, fmt.Errorf("ledger: fenced write to %s: %d columns, %d values", w.Table, len(w.Columns), len(w.Values))
	}
	names := append([]string{w.Table, w.KeyColumn}, w.Columns...)
	for _, n := range append(names, w.Update...) {
		if !identifier.MatchString(n) {
			return false, fmt.Errorf("ledger: fenced write: %q is not a plain SQL identifier", n)
		}
	}
	cols := append([]string{w.KeyColumn, "fence_epoch", "fence_attempt", "fence_rev"}, w.Columns...)
	args := append([]any{w.Key, w.Fence.Epoch, w.Fence.Attempt, w.Fence.Rev}, w.Values...)
	set := []string{"fence_epoch = excluded.fence_epoch", "fence_attempt = excluded.fence_attempt", "fence_rev = excluded.fence_rev"}
	for _, c := range w.Update {
		set = append(set, c+" = excluded."+c)
	}
	t := w.Table
	q := "INSERT INTO " + t + " (" + strings.Join(cols, ", ") + ") VALUES (?" + strings.Repeat(", ?", len(cols)-1) + ")" +
		" ON CONFLICT (" + w.KeyColumn + ") DO UPDATE SET " + strings.Join(set, ", ") +
		" WHERE (" + t + ".fence_epoch, " + t + ".fence_attempt, " + t + ".fence_rev) <= (excluded.fence_epoch, excluded.fence_attempt, excluded.fence_rev)"
	res, err := db.ExecContext(ctx, d.rebind(q), args...)
	if err != nil {
		return false, fmt.Errorf("ledger: fenced write to %s: %w", w.Table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("ledger: fenced write to %s: %w", w.Table, err)
	}
	return n > 0, nil
}
