package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/internal/trail"
	"github.com/onceflow/onceflow/worker"
)

const traceSynopsis = `usage: worker trace -idempotency-key KEY -account ACCOUNT | -order-id ID | -workflow-id ID [-dev] [-json]

Prints every layer that deduplicates an order: the HTTP key's record, the
workflow, its steps' records, the ledger's rows. It creates nothing.`

// trace prints the idempotency trail of an order (package trail), from
// what the user has: an HTTP Idempotency-Key (+ the account that sent
// it), an order ID or a workflow ID. A corrupt record fails it.
func trace(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := cli.NewFlagSet("trace")
	var c worker.Config
	d := worker.DefaultConfig()
	cli.TemporalFlags(fs, &c, getenv)
	fs.StringVar(&c.RedisURL, "redis-url", getenv("REDIS_URL"), "Redis URL (REDIS_URL; default "+d.RedisURL+", or with -dev the -dev worker's)")
	fs.StringVar(&c.KeyNamespace, "key-namespace", envDefault(getenv, "ONCEFLOW_KEY_NAMESPACE", d.KeyNamespace), "prefix of every Redis key (ONCEFLOW_KEY_NAMESPACE)")
	dsn := fs.String("ledger-dsn", getenv("LEDGER_DSN"), "the ledger to read (LEDGER_DSN); required, except with -dev: the dev ledger")
	dev := fs.Bool("dev", getenv("ONCEFLOW_DEV") == "true", "a -dev worker's records: its servers (from its endpoints file, where no address is given), secret (when ONCEFLOW_SECRET is unset) and ledger")
	var q trail.Query
	fs.StringVar(&q.IdempotencyKey, "idempotency-key", "", "the Idempotency-Key of a POST /orders")
	fs.StringVar(&q.Account, "account", "", "with -idempotency-key: the account that sent the key (the order API scopes keys by account; -dev: "+order.DevAccount+")")
	fs.StringVar(&q.OrderID, "order-id", "", "the order")
	fs.StringVar(&q.WorkflowID, "workflow-id", "", "the order's workflow")
	asJSON := fs.Bool("json", false, "print the trail as JSON")
	if err := cli.Parse(fs, args, cli.Help{Out: out, Synopsis: traceSynopsis}); err != nil {
		return err
	}
	n := 0
	for _, v := range []string{q.IdempotencyKey, q.OrderID, q.WorkflowID} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return cli.Usagef("trace", "give one of -idempotency-key, -order-id or -workflow-id")
	}
	if (q.IdempotencyKey != "") != (q.Account != "") {
		return cli.Usagef("trace", "-idempotency-key and -account go together: a key is the account's that sent it")
	}
	if *dev {
		if err := cli.UseDevEndpoints(&c, cli.Needs{Temporal: true, Redis: true}, "trace"); err != nil {
			return err
		}
	}
	cli.Defaults(&c)
	dig, err := cli.Digester(getenv, *dev)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	l, err := openLedgerToRead(ctx, "trace", dsn, *dev)
	if err != nil {
		return err
	}
	defer l.Close()
	store, closeStore, err := cli.OpenStore(c)
	if err != nil {
		return err
	}
	defer closeStore()
	tc, err := cli.Dial(ctx, c, "trace")
	if err != nil {
		return err
	}
	defer tc.Close()
	ns := c.Namespace
	if ns == "" {
		ns = d.Namespace
	}
	t, err := trail.Build(ctx, trail.Sources{Store: store, Client: tc, Ledger: l, Digester: dig, Namespace: ns}, q)
	if err != nil && !errors.Is(err, onceflow.OutcomeCorrupt) {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(t); jerr != nil {
			return jerr
		}
	} else if werr := trail.Write(out, t, *dev); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("trace: a record is corrupt (see above): %w", err)
	}
	return nil
}
