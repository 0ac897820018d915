package e2e_test

// End-to-end tests of the order system: the PlaceOrder saga on a real
// Temporal server and Redis, with the ledger in SQLite and, when
// LEDGER_DSN names one, in PostgreSQL too.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	_ "modernc.org/sqlite"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/internal/trail"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/sqlfence"
	"github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

const (
	envLedger = "ONCEFLOW_E2E_LEDGER"
	// envUpdate rewrites the recorded history examples/order replays.
	envUpdate = "ONCEFLOW_UPDATE_TESTDATA"
)

// forEachLedger runs test against a SQLite ledger and, when LEDGER_DSN is
// set (.ci/run sets it to the local PostgreSQL), against that one too.
func forEachLedger(t *testing.T, test func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	})
	if dsn := os.Getenv("LEDGER_DSN"); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			t.Parallel()
			test(t, dsn)
		})
	}
}

// shop is one test's order system: a harness and a ledger.
type shop struct {
	*harness
	dsn string
	l   *ledger.Ledger
}

func newShop(t *testing.T, dsn string, lease time.Duration) *shop {
	t.Helper()
	l, err := ledger.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &shop{harness: newHarness(t, lease), dsn: dsn, l: l}
}

func (s *shop) startOrderWorker(g order.GatewayConfig) *worker.Worker {
	s.t.Helper()
	return s.startWorker(func(r worker.Registry) error {
		gw, err := order.NewGateway(s.l, g)
		if err != nil {
			return err
		}
		return order.Register(r, s.l, gw)
	})
}

// newOrder is an order of a SKU of the test's own, so stock is its own.
func (s *shop) newOrder() order.PlaceOrderInput {
	return order.PlaceOrderInput{OrderID: order.NewOrderID(), CustomerID: "c-1",
		Items: []ledger.Item{{SKU: "sku-" + storetest.RandomHex(6), Qty: 2}}, AmountCents: 1999, Currency: "USD"}
}

func (s *shop) result(run client.WorkflowRun) order.OrderResult {
	s.t.Helper()
	var res order.OrderResult
	if err := run.Get(context.Background(), &res); err != nil {
		s.t.Fatalf("workflow %s: %v", run.GetID(), err)
	}
	return res
}

// books is what the ledger holds of one order.
type books struct {
	calls    []ledger.GatewayCall
	charges  int
	payments []ledger.Payment
	stock    int64
	reserved string
}

func (s *shop) books(in order.PlaceOrderInput) books {
	s.t.Helper()
	ctx := context.Background()
	var b books
	var err error
	if b.calls, err = s.l.GatewayCalls(ctx, in.OrderID); err != nil {
		s.t.Fatal(err)
	}
	for _, c := range b.calls {
		if c.Charged() {
			b.charges++
		}
	}
	if b.payments, err = s.l.Payments(ctx, in.OrderID); err != nil {
		s.t.Fatal(err)
	}
	if b.stock, err = s.l.Stock(ctx, in.Items[0].SKU); err != nil {
		s.t.Fatal(err)
	}
	if r, ok, err := s.l.ReservationOf(ctx, in.OrderID); err != nil {
		s.t.Fatal(err)
	} else if ok {
		b.reserved = r.Status
	}
	return b
}

func TestOrderIsPlacedOnceAcrossWorkflows(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		s.startOrderWorker(order.GatewayConfig{})
		in := s.newOrder()
		first := s.result(s.start(order.PlaceOrder, "order-"+in.OrderID, in))
		if first.Status != order.StatusCompleted || first.PaymentID == "" || first.ShipmentID == "" || first.ChargedCents != in.AmountCents {
			t.Fatalf("first = %+v", first)
		}
		// Another workflow for the same order replays every step.
		second := s.result(s.start(order.PlaceOrder, "again-"+in.OrderID, in))
		b := s.books(in)
		if second != first || len(b.calls) != 1 || len(b.payments) != 1 || b.stock != ledger.DefaultStock-2 {
			t.Fatalf("second %+v (first %+v); %d gateway calls, %d payments, stock %d", second, first, len(b.calls), len(b.payments), b.stock)
		}
		o, _, err := s.l.Order(t.Context(), in.OrderID)
		if err != nil || o.Status != order.StatusCompleted || o.PaymentID != first.PaymentID {
			t.Fatalf("order row %+v, %v", o, err)
		}
	})
}

// runOrderChild is a worker process of the order system whose gateway
// crashes it right after the charge (-gateway-crash-after-charge 1).
func runOrderChild() int {
	lease, _ := time.ParseDuration(os.Getenv(envLease))
	cfg := workerConfig(os.Getenv(envTemporal), os.Getenv(envNamespace), os.Getenv(envQueue), os.Getenv(envRedis), os.Getenv(envKeys), lease)
	cfg.HTTPAddr = "off"
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	l, err := ledger.Open(ctx, os.Getenv(envLedger))
	if err != nil {
		fmt.Fprintln(os.Stderr, "order child:", err)
		return 1
	}
	defer l.Close()
	gw, err := order.NewGateway(l, order.GatewayConfig{CrashAfterCharge: 1, Crash: func() { os.Exit(3) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "order child:", err)
		return 1
	}
	cfg.Register = func(r worker.Registry) error { return order.Register(r, l, gw) }
	return runChildWorker(ctx, cfg, "order child")
}

// TestCrashAfterChargeIsReconciled: the worker process dies right after
// the gateway charged, before the activity returns (the record stays
// EXECUTING). The next attempt waits for the dead attempt's lease, takes
// over, and the charge's Reconcile finds the charge at the gateway by the
// operation key: the order completes with one gateway call and one
// payment row, written under the taking-over attempt's fence.
func TestCrashAfterChargeIsReconciled(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		const lease = 3 * time.Second // shorter than the step's 5 s heartbeat timeout
		s := newShop(t, dsn, lease)
		in, run := s.crashAfterCharge()
		s.startOrderWorker(order.GatewayConfig{})
		res := s.result(run)
		b := s.books(in)
		if res.Status != order.StatusCompleted || len(b.calls) != 1 || len(b.payments) != 1 || b.payments[0].ID != res.PaymentID {
			t.Fatalf("result %+v; calls %+v; payments %+v", res, b.calls, b.payments)
		}
		if p := b.payments[0]; p.GatewayChargeID != b.calls[0].ChargeID || p.Fence.Attempt < 2 {
			t.Fatalf("payment %+v; want the crashed call's charge, written by a later attempt", p)
		}
		s.checkTrail(in.OrderID, res, b)
	})
}

// TestCrashAfterChargeThenRedisLossChargesOnce: the worker dies right
// after the gateway charged (the record EXECUTING), then Redis loses
// everything, by FLUSHALL or by a restart without its data, before the
// next attempt. That attempt finds no record; the checkpoint the crashed
// attempt had Temporal confirm before it charged makes the fresh claim
// uncertain, so the charge's Reconcile runs first, finds the charge at the
// gateway by the operation key, and the order completes with one gateway
// charge and one payment row. Without the evidence the attempt claimed
// fresh and charged again.
func TestCrashAfterChargeThenRedisLossChargesOnce(t *testing.T) {
	t.Parallel()
	for _, loss := range []string{"flushall", "restart-empty"} {
		t.Run(loss, func(t *testing.T) {
			t.Parallel()
			forEachLedger(t, func(t *testing.T, dsn string) {
				const lease = 3 * time.Second
				s := newShop(t, dsn, lease)
				srv := redistest.Start(t) // a Redis of its own, to lose
				s.redis, s.rdb = srv.Addr(), redistest.NewClient(t, srv.Addr())
				in, run := s.crashAfterCharge()
				switch loss {
				case "flushall":
					if err := s.rdb.FlushAll(context.Background()).Err(); err != nil {
						t.Fatal(err)
					}
				default:
					if err := srv.Restart(); err != nil {
						t.Fatal(err)
					}
				}
				if n, err := s.rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
					t.Fatalf("%d keys after the loss, %v", n, err)
				}
				s.startOrderWorker(order.GatewayConfig{})
				res := s.result(run)
				b := s.books(in)
				if res.Status != order.StatusCompleted || b.charges != 1 || len(b.calls) != 1 || len(b.payments) != 1 || b.payments[0].ID != res.PaymentID {
					t.Fatalf("result %+v; calls %+v; payments %+v; want one charge and one payment", res, b.calls, b.payments)
				}
				if p := b.payments[0]; p.GatewayChargeID != b.calls[0].ChargeID || p.Fence.Epoch == 0 {
					t.Fatalf("payment %+v; want the crashed call's charge, under the new record's fence", p)
				}
			})
		})
	}
}

// crashAfterCharge places an order on a child worker whose gateway
// crashes it right after the charge, and returns once it has: the charge
// is at the gateway, the record EXECUTING, the ledger without a payment.
func (s *shop) crashAfterCharge() (order.PlaceOrderInput, client.WorkflowRun) {
	t := s.t
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envChild+"=order", envLedger+"="+s.dsn,
		envTemporal+"="+temporalServer.Address(), envNamespace+"="+temporalServer.Namespace(),
		envQueue+"="+s.queue, envRedis+"="+s.redis, envKeys+"="+s.keys, envLease+"="+s.lease.String())
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	t.Cleanup(func() { _ = child.Process.Kill(); <-exited })

	in := s.newOrder()
	run := s.start(order.PlaceOrder, "order-"+in.OrderID, in)
	var exitErr *exec.ExitError
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
			t.Fatalf("the child worker ended with %v; want exit status 3 from the crash after the charge", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child worker did not crash")
	}
	if b := s.books(in); len(b.calls) != 1 || b.calls[0].Outcome != ledger.CallChargedThenCrash || len(b.payments) != 0 {
		t.Fatalf("after the crash: calls %+v, payments %+v", b.calls, b.payments)
	}
	return in, run
}

// checkTrail: `worker trace` of an order whose charge crashed and was
// reconciled shows each layer: the completed workflow, every step's
// record (the charge COMPLETED by a later attempt), no compensation, and
// the ledger's one call and one payment.
func (s *shop) checkTrail(orderID string, res order.OrderResult, b books) {
	s.t.Helper()
	// The trail reads every step's record one after the other; under the
	// race detector, beside the other end-to-end tests, one read outlasted
	// the default 200 ms command timeout and failed the test. What the
	// trail shows is checked here, not how fast Redis answers.
	store, err := redisstore.New(redisstore.Config{Client: s.rdb, Namespace: s.keys, CommandTimeout: 5 * time.Second})
	if err != nil {
		s.t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte(e2eSecret), 1)
	if err != nil {
		s.t.Fatal(err)
	}
	src := trail.Sources{Store: store, Client: s.tc, Ledger: s.l, Digester: dig, Namespace: temporalServer.Namespace()}
	tr, err := trail.Build(context.Background(), src, trail.Query{OrderID: orderID})
	if err != nil {
		s.t.Fatal(err)
	}
	var text strings.Builder
	if err := trail.Write(&text, tr, false); err != nil {
		s.t.Fatal(err)
	}
	if tr.WorkflowID != "order-"+orderID || tr.Status != "COMPLETED" || tr.RunID == "" || len(tr.Pending) != 0 || len(tr.Steps) != len(order.Steps) {
		s.t.Fatalf("trail:\n%s", text.String())
	}
	for _, st := range tr.Steps {
		r := st.Record
		switch {
		case st.Step == "release" || st.Step == "refund":
			if r.Found {
				s.t.Errorf("a compensation record for a completed order:\n%s", text.String())
			}
		case !r.Found || r.State != onceflow.StateCompleted || r.Response == 0 || r.Codec == "" || time.Duration(r.TTLLeft) <= 0:
			s.t.Errorf("step %s: %+v\n%s", st.Step, r, text.String())
		case st.Step == "charge" && (r.Attempt < 2 || r.Attempt != b.payments[0].Fence.Attempt):
			s.t.Errorf("the charge's record: attempt %d, want the reconciling attempt %d\n%s", r.Attempt, b.payments[0].Fence.Attempt, text.String())
		}
	}
	if l := tr.Ledger; l == nil || l.Order == nil || l.Order.Status != order.StatusCompleted || len(l.GatewayCalls) != 1 || len(l.Payments) != 1 ||
		l.Payments[0].ID != res.PaymentID || l.Shipment == nil {
		s.t.Errorf("the trail's ledger:\n%s", text.String())
	}
	for _, want := range []string{"workflow order-" + orderID, "step charge", "COMPLETED attempt", "payment"} {
		if !strings.Contains(text.String(), want) {
			s.t.Errorf("the printed trail lacks %q:\n%s", want, text.String())
		}
	}
}

// pendingCharge places an order on a worker whose gateway behaves as g,
// without the workflow's reconcile, and waits until its charge waits on a
// decision: it returns the order, its run and the resolve arguments.
func (s *shop) pendingCharge(g order.GatewayConfig) (order.PlaceOrderInput, client.WorkflowRun, []string) {
	s.t.Helper()
	s.startOrderWorker(g)
	in := s.newOrder()
	in.SkipChargeReconcile = true
	run := s.start(order.PlaceOrder, "order-"+in.OrderID, in)
	return in, run, s.waitPending(run.GetID())
}

// resolveArgs are the arguments of `worker resolve` for a workflow's only
// pending incident.
func (s *shop) waitPending(wfID string) []string {
	s.t.Helper()
	p := s.pendingOf(wfID, 1).Pending[0]
	if p.Activity != order.ChargeCardActivity || p.ResultType != "ledger.Payment" {
		s.t.Fatalf("pending %+v; want the charge", p)
	}
	// The list of every waiting workflow of the task queue shows it too,
	// once visibility has the workflow's search attribute.
	var out string
	var err error
	s.waitFor("the pending list to show "+wfID, func() bool {
		out, err = s.operator("pending", "-task-queue", s.queue, "-json")
		var list []operator.Waiting
		return err == nil && json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 && list[0].WorkflowID == wfID
	})
	table, err := s.operator("pending", "-task-queue", s.queue)
	if err != nil || !strings.Contains(table, wfID) || !strings.Contains(table, p.Incident.RecordKey) {
		s.t.Fatalf("pending table: %s, %v", table, err)
	}
	return incidentArgs(wfID, p.Incident, "")[:8]
}

// TestTimeoutAfterChargeWaitsForADecision: the gateway charges and times
// out; without the reconcile activity the charge waits in the pending
// list; `resolve completed` with the gateway's charge finishes the order,
// and a later duplicate replays it. One gateway call throughout.
func TestTimeoutAfterChargeWaitsForADecision(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		in, run, args := s.pendingCharge(order.GatewayConfig{TimeoutAfterCharge: 1})
		b := s.books(in)
		if len(b.calls) != 1 || b.calls[0].Outcome != ledger.CallChargedThenTimeout || len(b.payments) != 0 {
			t.Fatalf("before the decision: calls %+v, payments %+v", b.calls, b.payments)
		}
		result := fmt.Sprintf(`{"status":"captured","gateway_charge_id":%q}`, b.calls[0].ChargeID)
		if out, err := s.operator("resolve", append(args, "-decision", "completed", "-result", result)...); err != nil {
			t.Fatalf("resolve: %s, %v", out, err)
		}
		res := s.result(run)
		b = s.books(in)
		if res.Status != order.StatusCompleted || len(b.payments) != 1 || b.payments[0].GatewayChargeID != b.calls[0].ChargeID || b.payments[0].ID != res.PaymentID {
			t.Fatalf("result %+v; payments %+v", res, b.payments)
		}
		dup := s.result(s.start(order.PlaceOrder, "again-"+in.OrderID, in))
		if b := s.books(in); dup != res || len(b.calls) != 1 || len(b.payments) != 1 {
			t.Fatalf("duplicate %+v (first %+v); %d calls, %d payments", dup, res, len(b.calls), len(b.payments))
		}
		if !strings.HasPrefix(dsn, "sqlite:") {
			return
		}
		// The recorded history replays deterministically; with
		// ONCEFLOW_UPDATE_TESTDATA=1 it becomes examples/order's fixture.
		hist := s.history(run)
		replayer := sdkworker.NewWorkflowReplayer()
		replayer.RegisterWorkflow(order.PlaceOrder)
		if err := replayer.ReplayWorkflowHistory(quietLogger(), hist); err != nil {
			t.Fatalf("replay: %v", err)
		}
		if os.Getenv(envUpdate) != "" {
			b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile("../../testdata/place-order-resolved.json", append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func (h *harness) history(run client.WorkflowRun) *historypb.History {
	h.t.Helper()
	it := h.tc.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			h.t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	return hist
}

// sequence returns the numbers in turn, then the last one for ever.
func sequence(n ...float64) func() float64 {
	var i atomic.Int64
	return func() float64 { return n[min(int(i.Add(1))-1, len(n)-1)] }
}

// TestResolveRetryChargesOnce: the gateway timed out before it charged;
// the operator sees no charge there and decides retry: the step runs again
// and the order completes with one charge.
func TestResolveRetryChargesOnce(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		in, run, args := s.pendingCharge(order.GatewayConfig{TimeoutBeforeCharge: 0.5, Rand: sequence(0.1, 0.9)})
		if b := s.books(in); b.charges != 0 {
			t.Fatalf("%d charges before the decision", b.charges)
		}
		if out, err := s.operator("resolve", append(args, "-decision", "retry", "-reason", "the gateway shows no charge")...); err != nil {
			t.Fatalf("resolve: %s, %v", out, err)
		}
		res := s.result(run)
		b := s.books(in)
		if res.Status != order.StatusCompleted || len(b.calls) != 2 || b.charges != 1 || len(b.payments) != 1 {
			t.Fatalf("result %+v; calls %+v; payments %+v", res, b.calls, b.payments)
		}
	})
}

// TestTimeoutBeforeChargeIsDecidedAutomatically: the gateway timed out
// before it charged, and the workflow's reconcile runs (no
// -skip-reconcile): it finds nothing, asks again after order.ChargeSettle
// and finds nothing again, which proves no charge. The workflow retries by
// itself: no incident (the pending search attribute is never upserted),
// one charge, and the decision in the audit with actor onceflow, its
// reason and the gateway's facts. Before automatic decisions the order
// waited for an operator (TestResolveRetryChargesOnce's incident).
func TestTimeoutBeforeChargeIsDecidedAutomatically(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		s.startOrderWorker(order.GatewayConfig{TimeoutBeforeCharge: 0.5, Rand: sequence(0.1, 0.9)})
		in := s.newOrder()
		run := s.start(order.PlaceOrder, "order-"+in.OrderID, in)
		res := s.result(run)
		b := s.books(in)
		if res.Status != order.StatusCompleted || len(b.calls) != 2 || b.charges != 1 || len(b.payments) != 1 {
			t.Fatalf("result %+v; calls %+v; payments %+v", res, b.calls, b.payments)
		}
		ds, err := operator.Decisions(t.Context(), s.tc, run.GetID(), run.GetRunID())
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].Via != idemwf.ViaAutomatic || ds[0].Resolution.By != idemwf.Actor || ds[0].Basis != idemwf.BasisSettledLookup ||
			ds[0].Resolution.Decision != idemwf.Retry || ds[0].Resolution.Evidence == nil || len(ds[0].Resolution.Evidence.Facts) == 0 {
			t.Fatalf("decisions %+v, want one automatic retry on the settled lookup, with the gateway's facts", ds)
		}
		for _, ev := range s.history(run).Events {
			if ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()[idemwf.PendingSearchAttribute] != nil {
				t.Fatalf("the workflow upserted %s (%v): an incident was opened", idemwf.PendingSearchAttribute, ev)
			}
		}
	})
}

// TestResolveFailReleasesTheReservation: the operator fails the charge;
// the order ends failed and its stock is given back, once.
func TestResolveFailReleasesTheReservation(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		in, run, args := s.pendingCharge(order.GatewayConfig{TimeoutBeforeCharge: 1})
		if b := s.books(in); b.reserved != ledger.Reserved || b.stock != ledger.DefaultStock-2 {
			t.Fatalf("before the decision: reservation %q, stock %d", b.reserved, b.stock)
		}
		if out, err := s.operator("resolve", append(args, "-decision", "fail", "-reason", "customer cancelled")...); err != nil {
			t.Fatalf("resolve: %s, %v", out, err)
		}
		res := s.result(run)
		b := s.books(in)
		// The client reads a stable reason; the operator's is in the
		// decision's audit.
		if res.Status != order.StatusFailed || res.Reason != order.ReasonChargeFailed ||
			b.reserved != ledger.Released || b.stock != ledger.DefaultStock || b.charges != 0 || len(b.payments) != 0 {
			t.Fatalf("result %+v; books %+v", res, b)
		}
		o, _, _ := s.l.Order(t.Context(), in.OrderID)
		if o.Status != order.StatusFailed {
			t.Fatalf("order row status %q", o.Status)
		}
	})
}

// TestRedisLossIsCaughtByTheLedger: Redis loses every record (FLUSHALL)
// after the order completed; a duplicate order runs every step again, and
// the ledger answers each from its rows: the original payment, no second
// charge, no second row, the stock taken once.
func TestRedisLossIsCaughtByTheLedger(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		srv := redistest.Start(t) // a Redis of its own, to flush
		s.redis, s.rdb = srv.Addr(), redistest.NewClient(t, srv.Addr())
		s.startOrderWorker(order.GatewayConfig{})
		in := s.newOrder()
		first := s.result(s.start(order.PlaceOrder, "order-"+in.OrderID, in))
		if err := s.rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.rdb.DBSize(context.Background()).Result(); n != 0 {
			t.Fatalf("%d keys after FLUSHALL", n)
		}
		dup := s.result(s.start(order.PlaceOrder, "again-"+in.OrderID, in))
		b := s.books(in)
		if dup.PaymentID != first.PaymentID || dup.ShipmentID != first.ShipmentID || dup.Status != order.StatusCompleted ||
			len(b.calls) != 1 || len(b.payments) != 1 || b.stock != ledger.DefaultStock-2 {
			t.Fatalf("duplicate %+v, first %+v; books %+v", dup, first, b)
		}
		// Redis holds the steps' records again: they ran (answered by the
		// ledger), they were not replayed from Redis.
		keys, _ := s.rdb.Keys(context.Background(), s.keys+":*").Result()
		if !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, string(order.ChargeCode)) }) {
			t.Fatalf("no charge record after the duplicate: %v", keys)
		}
	})
}

// TestDeclinedCardIsCompensatedOnce: a declined card releases the
// reservation and ends the order declined; a duplicate replays it and the
// stock is given back once.
func TestDeclinedCardIsCompensatedOnce(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		s.startOrderWorker(order.GatewayConfig{DeclineRate: 1})
		in := s.newOrder()
		res := s.result(s.start(order.PlaceOrder, "order-"+in.OrderID, in))
		dup := s.result(s.start(order.PlaceOrder, "again-"+in.OrderID, in))
		b := s.books(in)
		if res.Status != order.StatusDeclined || dup != res || res.ChargedCents != 0 {
			t.Fatalf("result %+v, duplicate %+v", res, dup)
		}
		if b.reserved != ledger.Released || b.stock != ledger.DefaultStock || len(b.calls) != 1 || b.charges != 0 ||
			len(b.payments) != 1 || b.payments[0].Status != ledger.PaymentDeclined {
			t.Fatalf("books %+v", b)
		}
	})
}

// TestLedgerFencing: a write under an older fence than the stored row's
// is refused, and a newer or equal one goes through; a second writer under
// the same key gets the first one's payment ID.
func TestLedgerFencing(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		l, err := ledger.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx := t.Context()
		key := "charge-card:d1:" + storetest.RandomHex(16)
		p := ledger.Payment{IdempotencyKey: key, OrderID: "o-" + storetest.RandomHex(4), AmountCents: 100, Currency: "USD",
			GatewayChargeID: "ch_new", Status: ledger.PaymentCaptured, Fence: onceflow.Fence{Attempt: 2, Rev: 3}}
		newer, err := l.RecordPayment(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		zombie := p
		zombie.ID, zombie.GatewayChargeID, zombie.Status, zombie.Fence = "", "ch_zombie", ledger.PaymentDeclined, onceflow.Fence{Attempt: 1, Rev: 2}
		stored, err := l.RecordPayment(ctx, zombie)
		var stale *sqlfence.StaleError
		if !errors.Is(err, sqlfence.ErrStale) || !errors.As(err, &stale) || stale.Stored != p.Fence || stale.Attempted != zombie.Fence {
			t.Fatalf("zombie write: %v", err)
		}
		if stored != newer {
			t.Fatalf("the zombie changed the row: %+v, was %+v", stored, newer)
		}
		// A zombie of a record Redis lost: more attempts than the new
		// record's, but an older epoch (the lost record's creation time).
		lost := p
		lost.ID, lost.GatewayChargeID, lost.Fence = "", "ch_lost_record", onceflow.Fence{Epoch: 1_000, Attempt: 9, Rev: 20}
		newest := p
		newest.ID, newest.Fence = "", onceflow.Fence{Epoch: 2_000, Attempt: 1, Rev: 2}
		key2 := "charge-card:d1:" + storetest.RandomHex(16)
		newest.IdempotencyKey, lost.IdempotencyKey = key2, key2
		after, err := l.RecordPayment(ctx, newest)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := l.RecordPayment(ctx, lost); !errors.Is(err, sqlfence.ErrStale) || got != after {
			t.Fatalf("the lost record's zombie: %+v, %v; want refused, the newer row kept", got, err)
		}
		// The same attempt again, and a later one, go through; the row
		// keeps its ID.
		for _, f := range []onceflow.Fence{{Attempt: 2, Rev: 3}, {Attempt: 2, Rev: 4}, {Attempt: 3, Rev: 1}} {
			w := p
			w.ID, w.Fence, w.GatewayChargeID = "", f, "ch_"+f.String()
			got, err := l.RecordPayment(ctx, w)
			if err != nil || got.ID != newer.ID || got.Fence != f || got.GatewayChargeID != w.GatewayChargeID {
				t.Fatalf("write under %v: %+v, %v", f, got, err)
			}
		}
		// EnsurePayment never overwrites, and answers with the row.
		got, created, err := l.EnsurePayment(ctx, ledger.Payment{IdempotencyKey: key, OrderID: p.OrderID, Status: ledger.PaymentDeclined})
		if err != nil || created || got.ID != newer.ID || got.Status != ledger.PaymentCaptured {
			t.Fatalf("EnsurePayment: %+v, created %v, %v", got, created, err)
		}
		ps, err := l.Payments(ctx, p.OrderID)
		if err != nil || len(ps) != 2 {
			t.Fatalf("%d payment rows, %v", len(ps), err)
		}
	})
}

// chargeKey is the operation key of an order's charge step (what the
// gateway and the ledger know the charge by).
func (s *shop) chargeKey(orderID string) string {
	s.t.Helper()
	dig, err := onceflow.NewDigester([]byte(e2eSecret), 1)
	if err != nil {
		s.t.Fatal(err)
	}
	return onceflow.Ref{Code: order.ChargeCode, Digest: dig.Digest("business", temporalServer.Namespace(), orderID+"/charge")}.String()
}

// money is what the gateway kept of an order: its charges less its
// refunds.
func (s *shop) money(in order.PlaceOrderInput) (kept int64, refunds []ledger.GatewayRefund) {
	s.t.Helper()
	calls, err := s.l.GatewayCalls(context.Background(), in.OrderID)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, c := range calls {
		if c.Charged() {
			kept += c.AmountCents
		}
	}
	if refunds, err = s.l.GatewayRefunds(context.Background(), in.OrderID); err != nil {
		s.t.Fatal(err)
	}
	for _, r := range refunds {
		kept -= r.AmountCents
	}
	return kept, refunds
}

// TestDeclineAfterAnEarlierChargeIsRefunded: an earlier attempt's charge
// reached the gateway and nothing else knows of it (its record lost, no
// checkpoint left), and the card is then declined: the order ends
// declined and the refund step gives the earlier charge back, so no money
// is kept for an order without a payment. Before the refund step the
// order ended declined with the money kept.
func TestDeclineAfterAnEarlierChargeIsRefunded(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		s.startOrderWorker(order.GatewayConfig{DeclineRate: 1})
		in := s.newOrder()
		if _, err := s.l.RecordGatewayCall(t.Context(), ledger.GatewayCall{OperationKey: s.chargeKey(in.OrderID), OrderID: in.OrderID,
			AmountCents: in.AmountCents, Currency: in.Currency, Outcome: ledger.CallChargedThenCrash, ChargeID: "ch_earlier_" + in.OrderID}); err != nil {
			t.Fatal(err)
		}
		res := s.result(s.start(order.PlaceOrder, "order-"+in.OrderID, in))
		kept, refunds := s.money(in)
		if res.Status != order.StatusDeclined || res.RefundedCents != in.AmountCents || kept != 0 || len(refunds) != 1 || refunds[0].ChargeID != "ch_earlier_"+in.OrderID {
			t.Fatalf("result %+v; kept %d, refunds %+v; want declined with the earlier charge refunded", res, kept, refunds)
		}
		// A duplicate replays the order; the charge is refunded once.
		dup := s.result(s.start(order.PlaceOrder, "again-"+in.OrderID, in))
		if _, refunds := s.money(in); dup != res || len(refunds) != 1 {
			t.Fatalf("duplicate %+v (first %+v), refunds %+v", dup, res, refunds)
		}
	})
}

// TestResolveFailAfterAChargeRefundsIt: the gateway charged and timed
// out; the operator decides fail although the money was taken. The order
// ends failed, the charge is refunded, the stock given back: money taken
// equals money recorded (none).
func TestResolveFailAfterAChargeRefundsIt(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		s := newShop(t, dsn, 0)
		in, run, args := s.pendingCharge(order.GatewayConfig{TimeoutAfterCharge: 1})
		if out, err := s.operator("resolve", append(args, "-decision", "fail", "-reason", "customer cancelled")...); err != nil {
			t.Fatalf("resolve: %s, %v", out, err)
		}
		res := s.result(run)
		b := s.books(in)
		kept, refunds := s.money(in)
		if res.Status != order.StatusFailed || res.RefundedCents != in.AmountCents || res.ChargedCents != 0 || kept != 0 || len(refunds) != 1 ||
			b.charges != 1 || b.reserved != ledger.Released || len(b.payments) != 0 {
			t.Fatalf("result %+v; kept %d; refunds %+v; books %+v", res, kept, refunds, b)
		}
	})
}

// TestWorkersMigrateOneDatabaseTogether: workers that start at once on one
// new database all open the ledger. On PostgreSQL, concurrent CREATE
// TABLE IF NOT EXISTS failed with a unique violation on pg_type before the
// schema creation took an advisory lock.
func TestWorkersMigrateOneDatabaseTogether(t *testing.T) {
	t.Parallel()
	forEachLedger(t, func(t *testing.T, dsn string) {
		if !strings.HasPrefix(dsn, "sqlite:") {
			dsn = freshSchema(t, dsn)
		}
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
	})
}

// freshSchema creates an empty PostgreSQL schema for one test and returns
// dsn with it as the search path.
func freshSchema(t *testing.T, dsn string) string {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := "t_" + storetest.RandomHex(8)
	if _, err := db.ExecContext(t.Context(), "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			_, _ = db.Exec("DROP SCHEMA " + name + " CASCADE")
			_ = db.Close()
		}
	})
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + name
}
