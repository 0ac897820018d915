package main

import (
	"context"
	"fmt"
	"io"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/cmd/devstate"
	"github.com/onceflow/onceflow/examples/order/ledger"
)

const apiKeySynopsis = `usage: worker api-key -account ID [-revoke KEY] [-ledger-dsn DSN | -dev]

Issues a new API key for an account of the order API, creating the account
when it is missing, and prints it: the only time it is shown, since the
ledger keeps its SHA-256 alone. The account's other keys stay valid, so a
client can move to the new key before the old one is revoked (-revoke KEY).
Clients send it as Authorization: Bearer <key>; the account, not the key,
scopes their Idempotency-Keys.`

// apiKey issues (or revokes) an order API key in the ledger.
func apiKey(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := cli.NewFlagSet("api-key")
	dsn := fs.String("ledger-dsn", getenv("LEDGER_DSN"), "the worker's ledger (LEDGER_DSN); required, except with -dev: the dev ledger")
	dev := fs.Bool("dev", getenv("ONCEFLOW_DEV") == "true", "the -dev worker's ledger (ONCEFLOW_DEV=true)")
	account := fs.String("account", "", "the account, 1 to 64 of [A-Za-z0-9._-] (required)")
	revoke := fs.String("revoke", "", "revoke this key of the account instead of issuing one")
	if err := cli.Parse(fs, args, cli.Help{Out: out, Synopsis: apiKeySynopsis}); err != nil {
		return err
	}
	if *account == "" {
		return cli.Usagef("api-key", "-account is required")
	}
	if err := ledger.ValidAccountID(*account); err != nil {
		return cli.Usagef("api-key", "%v", err)
	}
	if *dsn == "" && *dev {
		var err error
		if *dsn, err = devstate.LedgerDSN(); err != nil {
			return fmt.Errorf("api-key: %w", err)
		}
	}
	if *dsn == "" {
		return cli.Usagef("api-key", "which ledger? set -ledger-dsn (LEDGER_DSN) to the worker's, or pass -dev for the -dev worker's")
	}
	l, err := ledger.Open(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("api-key: %w (check -ledger-dsn / LEDGER_DSN)", err)
	}
	defer l.Close()
	if *revoke != "" {
		owner, ok, err := l.AccountByAPIKey(ctx, *revoke)
		if err != nil {
			return fmt.Errorf("api-key: %w", err)
		}
		if !ok || owner != *account {
			return fmt.Errorf("api-key: account %s has no such active key: nothing revoked", *account)
		}
		if _, err := l.RevokeAPIKey(ctx, *revoke); err != nil {
			return fmt.Errorf("api-key: %w", err)
		}
		_, err = fmt.Fprintf(out, "revoked a key of account %s: it authenticates no one from now on\n", *account)
		return err
	}
	if err := l.CreateAccount(ctx, *account); err != nil {
		return fmt.Errorf("api-key: %w", err)
	}
	key, err := l.IssueAPIKey(ctx, *account)
	if err != nil {
		return fmt.Errorf("api-key: %w", err)
	}
	_, err = fmt.Fprintln(out, key)
	return err
}
