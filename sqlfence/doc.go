// Package sqlfence writes rows under a onceflow fencing token, so that the
// write of a zombie attempt (one whose lease was taken over, or whose Redis
// record was lost and created again) can never overwrite the write of a
// newer attempt.
//
// A wrapped activity gets its fence from onceactivity.Fence(ctx); each
// takeover, and each new incarnation of the record after a loss, gives a
// greater one (onceflow.Fence). A downstream that stores the fence beside
// its row and compares it in the same statement as the write turns "the
// lease was taken over" into "the stale write is refused", whatever the
// zombie's timing:
//
//	err := sqlfence.Upsert(ctx, db, sqlfence.PostgreSQL, sqlfence.Write{
//		Table: "payments", KeyColumn: "idempotency_key", Key: key,
//		Fence:   onceactivity.Fence(ctx),
//		Columns: []string{"status", "charge_id"},
//		Values:  []any{"captured", chargeID},
//		Update:  []string{"status", "charge_id"},
//	})
//	if errors.Is(err, sqlfence.ErrStale) {
//		// A newer attempt wrote the row: this attempt's result is void.
//	}
//
// The table needs a UNIQUE (or primary key) key column and three BIGINT
// columns fence_epoch, fence_attempt and fence_rev. Table and column names
// are plain lower-case identifiers and no reserved word (Reserved): a
// table named excluded, the name ON CONFLICT gives the proposed row,
// would compare the fence with itself and let every write through.
// Upsert is one INSERT … ON CONFLICT … DO UPDATE … WHERE statement, which
// SQLite (3.24+) and PostgreSQL (9.5+) both run; it works on a *sql.DB, a
// *sql.Tx or a *sql.Conn of any database/sql driver for them. The package
// imports no driver.
package sqlfence
