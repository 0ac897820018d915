package ledger_test

import (
	"path/filepath"
	"testing"

	"github.com/onceflow/onceflow/examples/order/ledger"
)

// TestConcurrentOpensOfANewSQLiteFile: workers that start together on a
// new SQLite file all create the schema. Each deferred transaction read
// the schema and then wrote, and SQLite fails such an upgrade at once
// with SQLITE_BUSY when another connection wrote in between; the ledger's
// transactions now take the write lock when they begin, so they wait.
func TestConcurrentOpensOfANewSQLiteFile(t *testing.T) {
	t.Parallel()
	for range 4 { // each round failed before the fix
		dsn := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
		const workers = 6
		errs := make(chan error, workers)
		for range workers {
			go func() {
				l, err := ledger.Open(t.Context(), dsn)
				if err == nil {
					err = l.Close()
				}
				errs <- err
			}()
		}
		for range workers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}
