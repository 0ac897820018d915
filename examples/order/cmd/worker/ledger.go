package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/cmd/devstate"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
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

// ledgerEvidence plugs the order ledger into pending and resolve: the
// gateway's calls and the payment row are each charge's evidence
// (order.ChargeEvidence), read-only, from -ledger-dsn or the -dev
// worker's ledger; with neither, no evidence.
func ledgerEvidence() *cli.EvidenceFlags {
	var dsn string
	return &cli.EvidenceFlags{
		Register: func(fs *flag.FlagSet, getenv func(string) string) {
			fs.StringVar(&dsn, "ledger-dsn", getenv("LEDGER_DSN"),
				"the order ledger whose gateway calls and payments are each charge's evidence, read-only (LEDGER_DSN; with -dev the -dev worker's; none: no evidence)")
		},
		Open: func(ctx context.Context, dev bool) (operator.EvidenceSource, func(), error) {
			if dsn == "" && dev {
				if d, err := devstate.ReadLedgerDSN(); err == nil {
					dsn = d
				}
			}
			if dsn == "" {
				return nil, nil, nil
			}
			l, err := ledger.OpenReadOnly(ctx, dsn)
			if err != nil {
				return nil, nil, fmt.Errorf("%w (check -ledger-dsn / LEDGER_DSN)", err)
			}
			return order.ChargeEvidence{Ledger: l}, func() { _ = l.Close() }, nil
		},
	}
}
