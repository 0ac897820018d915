// Package trail follows one order through every layer that deduplicates
// it: the HTTP Idempotency-Key's record, the workflow and its pending
// recoveries, each saga step's Redis record, and the ledger's rows.
package trail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// Trail is every layer that deduplicates one order.
type Trail struct {
	// HTTP is the Idempotency-Key's record, when the trail starts from a key.
	HTTP *operator.RecordReport `json:"http,omitempty"`
	// WorkflowID, RunID and Status name the order's workflow.
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
	Status     string `json:"status,omitempty"`
	// Pending are the incidents the workflow waits on a decision for.
	Pending []idemwf.PendingRecovery `json:"pending,omitempty"`
	// Evidence is, for each of Pending in order, what the downstream says
	// (order.ChargeEvidence); nil for a step it knows nothing about.
	Evidence []*idemwf.Evidence `json:"evidence,omitempty"`
	// Decisions are the decisions the workflow applied, with their audit
	// (for a closed workflow, as a worker's replay answers them; they are
	// in its history too: the payloads of its onceflow.decide Updates and
	// onceflow.resolve signals). DecisionsError says why a closed
	// workflow's could not be read.
	Decisions      []idemwf.Decided `json:"decisions,omitempty"`
	DecisionsError string           `json:"decisions_error,omitempty"`
	// Timeline is the workflow's history, one row per thing that
	// happened to it or its steps, oldest first, and the activities it
	// runs now. TimelineError says why it could not be read.
	Timeline      []operator.Event `json:"timeline,omitempty"`
	TimelineError string           `json:"timeline_error,omitempty"`
	OrderID       string           `json:"order_id,omitempty"`
	// Steps are the records of the saga's steps, by business key.
	Steps []StepTrail `json:"steps,omitempty"`
	// Ledger are the order's rows.
	Ledger *Rows `json:"ledger,omitempty"`
}

// StepTrail is one step's record.
type StepTrail struct {
	Step   string                `json:"step"`
	Key    string                `json:"business_key"`
	Record operator.RecordReport `json:"record"`
}

// Sources are where a trail is read from.
type Sources struct {
	Store    driver.Store
	Client   client.Client
	Ledger   *ledger.Ledger
	Digester *onceflow.Digester
	// Namespace is the Temporal namespace (business keys are digested
	// with it).
	Namespace string
}

// Query is what the user has: one of an Idempotency-Key (with the
// account that sent it: the order API scopes keys by account), an order
// ID or a workflow ID.
type Query struct {
	IdempotencyKey string
	Account        string
	OrderID        string
	WorkflowID     string
}

// Build reads the trail. A corrupt record is in the trail and makes the
// error match onceflow.OutcomeCorrupt.
func Build(ctx context.Context, src Sources, q Query) (Trail, error) {
	var t Trail
	var corrupt error
	switch {
	case q.IdempotencyKey != "":
		k, err := idemhttp.ParseKey(q.IdempotencyKey)
		if err != nil {
			return t, fmt.Errorf("trace: the idempotency key: %w", err)
		}
		if err := ledger.ValidAccountID(q.Account); err != nil {
			return t, fmt.Errorf("trace: an Idempotency-Key is the account's: name the account that sent it (%w)", err)
		}
		// The record the middleware named: principal (the account),
		// method, route, key.
		ref := operator.HTTPRef(src.Digester, order.OrdersAPICode, q.Account, http.MethodPost, order.OrdersRoute, k)
		rep, err := operator.Inspect(ctx, src.Store, ref)
		t.HTTP = &rep
		if err != nil && !errors.Is(err, onceflow.OutcomeCorrupt) {
			return t, err
		}
		corrupt = err
		t.WorkflowID = order.WorkflowIDPrefix + ref.Digest.Hex
	case q.OrderID != "":
		o, ok, err := src.Ledger.Order(ctx, q.OrderID)
		if err != nil {
			return t, err
		}
		if !ok {
			return t, fmt.Errorf("trace: no order %s in the ledger", q.OrderID)
		}
		t.OrderID, t.WorkflowID = o.ID, o.WorkflowID
	default:
		t.WorkflowID = q.WorkflowID
	}
	if t.WorkflowID != "" {
		d, err := src.Client.DescribeWorkflowExecution(ctx, t.WorkflowID, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			t.Status = "NOT_FOUND"
		case err != nil:
			return t, fmt.Errorf("trace: describe workflow %s: %w", t.WorkflowID, err)
		default:
			info := d.GetWorkflowExecutionInfo()
			t.RunID, t.Status = info.GetExecution().GetRunId(), strings.ToUpper(info.GetStatus().String())
			h, err := operator.ReadHistory(ctx, src.Client, t.WorkflowID, t.RunID, d)
			if t.Timeline = h.Timeline; err != nil {
				t.TimelineError = err.Error()
			}
			if p := info.GetMemo().GetFields()["order_id"]; p != nil && t.OrderID == "" {
				_ = converter.GetDefaultDataConverter().FromPayload(p, &t.OrderID)
			}
			// Only a running workflow waits on a decision (asking a
			// closed one would replay it on a worker, for nothing).
			if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				p, err := operator.PendingRecoveries(ctx, src.Client, t.WorkflowID, t.RunID)
				if err != nil && !errors.Is(err, operator.ErrNotOnceflow) {
					return t, fmt.Errorf("trace: %w", err)
				}
				t.Pending = p
				list := []operator.Waiting{{WorkflowID: t.WorkflowID, RunID: t.RunID, Pending: p}}
				assessed, err := operator.Assess(ctx, order.ChargeEvidence{Ledger: src.Ledger}, list)
				if err != nil {
					return t, fmt.Errorf("trace: %w", err)
				}
				for _, a := range assessed {
					t.Evidence = append(t.Evidence, a.Evidence)
				}
				if t.Decisions, err = operator.Decisions(ctx, src.Client, t.WorkflowID, t.RunID); err != nil {
					return t, fmt.Errorf("trace: %w", err)
				}
			} else {
				// A closed workflow answers a query by a worker's replay
				// of its history: bounded, and not fatal without one.
				qctx, cancel := context.WithTimeout(ctx, closedQueryTimeout)
				t.Decisions, err = operator.Decisions(qctx, src.Client, t.WorkflowID, t.RunID)
				cancel()
				if err != nil {
					t.DecisionsError = "the closed workflow's decisions could not be read (is a worker running to replay it?): " + err.Error()
				}
			}
		}
	}
	if t.OrderID == "" && t.WorkflowID != "" {
		// A workflow started without the API's memo: the ledger knows it.
		orders, err := src.Ledger.RecentOrders(ctx, 10_000)
		if err != nil {
			return t, err
		}
		for _, o := range orders {
			if o.WorkflowID == t.WorkflowID {
				t.OrderID = o.ID
				break
			}
		}
	}
	if t.OrderID == "" {
		return t, corrupt
	}
	for _, s := range order.Steps {
		rep, err := operator.Inspect(ctx, src.Store, operator.BusinessRef(src.Digester, src.Namespace, s.Code, s.Key(t.OrderID)))
		if err != nil && !errors.Is(err, onceflow.OutcomeCorrupt) {
			return t, err
		}
		corrupt = errors.Join(corrupt, err)
		t.Steps = append(t.Steps, StepTrail{Step: s.Name, Key: s.Key(t.OrderID), Record: rep})
	}
	rows, err := ReadRows(ctx, src.Ledger, t.OrderID)
	if err != nil {
		return t, err
	}
	if rows.Order != nil {
		t.Ledger = &rows
	}
	return t, corrupt
}

// closedQueryTimeout bounds the query of a closed workflow's decisions,
// which waits for a worker to replay it.
const closedQueryTimeout = 5 * time.Second

// Write prints a trail, one layer after another. Every value read from a
// store is printed through cli.Printable: a newline or an escape sequence
// in it is quoted, so it can neither forge a line nor reach the terminal.
// dev adds -dev to the commands it prints, for a trail of a -dev worker.
func Write(out io.Writer, t Trail, dev bool) error {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(out, format, args...) }
	q := cli.Printable
	if t.HTTP != nil {
		p("HTTP (Idempotency-Key, scope digested with the workers' secret)\n")
		if err := cli.WriteRecordReport(out, "  ", *t.HTTP); err != nil {
			return err
		}
	}
	p("workflow %s run %s: %s\n", q(t.WorkflowID), q(t.RunID), q(t.Status))
	for i, pr := range t.Pending {
		p("  pending: %s %s since %s\n", q(pr.Activity), q(pr.Incident.String()), pr.Since.Format("2006-01-02T15:04:05Z07:00"))
		decision := "…"
		if i < len(t.Evidence) && t.Evidence[i] != nil {
			ev := t.Evidence[i]
			p("    evidence: %s\n", q(ev.Summary))
			for _, f := range ev.Facts {
				p("      %s\n", q(f))
			}
			if ev.Implies != "" {
				decision = string(ev.Implies)
				if len(ev.Result) > 0 {
					decision += " -result '" + string(ev.Result) + "'"
				}
			}
		}
		p("    decide with: %s -workflow-id %s -record %s -attempt %d -rev %d -decision %s -reason TEXT\n",
			cli.Command("resolve", dev), q(t.WorkflowID), q(pr.RecordKey), pr.Incident.Attempt, pr.Incident.Rev, q(decision))
	}
	for _, d := range t.Decisions {
		r := d.Resolution
		p("  decided: %s %s at %s via %s, request %s by %s%s\n", q(string(r.Decision)), q(d.Incident.String()), d.AppliedAt.Format("2006-01-02T15:04:05Z07:00"), q(d.Via),
			q(orNone(r.RequestID)), q(orNone(r.By)), suffix(": ", q(r.Reason)))
		if r.Evidence != nil {
			p("    evidence shown: %s (implied %s%s)\n", q(r.Evidence.Summary), q(orNone(string(r.Evidence.Implies))), map[bool]string{true: ", confirmed against it"}[r.Confirmed])
		}
		if d.Repeats > 0 {
			p("    repeated %d times, applied once\n", d.Repeats)
		}
	}
	if t.DecisionsError != "" {
		p("  decisions: %s\n", q(t.DecisionsError))
	}
	if len(t.Timeline) > 0 || t.TimelineError != "" {
		p("timeline\n")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, e := range t.Timeline {
			attempt := ""
			if e.Attempt > 0 {
				attempt = fmt.Sprintf("attempt %d", e.Attempt)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s%s\n", e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), q(e.Step), q(e.State), attempt, q(e.Actor), suffix(": ", q(e.Detail)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if t.TimelineError != "" {
			p("  %s\n", q(t.TimelineError))
		}
	}
	if t.OrderID == "" {
		p("no order known for the workflow yet\n")
		return nil
	}
	p("order %s\n", q(t.OrderID))
	for _, s := range t.Steps {
		p("  step %-8s key %s\n", q(s.Step), q(s.Key))
		if err := cli.WriteRecordReport(out, "    ", s.Record); err != nil {
			return err
		}
	}
	if t.Ledger == nil {
		p("ledger: no rows for this order (check -ledger-dsn, or -dev and ONCEFLOW_DEV_STATE_DIR)\n")
		return nil
	}
	p("ledger\n")
	return PrintRows(out, *t.Ledger)
}

// Rows is what the ledger command prints: every row of one order.
type Rows = ledger.OrderRows

// PrintRows prints an order's rows, one line each, every value read
// from the ledger through cli.Printable (Write).
func PrintRows(out io.Writer, r Rows) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	q := cli.Printable
	o := r.Order
	fmt.Fprintf(tw, "order\t%s\t%s, %s, workflow %s%s\n", q(o.ID), q(o.Status), q(ledger.FormatMoney(o.AmountCents, o.Currency)), q(o.WorkflowID), suffix(" reason: ", q(o.Reason)))
	if res := r.Reservation; res != nil {
		var items []string
		for _, it := range res.Items {
			items = append(items, fmt.Sprintf("%s×%d", q(it.SKU), it.Qty))
		}
		fmt.Fprintf(tw, "reservation\t%s\t%s\n", q(res.Status), strings.Join(items, " "))
	}
	for _, p := range r.Payments {
		fmt.Fprintf(tw, "payment\t%s\t%s, %s, charge %s, fence %s, key %s\n", q(p.ID), q(p.Status), q(ledger.FormatMoney(p.AmountCents, p.Currency)), q(p.GatewayChargeID), p.Fence, q(p.IdempotencyKey))
	}
	for _, c := range r.GatewayCalls {
		fmt.Fprintf(tw, "gateway call\t%s\t%s%s, key %s\n", q(c.ID), q(c.Outcome), suffix(", charge ", q(c.ChargeID)), q(c.OperationKey))
	}
	for _, f := range r.Refunds {
		fmt.Fprintf(tw, "refund\t%s\t%s of charge %s\n", q(f.ID), q(ledger.FormatMoney(f.AmountCents, f.Currency)), q(f.ChargeID))
	}
	if s := r.Shipment; s != nil {
		fmt.Fprintf(tw, "shipment\t%s\t\n", q(s.ID))
	}
	charged := 0
	for _, c := range r.GatewayCalls {
		if c.Charged() {
			charged++
		}
	}
	fmt.Fprintf(tw, "totals\t%d payment rows, %d gateway calls, %d charged, %d refunds; money kept %s\t\n",
		len(r.Payments), len(r.GatewayCalls), charged, len(r.Refunds), q(ledger.FormatMoney(r.Kept(), o.Currency)))
	return tw.Flush()
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

func suffix(label, v string) string {
	if v == "" {
		return ""
	}
	return label + v
}

// ReadRows reads an order's rows from the ledger; Rows.Order is nil when
// the ledger has no such order.
func ReadRows(ctx context.Context, l *ledger.Ledger, orderID string) (Rows, error) {
	return l.ReadOrderRows(ctx, orderID)
}
