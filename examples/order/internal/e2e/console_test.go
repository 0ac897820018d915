package e2e_test

// The operator console in a real headless browser: Debian's chromium,
// driven by chromedp.

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow/console"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/worker"
)

// chromium finds the browser: $CHROMIUM, or Debian's chromium.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("no chromium: install Debian's chromium (scripts/test does) or set CHROMIUM")
	return ""
}

// TestConsoleResolvesAPendingCharge: an order whose charge is left
// effect-unknown appears in the console, linked to its order's trail;
// clicking "retry" in the browser resolves it, and the order completes
// with one charge. The recent orders show its amount in the currency's
// own decimals (a JPY order has none), and its trail page is a timeline
// (time, step, state, attempt, actor) with the raw trail collapsed.
func TestConsoleResolvesAPendingCharge(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	s := newShop(t, "sqlite:"+t.TempDir()+"/ledger.db", 0)
	const token = "c0ffee5e2e70ce2e70ce2e70ce2e70ce2e70ce2e70ce2e70ce2e70ce2e70ce2e" // 64 hex digits
	w := s.startWorker(func(r worker.Registry) error {
		gw, err := order.NewGateway(s.l, order.GatewayConfig{TimeoutBeforeCharge: 0.5, Rand: sequence(0.1, 0.9)})
		if err != nil {
			return err
		}
		if err := order.Register(r, s.l, gw); err != nil {
			return err
		}
		con, err := console.New(console.Config{
			Client: r.Client, Namespace: r.Namespace, TaskQueue: r.TaskQueue, Token: token,
			Evidence: order.ConsoleEvidence{Ledger: s.l},
		})
		if err != nil {
			return err
		}
		con.Register(r.HTTP)
		return nil
	})
	base := "http://" + w.HTTPAddr()
	in := s.newOrder()
	in.SkipChargeReconcile = true
	in.Currency = "JPY" // no minor unit: 1999 JPY, not 19.99
	run := s.start(order.PlaceOrder, "order-"+in.OrderID, in)
	s.pendingOf(run.GetID(), 1)

	// Without the token the console refuses.
	if r := (&api{shop: s, base: base}).do("GET", "/console", ""); r.status != 401 {
		t.Fatalf("without the token: %v", r)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first action starts the browser: no timeout on it (see chromedp.Run).
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/console?token="+token)); err != nil {
		t.Fatalf("browser: %v", err)
	}
	tctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	row := `section.incident[data-workflow="` + run.GetID() + `"]`
	if err := chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("the pending incident never showed: %v", err)
	}
	listed, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(row)))
	if err != nil {
		t.Fatal(err)
	}
	// The Content-Security-Policy lets the page's one inline style through
	// (by its hash): the headers are grey.
	background, err := chromedp.Run(tctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("th")).backgroundColor`))
	if err != nil {
		t.Fatal(err)
	}
	if background != "rgb(244, 244, 244)" {
		t.Errorf("the console's style did not apply (its Content-Security-Policy blocked it?): th background %q", background)
	}
	link, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.querySelector('`+row+` a.trail-link').getAttribute("href")`))
	if err != nil || link != "/console/workflows/"+run.GetID() {
		t.Errorf("the incident links to %q (%v), want its workflow's trail", link, err)
	}
	if err := chromedp.Do(tctx, chromedp.Click(chromedp.CSS(row+` form.retry button`)), chromedp.WaitVisible(chromedp.CSS(`#message`))); err != nil {
		t.Fatalf("clicking retry: %v", err)
	}
	message, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(`#message`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(listed, order.ChargeCardActivity) || !strings.Contains(listed, string(order.ChargeCode)+":d1:") {
		t.Errorf("the pending row shows %q", listed)
	}
	if !strings.HasPrefix(message, "applied: retry") {
		t.Fatalf("after clicking retry the console says %q", message)
	}
	res := s.result(run)
	b := s.books(in)
	if res.Status != order.StatusCompleted || len(b.calls) != 2 || b.charges != 1 || len(b.payments) != 1 {
		t.Fatalf("result %+v; calls %+v; payments %+v", res, b.calls, b.payments)
	}

	// The recent workflows show the order's amount in yen; the incident's
	// link leads to its workflow's page.
	s.checkRecentInYen(tctx, base, run.GetID(), in.OrderID)
	s.checkWorkflowPage(tctx, base+link, in.OrderID)
	a := &api{shop: s, base: base}
	if r := a.do("POST", "/console/resolve", "decision=retry", "Authorization", "Bearer "+token,
		"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "cross-site"); r.status != 403 {
		t.Errorf("a cross-site post: %v", r)
	}
}

// checkRecentInYen checks the console's recent workflows
// (TestConsoleResolvesAPendingCharge): the order's, completed, shows its
// amount in yen, without decimals.
func (s *shop) checkRecentInYen(ctx context.Context, base, workflowID, orderID string) {
	s.t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console"), chromedp.WaitVisible(chromedp.CSS(`#workflows`))); err != nil {
		s.t.Fatal(err)
	}
	summary, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll("#workflows tr")].find(r => r.textContent.includes("`+workflowID+`")).querySelector("td.summary").textContent`))
	if err != nil || summary != "Order "+orderID+": completed, 1999 JPY" {
		s.t.Errorf("the recent workflows say %q (%v), want the order completed, 1999 JPY", summary, err)
	}
}

// checkWorkflowPage checks the completed order's workflow page, which
// the incident's link leads to (TestConsoleResolvesAPendingCharge): the
// order and its ledger rows (the facts), and a timeline: the charge
// scheduled, the decision with who sent it, the charge again, the
// workflow's end. The raw trail is there, collapsed.
func (s *shop) checkWorkflowPage(ctx context.Context, page, orderID string) {
	s.t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#timeline`))); err != nil {
		s.t.Fatalf("the incident's trail link: %v", err)
	}
	if h, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`h2`))); err != nil || h != "Order "+orderID {
		s.t.Errorf("the workflow's page is headed %q (%v), want its order", h, err)
	}
	if facts, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#facts`))); err != nil || !strings.Contains(facts, "completed, 1999 JPY") || !strings.Contains(facts, "money kept") {
		s.t.Errorf("the order's facts: %q (%v)", facts, err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#timeline tr")].slice(1).map(r => [...r.cells].slice(1, 5).map(c => c.textContent).join("|"))`))
	if err != nil {
		s.t.Fatal(err)
	}
	timeline := strings.Join(rows, "\n")
	for _, want := range []string{"workflow|started PlaceOrder|", order.ChargeCardActivity + "|scheduled||workflow",
		"onceflow.decide|decision: retry||console", order.ChargeCardActivity + "|completed|1|", "workflow|completed||"} {
		if !strings.Contains(timeline, want) {
			s.t.Errorf("the timeline has no row with %q:\n%s", want, timeline)
		}
	}
	open, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#raw").open`))
	if err != nil || open {
		s.t.Errorf("the raw trail is open (%v), want it collapsed", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#raw summary`)), chromedp.WaitVisible(chromedp.CSS(`#trail`))); err != nil {
		s.t.Fatal(err)
	}
	trailText, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#trail`)))
	if err != nil {
		s.t.Fatal(err)
	}
	if !strings.Contains(trailText, `"status": "COMPLETED"`) || !strings.Contains(trailText, `"step": "onceflow.decide"`) || !strings.Contains(trailText, "1999 JPY") {
		s.t.Errorf("the raw trail: %q", trailText)
	}
}

// consoleShop is a shop whose worker serves the console (token auth) over
// a gateway of g, and a headless browser signed in to it at 1280×900.
func consoleShop(t *testing.T, g order.GatewayConfig) (*shop, context.Context, string) {
	t.Helper()
	browser := chromium(t)
	s := newShop(t, "sqlite:"+t.TempDir()+"/ledger.db", 0)
	const token = "c0ffee5e2e70ce2e70ce2e70ce2e70ce2e70ce2e70ce2e70ce2e70ce2e70ce2e" // 64 hex digits
	w := s.startWorker(func(r worker.Registry) error {
		gw, err := order.NewGateway(s.l, g)
		if err != nil {
			return err
		}
		if err := order.Register(r, s.l, gw); err != nil {
			return err
		}
		con, err := console.New(console.Config{
			Client: r.Client, Namespace: r.Namespace, TaskQueue: r.TaskQueue, Token: token,
			Evidence:  order.ConsoleEvidence{Ledger: s.l},
			Principal: func(*http.Request) string { return "e2e-operator" },
		})
		if err != nil {
			return err
		}
		con.Register(r.HTTP)
		return nil
	})
	base := "http://" + w.HTTPAddr()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console?token="+token)); err != nil {
		t.Fatalf("browser: %v", err)
	}
	tctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	return s, tctx, base
}

// message waits for the console's message to start with prefix, and
// returns it.
func (s *shop) message(ctx context.Context, prefix string) string {
	s.t.Helper()
	var msg string
	s.waitFor("the console to say "+prefix, func() bool {
		m, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("#message") || {}).textContent || ""`))
		msg = m
		return err == nil && strings.HasPrefix(m, prefix)
	})
	return msg
}

// TestConsoleDecisionsFollowTheEvidence: the gateway charged and timed out
// for two orders. The console shows the charge beside each incident, at
// 1280 px without horizontal scrolling; retry without confirmation is
// refused and the gateway still shows one charge; the pre-filled
// completed completes the first order with the gateway's charge ID; fail,
// confirmed with a reason, fails the second and refunds its charge.
func TestConsoleDecisionsFollowTheEvidence(t *testing.T) {
	t.Parallel()
	s, ctx, base := consoleShop(t, order.GatewayConfig{TimeoutAfterCharge: 1})
	var ins [2]order.PlaceOrderInput
	var runs [2]client.WorkflowRun
	for i := range ins {
		ins[i] = s.newOrder()
		ins[i].SkipChargeReconcile = true
		runs[i] = s.start(order.PlaceOrder, "order-"+ins[i].OrderID, ins[i])
		s.pendingOf(runs[i].GetID(), 1)
	}
	a, b := `section.incident[data-workflow="`+runs[0].GetID()+`"]`, `section.incident[data-workflow="`+runs[1].GetID()+`"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console"), chromedp.WaitVisible(chromedp.CSS(a)), chromedp.WaitVisible(chromedp.CSS(b))); err != nil {
		t.Fatalf("the incidents never showed: %v", err)
	}
	fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
	if err != nil || !fits {
		t.Errorf("the console scrolls sideways at 1280 px (%v)", err)
	}
	charge := s.books(ins[0]).calls[0].ChargeID
	summary, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(a+` .evidence`)))
	if err != nil || !strings.Contains(summary, charge) || !strings.Contains(summary, "implies completed") || !strings.Contains(summary, "the gateway charged 19.99 USD") {
		t.Fatalf("the evidence shows %q (%v); want the gateway's charge %s of 19.99 USD", summary, err, charge)
	}

	// Retry without confirmation: refused, nothing charged again.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(a+` form.retry button`))); err != nil {
		t.Fatal(err)
	}
	if msg := s.message(ctx, "not sent: retry contradicts the evidence"); !strings.Contains(msg, charge) {
		t.Errorf("the refusal says %q", msg)
	}
	if bk := s.books(ins[0]); len(bk.calls) != 1 || bk.charges != 1 || len(s.pendingOf(runs[0].GetID(), 1).Pending) != 1 {
		t.Fatalf("after the refused retry: calls %+v; the incident must still wait", bk.calls)
	}

	// The pre-filled completed: the order completes with the gateway's charge.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(a+` form.completed button`))); err != nil {
		t.Fatal(err)
	}
	s.message(ctx, "applied: completed")
	res := s.result(runs[0])
	bk := s.books(ins[0])
	if res.Status != order.StatusCompleted || bk.charges != 1 || len(bk.payments) != 1 || bk.payments[0].GatewayChargeID != charge {
		t.Fatalf("result %+v; calls %+v; payments %+v; want completed with charge %s", res, bk.calls, bk.payments, charge)
	}

	// The order's page shows the decision's audit: who, the evidence shown.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console/workflows/"+runs[0].GetID()), chromedp.WaitVisible(chromedp.CSS(`#decisions`))); err != nil {
		t.Fatalf("the order's decisions never showed: %v", err)
	}
	audit, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#decisions`)))
	if err != nil || !strings.Contains(audit, "completed") || !strings.Contains(audit, "e2e-operator") || !strings.Contains(audit, charge) {
		t.Errorf("the order's decisions show %q (%v)", audit, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console")); err != nil {
		t.Fatal(err)
	}

	// Fail after a charge, confirmed with a reason: refunded.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(b)),
		chromedp.SendKeys(chromedp.CSS(b+` form.fail input[name="reason"]`), "customer cancelled by phone"),
		chromedp.Click(chromedp.CSS(b+` form.fail input[name="confirm"]`)),
		chromedp.Click(chromedp.CSS(b+` form.fail button`))); err != nil {
		t.Fatal(err)
	}
	s.message(ctx, "applied: fail")
	res = s.result(runs[1])
	kept, refunds := s.money(ins[1])
	if res.Status != order.StatusFailed || res.RefundedCents != ins[1].AmountCents || kept != 0 || len(refunds) != 1 {
		t.Fatalf("result %+v; kept %d; refunds %+v; want failed and refunded", res, kept, refunds)
	}
}
