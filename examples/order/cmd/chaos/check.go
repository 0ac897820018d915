package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// memoOrderID is the memo field in which the order API names a
// workflow's order (examples/order, unexported there).
const memoOrderID = "order_id"

// finalStatuses are the order statuses a settled order may have.
var finalStatuses = []string{order.StatusCompleted, order.StatusDeclined, order.StatusRejected, order.StatusFailed}

// summary is the run's result: the table, and summary.json.
type summary struct {
	Seed        int64  `json:"seed"`
	Orders      int    `json:"orders"`
	Workers     int    `json:"workers"`
	Concurrency int    `json:"concurrency"`
	Ledger      string `json:"ledger"`
	Redis       string `json:"redis"`
	Durability  string `json:"redis_durability"`
	Failovers   int    `json:"failovers"`
	// ChargesDone is the orders whose charge step ran to its end (a
	// payment row); ChargeRecordsLost those of them whose charge record
	// was gone from Redis at the end.
	ChargesDone       int          `json:"charges_done"`
	ChargeRecordsLost int          `json:"charge_records_lost"`
	Out               string       `json:"out"`
	WallSeconds       float64      `json:"wall_s"`
	Metrics           []metric     `json:"metrics"`
	Checks            []check      `json:"checks"`
	Phases            []phaseStats `json:"phases"`
	Settle            settleReport `json:"settle"`
	Incidents         incidents    `json:"incidents"`
	RefundsTable      bool         `json:"refunds_table"`
	FailedChecks      []string     `json:"failed_checks"`
	OrdersChecked     []orderRow   `json:"orders_checked"`
}

// metric is one line of the table that is not a check.
type metric struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// check is one property of the run; Count > 0 is a violation.
type check struct {
	Name     string   `json:"name"`
	Count    int      `json:"count"`
	Examples []string `json:"examples,omitempty"`
}

func (c *check) add(example string) {
	c.Count++
	if len(c.Examples) < 5 {
		c.Examples = append(c.Examples, example)
	}
}

// orderRow is one order of the run as the ledger and Temporal have it.
type orderRow struct {
	OrderID        string `json:"order_id"`
	Key            string `json:"key,omitempty"`
	WorkflowID     string `json:"workflow_id,omitempty"`
	WorkflowStatus string `json:"workflow_status,omitempty"`
	InLedger       bool   `json:"in_ledger"`
	Status         string `json:"status,omitempty"`
	ChargedCalls   int    `json:"charged_calls"`
	PaymentRows    int    `json:"payment_rows"`
	TakenCents     int64  `json:"taken_cents"`
	RefundedCents  int64  `json:"refunded_cents"`
	RecordedCents  int64  `json:"recorded_cents"`
}

// workflowInfo is one workflow of the run.
type workflowInfo struct {
	id, orderID string
	status      enumspb.WorkflowExecutionStatus
}

// listPage is how many executions one ListWorkflow asks for. After a
// run of 1,000 orders a page of 1000 (their memos included) outlasted the
// SDK's 10 s call timeout on the dev server's SQLite visibility store.
const listPage = 200

// listWorkflows calls fn with every execution the visibility query q
// lists, page by page. A page that fails is asked again, five times at
// most a second apart: the server may be busy, or just restarted.
func (c *cluster) listWorkflows(ctx context.Context, q string, fn func(*workflowpb.WorkflowExecutionInfo)) error {
	var token []byte
	for {
		var resp *workflowservice.ListWorkflowExecutionsResponse
		var err error
		for try := 1; ; try++ {
			resp, err = c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: c.namespace, Query: q, PageSize: listPage, NextPageToken: token,
			})
			if err == nil || try == 5 || !sleepCtx(ctx, time.Second) {
				break
			}
			c.log.Warn("chaos: listing workflows failed; asking again", "query", q, "err", err)
		}
		if err != nil {
			return fmt.Errorf("list the workflows (%s): %w", q, err)
		}
		for _, e := range resp.GetExecutions() {
			fn(e)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// workflows lists the run's workflows, by ID (the newest run of each).
func (c *cluster) workflows(ctx context.Context) (map[string]workflowInfo, error) {
	out := map[string]workflowInfo{}
	err := c.listWorkflows(ctx, fmt.Sprintf("TaskQueue = '%s'", c.cfg.taskQueue), func(e *workflowpb.WorkflowExecutionInfo) {
		id := e.GetExecution().GetWorkflowId()
		if _, seen := out[id]; seen {
			return
		}
		w := workflowInfo{id: id, status: e.GetStatus()}
		if p := e.GetMemo().GetFields()[memoOrderID]; p != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &w.orderID)
		}
		out[id] = w
	})
	return out, err
}

// checkRun checks every key and every order of the run.
func checkRun(ctx context.Context, c *cluster, l *load, settled settleReport) (summary, error) {
	s := summary{Seed: c.cfg.seed, Orders: c.cfg.orders, Workers: c.cfg.workers, Concurrency: c.cfg.concurrency,
		Ledger: ledger.RedactDSN(c.ledgerDSN), Out: c.out, Redis: c.redis.describe(), Durability: c.cfg.durability,
		Settle: settled}
	checks := newRunChecks()
	t := tally{keys: len(l.keys), statuses: map[string]int{}, calls: map[string]int{}}

	wfs, err := c.workflows(ctx)
	if err != nil {
		return s, err
	}
	t.workflows = len(wfs)
	byOrder := workflowsByOrder(wfs, &checks.wfBad)
	answered := t.countKeys(l.keys, &checks)

	// The orders: every order a client was told of, and every workflow's.
	ids := orderIDs(answered, byOrder)
	if s.RefundsTable, err = c.refundsTable(ctx); err != nil {
		return s, err
	}
	for _, id := range ids {
		row, err := c.orderRow(ctx, id, s.RefundsTable, t.calls)
		if err != nil {
			return s, err
		}
		row.Key = answered[id]
		if w, ok := byOrder[id]; ok {
			row.WorkflowID, row.WorkflowStatus = w.id, w.status.String()
		}
		s.OrdersChecked = append(s.OrdersChecked, row)
		_, isAnswered := answered[id]
		t.countOrder(row, isAnswered, &checks)
	}

	s.Incidents = c.incidents(ctx, wfs)
	done, recordsLost, err := c.chargeRecords(ctx, s.OrdersChecked)
	if err != nil {
		return s, err
	}
	s.ChargesDone, s.ChargeRecordsLost = done, recordsLost.Count

	t.countFaults(c.tl.snapshot())
	s.Failovers = t.injected[failoverCount]
	s.Metrics = t.metrics(s)
	s.Checks = checks.list()
	if c.cfg.durability != "none" {
		// With replicas waited for, an acknowledged completion survives
		// a failover: a lost one is a failure.
		s.Checks = append(s.Checks, recordsLost)
	}
	for _, ch := range s.Checks {
		if ch.Count > 0 {
			s.FailedChecks = append(s.FailedChecks, ch.Name)
		}
	}
	s.Phases = c.tl.snapshot()
	return s, nil
}

// runChecks are the properties checkRun counts the violations of, but
// for the charge records lost (records.go).
type runChecks struct {
	doubleCharge, dupPayments, money, lost, unfinished, wfBad, changed, stuck, unanswered, reused check
}

func newRunChecks() runChecks {
	return runChecks{
		doubleCharge: check{Name: "double charges (an order with >1 charged gateway call)"},
		dupPayments:  check{Name: "duplicate payment rows (an order with >1 row)"},
		money:        check{Name: "money mismatches (taken at the gateway less refunds ≠ recorded)"},
		lost:         check{Name: "orders lost (answered with an order ID, no order row or workflow)"},
		unfinished:   check{Name: "orders unfinished (no final status after the settle)"},
		wfBad:        check{Name: "workflows that did not complete"},
		changed:      check{Name: "keys that named two orders"},
		stuck:        check{Name: "stuck keys (a client got 409 effect unknown: ABANDONED, needs worker reopen)"},
		unanswered:   check{Name: "keys without a final answer after the settle"},
		reused:       check{Name: "422 key reused, for the same body"},
	}
}

// list is the checks in the order the table shows them.
func (ch *runChecks) list() []check {
	return []check{ch.doubleCharge, ch.dupPayments, ch.money, ch.lost, ch.unfinished, ch.wfBad, ch.changed, ch.stuck, ch.unanswered, ch.reused}
}

// tally is what the run's table shows beside the checks: what the
// clients heard, what the ledger has, and the faults.
type tally struct {
	keys, duplicated, workflows int
	// The answers, by kind.
	requests, created, replayed, accepted, inProgress, unknown, serverErrs, netErrs int
	// The orders' statuses and gateway calls (by outcome), and their money.
	statuses, calls           map[string]int
	taken, refunded, recorded int64
	// The faults injected and the worker exits observed, by kind.
	injected, observed map[string]int
}

// workflowsByOrder indexes the workflows that name an order by it, and
// adds those that did not complete to wfBad.
func workflowsByOrder(wfs map[string]workflowInfo, wfBad *check) map[string]workflowInfo {
	byOrder := map[string]workflowInfo{}
	for _, w := range wfs {
		if w.orderID != "" {
			byOrder[w.orderID] = w
		}
		if w.status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			wfBad.add(w.id + " " + w.status.String())
		}
	}
	return byOrder
}

// countKeys counts what each client heard, checks every key (changed,
// stuck, unanswered, reused), and returns the orders the clients were
// told of, by order ID, with their keys.
func (t *tally) countKeys(keys []*orderKey, ch *runChecks) (answered map[string]string) {
	answered = map[string]string{}
	for _, k := range keys {
		if k.clients > 1 {
			t.duplicated++
		}
		t.countKey(k, answered, ch)
	}
	return answered
}

// countKey counts and checks one key's answers (countKeys).
func (t *tally) countKey(k *orderKey, answered map[string]string, ch *runChecks) {
	as := k.snapshot()
	var ids []string
	done := false
	record := ""
	for _, a := range as {
		t.requests++
		switch {
		case a.Status == 0:
			t.netErrs++
		case a.Status == 201 || a.Status == 200:
			t.created++
		case a.Status == 202:
			t.accepted++
		case a.Problem == idemhttp.ProblemInProgress:
			t.inProgress++
		case a.Problem == idemhttp.ProblemEffectUnknown:
			t.unknown++
			if record == "" {
				record = a.Record + " in " + a.Phase
			}
		case a.Status >= 500:
			t.serverErrs++
		case a.Status == 422:
			ch.reused.add(k.key + " (" + a.Role + ", " + a.Phase + ")")
		}
		if a.Replayed {
			t.replayed++
		}
		if a.Status >= 200 && a.Status < 300 && a.OrderID != "" {
			if !slices.Contains(ids, a.OrderID) {
				ids = append(ids, a.OrderID)
			}
			answered[a.OrderID] = k.key
			done = done || a.Final
		}
	}
	if len(ids) > 1 {
		ch.changed.add(k.key + " → " + strings.Join(ids, ", "))
	}
	last := lastAnswer(as)
	if record != "" {
		// Stuck even if a later loss of the record (a Redis wipe)
		// let the key through again: a client was told to wait for
		// an operator.
		still := "let through later (its record was lost)"
		if last.Problem == idemhttp.ProblemEffectUnknown {
			still = "still stuck at the end"
		}
		ch.stuck.add(k.key + " record " + record + ", " + still)
	}
	switch {
	case last != nil && last.Problem == idemhttp.ProblemEffectUnknown:
	case !done:
		what := "no answer"
		if last != nil {
			what = fmt.Sprintf("last %d %s%s", last.Status, last.Problem, last.Err)
		}
		ch.unanswered.add(k.key + " (" + what + ")")
	}
}

// orderIDs is the orders of the run, sorted: those a client was told of,
// and those a workflow names.
func orderIDs(answered map[string]string, byOrder map[string]workflowInfo) []string {
	ids := make([]string, 0, len(answered)+len(byOrder))
	for id := range answered {
		ids = append(ids, id)
	}
	for id := range byOrder {
		if _, ok := answered[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// countOrder counts one order's status and money, and checks it (double
// charges, duplicate payments, money, lost, unfinished); answered says
// whether a client was told of it.
func (t *tally) countOrder(row orderRow, answered bool, ch *runChecks) {
	id := row.OrderID
	if row.Status == "" {
		t.statuses["(no order row)"]++
	} else {
		t.statuses[row.Status]++
	}
	t.taken += row.TakenCents
	t.refunded += row.RefundedCents
	t.recorded += row.RecordedCents
	if row.ChargedCalls > 1 {
		ch.doubleCharge.add(fmt.Sprintf("%s: %d charges", id, row.ChargedCalls))
	}
	if row.PaymentRows > 1 {
		ch.dupPayments.add(fmt.Sprintf("%s: %d rows", id, row.PaymentRows))
	}
	if net := row.TakenCents - row.RefundedCents; net != row.RecordedCents {
		ch.money.add(fmt.Sprintf("%s (%s): taken %d, refunded %d, recorded %d", id, row.Status, row.TakenCents, row.RefundedCents, row.RecordedCents))
	}
	if answered && (!row.InLedger || row.WorkflowID == "") {
		ch.lost.add(fmt.Sprintf("%s (key %s, in ledger %v, workflow %q)", id, row.Key, row.InLedger, row.WorkflowID))
	}
	if !slices.Contains(finalStatuses, row.Status) {
		ch.unfinished.add(fmt.Sprintf("%s (%q, workflow %s)", id, row.Status, row.WorkflowStatus))
	}
}

// countFaults adds up the faults injected and the worker exits observed
// over the phases.
func (t *tally) countFaults(phases []phaseStats) {
	t.injected, t.observed = map[string]int{}, map[string]int{}
	for _, p := range phases {
		for k, v := range p.Injected {
			t.injected[k] += v
		}
		for k, v := range p.Observed {
			t.observed[k] += v
		}
	}
}

// metrics is the table's lines above the checks, from the tally and the
// summary's incidents, charge records and settle.
func (t *tally) metrics(s summary) []metric {
	inc := s.Incidents
	perThousand := "-"
	if n := len(s.OrdersChecked); n > 0 {
		perThousand = strconv.FormatFloat(1000*float64(inc.Person)/float64(n), 'f', 1, 64)
	}
	sum := func(m map[string]int) string {
		n := 0
		for _, v := range m {
			n += v
		}
		return strconv.Itoa(n) + " (per phase below)"
	}
	settled := s.Settle
	return []metric{
		{"orders (keys)", strconv.Itoa(t.keys)},
		{"keys sent by two clients at once", strconv.Itoa(t.duplicated)},
		{"requests", strconv.Itoa(t.requests)},
		{"  201 created", strconv.Itoa(t.created)},
		{"  of them replayed", strconv.Itoa(t.replayed)},
		{"  202 processing", strconv.Itoa(t.accepted)},
		{"  409 in progress", strconv.Itoa(t.inProgress)},
		{"  409 effect unknown", strconv.Itoa(t.unknown)},
		{"  5xx", strconv.Itoa(t.serverErrs)},
		{"  network errors", strconv.Itoa(t.netErrs)},
		{"orders in the run (answered or with a workflow)", strconv.Itoa(len(s.OrdersChecked))},
		{"workflows", strconv.Itoa(t.workflows)},
		{"order statuses", counts(t.statuses)},
		{"gateway calls", counts(t.calls)},
		{"money taken at the gateway (cents)", strconv.FormatInt(t.taken, 10)},
		{"money refunded (cents)", strconv.FormatInt(t.refunded, 10) + refundsNote(s.RefundsTable)},
		{"money recorded (cents)", strconv.FormatInt(t.recorded, 10)},
		{"operator decisions", dash(decisionCounts(settled.Decisions))},
		{"incidents that needed a person", strconv.Itoa(inc.Person) + " " + counts(inc.PersonBySteps)},
		{"incidents decided automatically", strconv.Itoa(inc.Automatic) + " " + counts(inc.AutomaticBy)},
		{"  per 1,000 orders, needing a person", perThousand},
		{"  workflows whose decisions could not be read", strconv.Itoa(inc.Unread)},
		{"faults injected", sum(t.injected)},
		{"worker exits observed", sum(t.observed)},
		{"Redis", s.Redis + ", -redis-durability " + s.Durability},
		{"Redis failovers", strconv.Itoa(t.injected[failoverCount])},
		{"charge steps done (a payment row)", strconv.Itoa(s.ChargesDone)},
		{"  of them with their record gone from Redis", strconv.Itoa(s.ChargeRecordsLost) + lostNote(s.Durability)},
		{"settle", fmt.Sprintf("%.1fs, clients finished %v, verify finished %v, %d workflows still running", settled.Seconds,
			settled.ClientsFinished, settled.VerifyFinished, settled.Running)},
	}
}

// decisionCounts is the operators' decisions of the settle, counted by
// decision (those not applied apart), sorted, comma-separated.
func decisionCounts(ds []decision) string {
	decisions := map[string]int{}
	for _, d := range ds {
		what := d.Decision
		if what == "" {
			what = "undecided"
		}
		if d.Outcome != "applied" {
			what += " (not applied)"
		}
		decisions[what]++
	}
	var decided []string
	for k, v := range decisions {
		decided = append(decided, k+" ×"+strconv.Itoa(v))
	}
	slices.Sort(decided)
	return strings.Join(decided, ", ")
}

func lastAnswer(as []answer) *answer {
	if len(as) == 0 {
		return nil
	}
	return &as[len(as)-1]
}

// lostNote says what a lost charge record means under durability.
func lostNote(durability string) string {
	if durability == "none" {
		return " (not a failure without -redis-durability replicas: the evidence and the ledger stand in; see double charges)"
	}
	return " (a check: replicas were waited for)"
}

func refundsNote(table bool) string {
	if table {
		return ""
	}
	return " (no gateway_refunds table: counted as 0)"
}

// refundsTable reports whether the ledger has the gateway_refunds table.
func (c *cluster) refundsTable(ctx context.Context) (bool, error) {
	_, err := c.ledger.DB().ExecContext(ctx, "SELECT 1 FROM gateway_refunds WHERE 1 = 0")
	if err != nil && ctx.Err() != nil {
		return false, ctx.Err()
	}
	return err == nil, nil
}

// orderRow reads an order's rows: its status, payments, gateway calls
// (counted by outcome into calls) and refunds.
func (c *cluster) orderRow(ctx context.Context, id string, refunds bool, calls map[string]int) (orderRow, error) {
	row := orderRow{OrderID: id}
	o, ok, err := c.ledger.Order(ctx, id)
	if err != nil {
		return row, err
	}
	row.InLedger, row.Status = ok, o.Status
	ps, err := c.ledger.Payments(ctx, id)
	if err != nil {
		return row, err
	}
	row.PaymentRows = len(ps)
	if o.Status == order.StatusCompleted || o.Status == order.StatusCharged {
		for _, p := range ps {
			if p.Status == ledger.PaymentCaptured {
				row.RecordedCents += p.AmountCents
			}
		}
	}
	gcs, err := c.ledger.GatewayCalls(ctx, id)
	if err != nil {
		return row, err
	}
	for _, g := range gcs {
		calls[g.Outcome]++
		if g.Charged() {
			row.ChargedCalls++
			row.TakenCents += g.AmountCents
		}
	}
	if refunds {
		q := "SELECT COALESCE(SUM(amount_cents), 0) FROM gateway_refunds WHERE order_id = ?"
		if c.ledger.Dialect() == ledger.Postgres {
			q = strings.Replace(q, "?", "$1", 1)
		}
		if err := c.ledger.DB().QueryRowContext(ctx, q, id).Scan(&row.RefundedCents); err != nil {
			return row, fmt.Errorf("read the refunds of order %s: %w", id, err)
		}
	}
	return row, nil
}

// printSummary prints the table.
func printSummary(w io.Writer, s summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nonceflow chaos: %d orders, %d workers, ledger %s, seed %d, wall time %.1fs\n\n", s.Orders, s.Workers, s.Ledger, s.Seed, s.WallSeconds)
	fmt.Fprintln(tw, "METRIC\tVALUE")
	for _, m := range s.Metrics {
		fmt.Fprintf(tw, "%s\t%s\n", m.Name, m.Value)
	}
	fmt.Fprintln(tw, "\t")
	fmt.Fprintln(tw, "CHECK\tCOUNT\tRESULT\tEXAMPLES")
	for _, ch := range s.Checks {
		result := "ok"
		if ch.Count > 0 {
			result = "VIOLATION"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", ch.Name, ch.Count, result, strings.Join(ch.Examples, "; "))
	}
	fmt.Fprintln(tw, "\t")
	fmt.Fprintln(tw, "PHASE\tSECONDS\tORDERS\tKNOBS\tINJECTED\tOBSERVED")
	for _, p := range s.Phases {
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%s\t%s\t%s\n", p.Name, p.End-p.Start, p.Orders, dash(p.Knobs), counts(p.Injected), counts(p.Observed))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "all checks passed"
	if n := len(s.FailedChecks); n > 0 {
		verdict = fmt.Sprintf("%d checks failed", n)
	}
	_, err := fmt.Fprintf(w, "\n%s; wall time %.1fs; logs, answers.jsonl and summary.json in %s\n", verdict, s.WallSeconds, s.Out)
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// incidents are the run's unknown effects as the workflows' audits
// (idemwf.DecisionsQuery) have them: decided by a person (a signal or an
// Update) or by the workflow itself (idemwf.ViaAutomatic).
type incidents struct {
	Person int `json:"person"`
	// PersonBySteps counts them by operation code (the record key's
	// prefix): each should be a step that is not idempotent and had no
	// proof.
	PersonBySteps map[string]int `json:"person_by_step"`
	Automatic     int            `json:"automatic"`
	// AutomaticBy counts them by "<operation code> <decision> (<basis>)".
	AutomaticBy map[string]int `json:"automatic_by"`
	// Unread counts the workflows whose decisions could not be queried.
	Unread int `json:"unread"`
}

// incidents reads every workflow's decisions.
func (c *cluster) incidents(ctx context.Context, wfs map[string]workflowInfo) incidents {
	out := incidents{PersonBySteps: map[string]int{}, AutomaticBy: map[string]int{}}
	for _, id := range slices.Sorted(maps.Keys(wfs)) {
		ds, err := operator.Decisions(ctx, c.tc, id, "")
		if err != nil {
			out.Unread++
			c.log.Warn("chaos: could not read a workflow's decisions", "workflow", id, "err", err)
			continue
		}
		for _, d := range ds {
			code, _, _ := strings.Cut(d.Incident.RecordKey, ":")
			if d.Via == idemwf.ViaAutomatic {
				out.Automatic++
				out.AutomaticBy[fmt.Sprintf("%s %s (%s)", code, d.Resolution.Decision, d.Basis)]++
				continue
			}
			out.Person++
			out.PersonBySteps[code]++
		}
	}
	return out
}
