package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/internal/trail"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/worker"
)

// items is a repeatable -item SKU:QTY flag.
type items []ledger.Item

func (it *items) String() string { return fmt.Sprint(*it) }

func (it *items) Set(v string) error {
	sku, qty, ok := strings.Cut(v, ":")
	n, err := strconv.Atoi(qty)
	if !ok || sku == "" || err != nil || n <= 0 {
		return fmt.Errorf("want SKU:QTY such as A-1:2, got %q", v)
	}
	*it = append(*it, ledger.Item{SKU: sku, Qty: n})
	return nil
}

const orderSynopsis = `usage: worker order [-order-id ID] [-customer C] [-item SKU:QTY ...] [-amount-cents N] [-wait D] [-dev] [Temporal flags]

Places an order (starts the PlaceOrder workflow) and waits a while for its
result; the same -order-id places the same order.`

const ledgerSynopsis = `usage: worker ledger -order-id ID [-ledger-dsn DSN | -dev] [-json]

Prints an order's ledger rows: the order, its payments, the gateway's
calls. It reads the ledger and creates nothing.`

// placeOrder starts PlaceOrder and waits a while for its result.
func placeOrder(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := cli.NewFlagSet("order")
	var c worker.Config
	cli.TemporalFlags(fs, &c, getenv)
	queue := fs.String("task-queue", envDefault(getenv, "TEMPORAL_TASK_QUEUE", worker.DefaultConfig().TaskQueue), "the worker's task queue (TEMPORAL_TASK_QUEUE)")
	in := order.PlaceOrderInput{}
	fs.StringVar(&in.OrderID, "order-id", "", "the order's ID (default: a new UUIDv7); the same ID places the same order")
	wfID := fs.String("workflow-id", "", "the workflow's ID (default order-<order id>)")
	fs.StringVar(&in.CustomerID, "customer", "c-1", "the customer")
	var its items
	fs.Var(&its, "item", "an item, SKU:QTY; repeat it for more (default A-1:2)")
	fs.Int64Var(&in.AmountCents, "amount-cents", 1999, "the amount to charge, in cents")
	fs.StringVar(&in.Currency, "currency", "USD", "the currency")
	fs.BoolVar(&in.SkipChargeReconcile, "skip-reconcile", false,
		"leave a charge whose effect is unknown to an operator's decision, instead of asking the gateway first")
	wait := fs.Duration("wait", 10*time.Second, "how long to wait for the order to end; 0 returns at once")
	dev := fs.Bool("dev", getenv("ONCEFLOW_DEV") == "true", "place it with the running -dev worker (its Temporal, from its endpoints file) unless -temporal-address is given (ONCEFLOW_DEV=true)")
	if err := cli.Parse(fs, args, cli.Help{Out: out, Synopsis: orderSynopsis}); err != nil {
		return err
	}
	if *dev {
		if err := cli.UseDevEndpoints(&c, cli.Needs{Temporal: true}, "order"); err != nil {
			return err
		}
	}
	if in.OrderID == "" {
		in.OrderID = order.NewOrderID()
	}
	in.Items = its
	if len(in.Items) == 0 {
		in.Items = []ledger.Item{{SKU: "A-1", Qty: 2}}
	}
	if err := in.Validate(); err != nil {
		return fmt.Errorf("order: %w", err)
	}
	if *wfID == "" {
		*wfID = "order-" + in.OrderID
	}
	tc, err := cli.Dial(ctx, c, "order")
	if err != nil {
		return err
	}
	defer tc.Close()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: *wfID, TaskQueue: *queue,
		// The same order ID again attaches to the running workflow, and
		// never starts a second run of a finished one.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// A finished one is an error, so it is told apart below.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, order.PlaceOrder, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		// The order's workflow ran to its end before: its result is the
		// order's, and nothing runs again.
		run = tc.GetWorkflow(ctx, *wfID, "")
		fmt.Fprintf(out, "order %s: workflow %s already ran; its result:\n", in.OrderID, *wfID)
	case err != nil:
		return fmt.Errorf("order: start the workflow: %w", err)
	default:
		fmt.Fprintf(out, "order %s: workflow %s\n", in.OrderID, run.GetID())
	}
	if *wait <= 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	var res order.OrderResult
	if err := run.Get(wctx, &res); err != nil {
		// The wait ran out: the context's own error, or the server's answer
		// to a long poll whose deadline came a moment before the context's.
		var deadline *serviceerror.DeadlineExceeded
		if ctx.Err() == nil && (wctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline)) {
			_, err := fmt.Fprintf(out, "still running after %v: see `%s` (a step may wait on a decision) and `%s -order-id %s`\n", *wait, cli.Command("pending", *dev), cli.Command("ledger", *dev), in.OrderID)
			return err
		}
		return fmt.Errorf("order: %w", err)
	}
	return printJSON(out, res)
}

// showLedger prints the ledger's rows of an order.
func showLedger(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := cli.NewFlagSet("ledger")
	dsn := fs.String("ledger-dsn", getenv("LEDGER_DSN"), "the ledger to read (LEDGER_DSN); required, except with -dev: the dev ledger")
	dev := fs.Bool("dev", getenv("ONCEFLOW_DEV") == "true", "read the ledger of -dev (in the dev state directory)")
	orderID := fs.String("order-id", "", "the order (required)")
	asJSON := fs.Bool("json", false, "print every row as JSON")
	if err := cli.Parse(fs, args, cli.Help{Out: out, Synopsis: ledgerSynopsis}); err != nil {
		return err
	}
	if *orderID == "" {
		return cli.Usagef("ledger", "-order-id is required")
	}
	l, err := openLedgerToRead(ctx, "ledger", dsn, *dev)
	if err != nil {
		return err
	}
	defer l.Close()
	rows, err := trail.ReadRows(ctx, l, *orderID)
	if err != nil {
		return err
	}
	if rows.Order == nil {
		return fmt.Errorf("ledger: no order %s in %s", *orderID, ledger.RedactDSN(*dsn))
	}
	if *asJSON {
		return printJSON(out, rows)
	}
	return trail.PrintRows(out, rows)
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func envDefault(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}
