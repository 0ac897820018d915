package e2e_test

// The operator console in a real headless browser: Debian's chromium,
// driven by chromedp.

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/onceflow/onceflow/cmd/internal/console"
	"github.com/onceflow/onceflow/cmd/internal/trail"
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
// effect-unknown appears in the console; clicking "retry" in the browser
// resolves it, and the order completes with one charge.
func TestConsoleResolvesAPendingCharge(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	s := newShop(t, "sqlite:"+t.TempDir()+"/ledger.db", 0)
	const token = "console-e2e-token"
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
			Trail: trail.Sources{Store: r.Store, Client: r.Client, Ledger: s.l, Digester: r.Digester, Namespace: r.Namespace},
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
	row := `tr.incident[data-workflow="` + run.GetID() + `"]`
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
	if err := chromedp.Do(tctx, chromedp.Click(chromedp.CSS(row+` button[name="retry"]`)), chromedp.WaitVisible(chromedp.CSS(`#message`))); err != nil {
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

	// The order's trail page shows it completed, and a cross-origin post is
	// refused.
	if err := chromedp.Do(tctx, chromedp.Navigate(base+"/console/orders/"+in.OrderID)); err != nil {
		t.Fatal(err)
	}
	trailText, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(`#trail`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trailText, "COMPLETED") || !strings.Contains(trailText, "step charge") {
		t.Errorf("trail page: %q", trailText)
	}
	a := &api{shop: s, base: base}
	if r := a.do("POST", "/console/resolve", "decision=retry", "Authorization", "Bearer "+token,
		"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "cross-site"); r.status != 403 {
		t.Errorf("a cross-site post: %v", r)
	}
}
