package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/onceflow/onceflow/cmd/internal/devstate"
	"github.com/onceflow/onceflow/examples/order/ledger"
)

// openLedgerToRead opens the ledger a reading command (ledger, trace)
// names: *dsn, or with dev and no DSN the -dev ledger; *dsn is set to what
// was opened. It never creates anything: no DSN is an error naming the
// flag and variable to set, and a SQLite ledger must exist; it is opened
// read-only (SQLite's mode=ro).
func openLedgerToRead(ctx context.Context, command string, dsn *string, dev bool) (*ledger.Ledger, error) {
	if *dsn == "" && dev {
		var err error
		if *dsn, err = devstate.ReadLedgerDSN(); err != nil {
			return nil, fmt.Errorf("%s: %w", command, err)
		}
	}
	if *dsn == "" {
		return nil, fmt.Errorf("%s: which ledger? set -ledger-dsn (LEDGER_DSN) to the worker's, or pass -dev (ONCEFLOW_DEV=true) for the -dev worker's", command)
	}
	l, err := ledger.OpenReadOnly(ctx, *dsn)
	switch {
	case errors.Is(err, fs.ErrNotExist) && dev:
		return nil, fmt.Errorf("%s: %w (has the -dev worker run with this ONCEFLOW_DEV_STATE_DIR? or give -ledger-dsn / LEDGER_DSN)", command, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w (check -ledger-dsn / LEDGER_DSN)", command, err)
	}
	return l, nil
}
