package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "modernc.org/sqlite"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/sqlfence"
)

// A newer attempt's write stands; the zombie's is refused.
func ExampleUpsert() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:example?mode=memory&cache=shared")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE payments (
		idempotency_key TEXT PRIMARY KEY,
		fence_epoch BIGINT NOT NULL, fence_attempt BIGINT NOT NULL, fence_rev BIGINT NOT NULL,
		status TEXT NOT NULL)`); err != nil {
		panic(err)
	}
	pay := func(f onceflow.Fence, status string) error {
		return sqlfence.Upsert(ctx, db, sqlfence.SQLite, sqlfence.Write{
			Table: "payments", KeyColumn: "idempotency_key", Key: "charge-card:order-1001",
			Fence:   f,
			Columns: []string{"status"}, Values: []any{status},
			Update: []string{"status"},
		})
	}
	newer := onceflow.Fence{Epoch: 1700000000000, Attempt: 2, Rev: 3} // took over
	zombie := onceflow.Fence{Epoch: 1700000000000, Attempt: 1, Rev: 2}
	fmt.Println(pay(newer, "captured"))
	err = pay(zombie, "declined")
	fmt.Println(errors.Is(err, sqlfence.ErrStale))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// sqlfence: payments "charge-card:order-1001" was written by attempt 2.3@1700000000000; the write of attempt 1.2@1700000000000 is stale (its lease was taken over) and was refused
}
