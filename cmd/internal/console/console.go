// Package console is the operator console of cmd/worker: a page on -http
// (/console, html/template, no front-end build) listing the pending
// recoveries with buttons to decide each (completed with a result, retry,
// fail with a reason) and a link to each one's trail, the recent orders
// and the trail of one order or workflow: a timeline of its history, its
// decisions, and the raw trail collapsed.
//
// A decision goes to the workflow as the onceflow.decide Update (the
// onceflow.resolve signal where the server takes no Updates), exactly as `worker resolve`
// sends it (operator.Resolve), and the page shows the workflow's answer. The console asks for
// a token (-console-token, 32 bytes' worth at least: CheckToken) unless
// the worker runs with -dev: open /console?token=… once, and an HttpOnly,
// SameSite=Strict cookie keeps it. Wrong tokens are limited per client
// address (FailedTokenBurst at once, then one every FailedTokenInterval;
// beyond, 429 with Retry-After).
// Form posts are refused cross-origin (http.CrossOriginProtection). Under
// -dev it answers only requests for a loopback host name (localhost,
// 127.0.0.1, [::1]): a page whose own name was rebound to 127.0.0.1 (DNS
// rebinding) is same-origin to the browser, so the Host header is what
// tells it apart. Every answer carries a Content-Security-Policy that
// allows no script, and the page shows only messages of its own (a
// fixed set of codes in ?msg=), never text from the address.
package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/cmd/internal/trail"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

//go:embed console.html
var pageHTML string

var tmpl = template.Must(template.New("console").Parse(pageHTML))

// csp is the pages' Content-Security-Policy: no script at all, the one
// inline <style> of console.html by its hash, forms only to the console
// itself, no framing.
var csp = "default-src 'none'; style-src '" + styleHash(pageHTML) + "'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// styleHash is the CSP source of the text of page's <style> element (it
// holds no template action, so the page shows it as it is).
func styleHash(page string) string {
	_, rest, ok := strings.Cut(page, "<style>")
	style, _, ok2 := strings.Cut(rest, "</style>")
	if !ok || !ok2 {
		panic("console: console.html has no <style> element")
	}
	sum := sha256.Sum256([]byte(style))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// cookieName holds the console token in the browser.
const cookieName = "onceflow_console"

// Config configures the console.
type Config struct {
	// Client talks to Temporal. Required.
	Client client.Client
	// Namespace and TaskQueue are where the waiting workflows are listed.
	Namespace, TaskQueue string
	// Trail reads an order's trail (its Client and Ledger are also the
	// console's). Required.
	Trail trail.Sources
	// Token guards the console. Empty: the console is off, unless Dev.
	// Otherwise it must pass CheckToken (at least 32 bytes' worth:
	// `openssl rand -hex 32`). Failed attempts are limited per client
	// address (FailedTokenBurst, FailedTokenInterval).
	Token string
	// Dev opens the console without a token (a -dev worker on loopback),
	// to requests for a loopback host name only.
	Dev bool
	// Logger receives one line per decision. Default: discard.
	Logger *slog.Logger
	// Evidence supplies what the downstream says about each pending step,
	// shown beside its decision forms and sent with the decision. Default:
	// order.ChargeEvidence on Trail.Ledger (the order system's charge).
	Evidence operator.EvidenceSource
	// Principal names who decides, for the decisions' audit (for example
	// from an authenticating proxy's header). Default (nil, or an empty
	// answer): "console".
	Principal func(*http.Request) string
}

// Console serves /console.
type Console struct {
	cfg      Config
	failures *failures
	now      func() time.Time // the limit's clock
}

// New validates cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Client == nil || cfg.Trail.Ledger == nil {
		return nil, errors.New("console: Config.Client and Config.Trail.Ledger are required")
	}
	if cfg.Token != "" {
		if err := CheckToken(cfg.Token); err != nil {
			return nil, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Evidence == nil {
		cfg.Evidence = order.ChargeEvidence{Ledger: cfg.Trail.Ledger}
	}
	return &Console{cfg: cfg, failures: newFailures(), now: time.Now}, nil
}

// Register adds the console's routes to mux.
func (c *Console) Register(mux *http.ServeMux) {
	mux.Handle("GET /console", c.guard(http.HandlerFunc(c.index)))
	mux.Handle("GET /console/orders/{id}", c.guard(http.HandlerFunc(c.order)))
	mux.Handle("GET /console/workflows/{id}", c.guard(http.HandlerFunc(c.workflow)))
	mux.Handle("POST /console/resolve", http.NewCrossOriginProtection().Handler(c.guard(http.HandlerFunc(c.resolve))))
}

// guard lets a request through with the token (cookie or bearer), or
// under -dev for a loopback host name; ?token= on a GET sets the cookie
// and drops the token from the address.
func (c *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", csp)
		h.Set("Referrer-Policy", "no-referrer")
		if c.cfg.Dev && !loopbackHost(r.Host) {
			http.Error(w, "under -dev the console answers only at localhost, 127.0.0.1 or [::1]", http.StatusMisdirectedRequest)
			return
		}
		if c.cfg.Token == "" {
			if c.cfg.Dev {
				next.ServeHTTP(w, r)
				return
			}
			http.Error(w, "the console is off: start the worker with -console-token (ONCEFLOW_CONSOLE_TOKEN)", http.StatusNotFound)
			return
		}
		// A client over its limit of failed attempts gets no comparison at
		// all, not even of the right token: else the limit would only
		// hide which guess was right.
		client, now := clientKey(r.RemoteAddr), c.now()
		if wait := c.failures.wait(client, now); wait > 0 {
			h.Set("Retry-After", retryAfter(wait))
			http.Error(w, fmt.Sprintf("too many wrong console tokens from your address: try again in %s seconds", retryAfter(wait)), http.StatusTooManyRequests)
			return
		}
		failed := func() {
			if c.failures.fail(client, now) {
				c.cfg.Logger.Warn("onceflow console: wrong tokens from one address; its next attempts are refused for a while", "client", client,
					"burst", FailedTokenBurst, "interval", FailedTokenInterval)
			}
			http.Error(w, "wrong console token", http.StatusUnauthorized)
		}
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet {
			if !c.tokenOK(t) {
				failed()
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/console", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q := r.URL.Query()
			q.Del("token")
			http.Redirect(w, r, r.URL.Path+query(q), http.StatusSeeOther)
			return
		}
		presented := false
		if ck, err := r.Cookie(cookieName); err == nil {
			if c.tokenOK(ck.Value) {
				next.ServeHTTP(w, r)
				return
			}
			presented = true
		}
		if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if c.tokenOK(t) {
				next.ServeHTTP(w, r)
				return
			}
			presented = true
		}
		if presented {
			failed()
			return
		}
		http.Error(w, "open /console?token=<the -console-token> once to sign in", http.StatusUnauthorized)
	})
}

// loopbackHost: host (a Host header, with or without a port) is
// localhost, 127.0.0.1 or [::1].
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.EqualFold(host, "localhost") || host == "127.0.0.1" || host == "::1"
}

func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func (c *Console) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(c.cfg.Token)) == 1
}

// incident is one pending recovery as the page shows it, with the
// evidence for it and the decision forms' values.
type incident struct {
	WorkflowID, RunID, Activity, RecordKey, State, Reason, ResultType, Since string
	Attempt, Rev                                                             int64
	Checkpoint                                                               *onceflow.Checkpoint
	// Evidence is what the downstream says (Config.Evidence), or nil;
	// EvidenceError why it could not be read.
	Evidence      *idemwf.Evidence
	EvidenceError string
	// RequestID is the decision request's ID, one per page drawn: a
	// double click or a resubmitted form applies once.
	RequestID string
	// Form is what the operator typed, kept when the decision failed.
	Form form
	// Page is the trail page that shows the incident ("" on the index):
	// where a decision returns to.
	Page page
}

// TrailPath is the path of the trail page of the incident's workflow
// (which names its order), the index's link from each incident.
func (i incident) TrailPath() string { return page{kind: "workflows", id: i.WorkflowID}.path() }

// ReasonFor is the reason typed in decision d's form, when it failed.
func (i incident) ReasonFor(d string) string {
	if i.Form.Decision == d {
		return i.Form.Reason
	}
	return ""
}

// ConfirmFor says whether decision d's form was confirmed, when it failed.
func (i incident) ConfirmFor(d string) bool { return i.Form.Decision == d && i.Form.Confirm }

// form is a decision form's input.
type form struct {
	Decision, Result, Reason string
	Confirm                  bool
}

// key names an incident in the page.
func (i incident) key() string {
	return fmt.Sprintf("%s|%s|%d|%d", i.WorkflowID, i.RecordKey, i.Attempt, i.Rev)
}

// ResultValue is the completed form's value: what the operator typed, else
// the result the evidence implies.
func (i incident) ResultValue() string {
	if i.Form.Decision == string(idemwf.Completed) {
		return i.Form.Result
	}
	if i.Evidence != nil && i.Evidence.Implies == idemwf.Completed {
		return string(i.Evidence.Result)
	}
	return ""
}

// Implies is the decision the evidence implies, or "".
func (i incident) Implies() string {
	if i.Evidence == nil {
		return ""
	}
	return string(i.Evidence.Implies)
}

// page names a trail page: an order's (kind "orders") or a workflow's
// ("workflows"); the zero page is the index.
type page struct{ kind, id string }

// parsePage reads a page from a form's "page" field ("orders/ID" or
// "workflows/ID"); anything else is the index.
func parsePage(v string) page {
	kind, id, _ := strings.Cut(v, "/")
	if (kind != "orders" && kind != "workflows") || id == "" {
		return page{}
	}
	return page{kind: kind, id: id}
}

// String is the page as a form carries it.
func (p page) String() string {
	if p.kind == "" {
		return ""
	}
	return p.kind + "/" + p.id
}

// path is the page's address.
func (p page) path() string {
	if p.kind == "" {
		return "/console"
	}
	return "/console/" + p.kind + "/" + url.PathEscape(p.id)
}

type view struct {
	Index      bool
	Message    string
	Failed     bool
	TaskQueue  string
	Pending    []incident
	Orders     []ledger.Order
	OrderID    string
	WorkflowID string
	// Self is the page's own address (its refresh link).
	Self            string
	Trail           string
	Timeline        []trail.Event
	TimelineError   string
	Decisions       []idemwf.Decided
	DecisionsError  string
	ListPendingFail string
}

// fail adds a failure to v's message.
func (v *view) fail(msg string) {
	if v.Message != "" {
		msg = v.Message + "; " + msg
	}
	v.Message, v.Failed = msg, true
}

func (c *Console) index(w http.ResponseWriter, r *http.Request) {
	c.renderIndex(w, r, http.StatusOK, message(r.URL.Query().Get("msg")), false, nil)
}

// message is the text of a ?msg= code that resolve redirects with:
// "applied-" or "signalled-" and the decision; "" for any other.
func message(code string) string {
	kind, decision, _ := strings.Cut(code, "-")
	switch idemwf.Decision(decision) {
	case idemwf.Completed, idemwf.Retry, idemwf.Fail:
	default:
		return ""
	}
	switch kind {
	case "applied":
		return "applied: " + decision + " (the workflow took the decision)"
	case "repeated":
		return "applied: " + decision + " (already, by this request: nothing applied again)"
	case "signalled":
		return "sent " + decision + " as a signal (this server takes no Updates): reload to see it applied"
	}
	return ""
}

// pending reads the incidents of the waiting workflows (of one workflow
// when wfID is not empty) with their evidence; posted, when not nil, is
// the failed form to show again in its incident.
func (c *Console) pending(ctx context.Context, v *view, wfID string, pg page, posted *incident) {
	var waiting []operator.Waiting
	if wfID == "" {
		var err error
		if waiting, err = operator.ListPending(ctx, c.cfg.Client, c.cfg.Namespace, c.cfg.TaskQueue, 200); err != nil {
			v.fail("listing the pending recoveries failed: " + err.Error())
		}
	} else {
		p, err := operator.PendingRecoveries(ctx, c.cfg.Client, wfID, "")
		if err != nil && !errors.Is(err, operator.ErrNotOnceflow) {
			v.fail("asking the workflow what it waits on failed: " + err.Error())
		}
		if len(p) > 0 {
			waiting = []operator.Waiting{{WorkflowID: wfID, Pending: p}}
		}
	}
	assessed, _ := operator.Assess(ctx, c.cfg.Evidence, waiting) // a failure is in its step's EvidenceError
	for _, a := range assessed {
		p := a.Pending
		in := incident{
			WorkflowID: a.WorkflowID, RunID: a.RunID, Activity: p.Activity, RecordKey: p.Incident.RecordKey,
			Attempt: p.Incident.Attempt, Rev: p.Incident.Rev, State: p.Details.State, Reason: p.Details.Reason,
			ResultType: p.ResultType, Since: p.Since.UTC().Format(time.RFC3339), Checkpoint: p.Details.Checkpoint,
			Evidence: a.Evidence, EvidenceError: a.EvidenceError, RequestID: operator.NewRequestID(), Page: pg,
		}
		if posted != nil && posted.key() == in.key() {
			in.Form = posted.Form
			if posted.RequestID != "" {
				in.RequestID = posted.RequestID
			}
		}
		v.Pending = append(v.Pending, in)
	}
}

// renderIndex answers the index page with status and a message of the
// console's own; posted is the failed form to show again, or nil.
func (c *Console) renderIndex(w http.ResponseWriter, r *http.Request, status int, msg string, failed bool, posted *incident) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	v := view{Index: true, Self: "/console", TaskQueue: c.cfg.TaskQueue, Message: msg, Failed: failed}
	c.pending(ctx, &v, "", page{}, posted)
	orders, err := c.cfg.Trail.Ledger.RecentOrders(ctx, 20)
	if err != nil {
		v.fail("reading the ledger failed: " + err.Error())
	}
	// Only orders whose workflow the Temporal server knows: after a -dev
	// reset the ledger may hold orders of workflows that no longer exist.
	for _, o := range orders {
		if o.WorkflowID == "" {
			continue
		}
		_, err := c.cfg.Client.DescribeWorkflowExecution(ctx, o.WorkflowID, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			continue
		case err != nil:
			v.fail("asking Temporal about the workflow " + o.WorkflowID + " failed: " + err.Error())
			continue
		}
		v.Orders = append(v.Orders, o)
	}
	render(w, status, v)
}

func (c *Console) order(w http.ResponseWriter, r *http.Request) {
	c.renderTrail(w, r, page{kind: "orders", id: r.PathValue("id")}, http.StatusOK, message(r.URL.Query().Get("msg")), false, nil)
}

func (c *Console) workflow(w http.ResponseWriter, r *http.Request) {
	c.renderTrail(w, r, page{kind: "workflows", id: r.PathValue("id")}, http.StatusOK, message(r.URL.Query().Get("msg")), false, nil)
}

// renderTrail answers a trail page (an order's or a workflow's): its
// timeline, the decisions, the raw trail, and the decision forms of the
// incidents its workflow waits on. An order the ledger does not know, or
// a workflow Temporal does not, is a 404.
func (c *Console) renderTrail(w http.ResponseWriter, r *http.Request, pg page, status int, msg string, failed bool, posted *incident) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	v := view{Self: pg.path(), Message: msg, Failed: failed}
	q := trail.Query{WorkflowID: pg.id}
	if pg.kind == "orders" {
		v.OrderID, q = pg.id, trail.Query{OrderID: pg.id}
		_, ok, err := c.cfg.Trail.Ledger.Order(ctx, pg.id)
		switch {
		case err != nil:
			v.fail("reading the ledger failed: " + err.Error())
			render(w, http.StatusInternalServerError, v)
			return
		case !ok:
			v.fail("no order " + pg.id + " in the ledger")
			render(w, http.StatusNotFound, v)
			return
		}
	}
	t, err := trail.Build(ctx, c.cfg.Trail, q)
	if pg.kind == "workflows" && t.Status == "NOT_FOUND" {
		v.WorkflowID = pg.id
		v.fail("no workflow " + pg.id + " in the namespace " + c.cfg.Namespace)
		render(w, http.StatusNotFound, v)
		return
	}
	var buf bytes.Buffer
	if werr := trail.Write(&buf, t, c.cfg.Dev); werr != nil && err == nil {
		err = werr
	}
	v.OrderID, v.WorkflowID = t.OrderID, t.WorkflowID
	v.Trail, v.Decisions, v.DecisionsError = buf.String(), t.Decisions, t.DecisionsError
	v.Timeline, v.TimelineError = t.Timeline, t.TimelineError
	if err != nil {
		v.fail(err.Error())
	}
	if t.Status == "RUNNING" {
		c.pending(ctx, &v, t.WorkflowID, pg, posted)
	}
	render(w, status, v)
}

func render(w http.ResponseWriter, status int, v view) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, "index", v); err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// resolve sends the decision, with the evidence the console reads again
// for it (so what is sent is what the downstream says now), the form's
// request ID, and the console's principal. The workflow's acceptance
// redirects to the page the form was on with a message code
// (post/redirect/get); a refusal or an error is answered at once, with
// that page, what went wrong and the form as it was typed.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	var posted incident
	var from page
	fail := func(status int, msg string) {
		if from.kind != "" {
			c.renderTrail(w, r, from, status, msg, true, &posted)
			return
		}
		c.renderIndex(w, r, status, msg, true, &posted)
	}
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "the form did not parse: "+err.Error())
		return
	}
	f := r.PostForm
	from = parsePage(f.Get("page"))
	posted = incident{WorkflowID: f.Get("workflow_id"), RunID: f.Get("run_id"), RecordKey: f.Get("record"), Activity: f.Get("activity"),
		RequestID: f.Get("request_id"), Form: form{Decision: f.Get("decision"), Result: f.Get("result"), Reason: f.Get("reason"), Confirm: f.Get("confirm") != ""}}
	res := idemwf.Resolution{RecordKey: posted.RecordKey, Decision: idemwf.Decision(posted.Form.Decision), Reason: strings.TrimSpace(posted.Form.Reason),
		RequestID: posted.RequestID, By: c.principal(r), RequestedAt: time.Now().UTC(), Confirmed: posted.Form.Confirm}
	var err error
	if res.Attempt, err = strconv.ParseInt(f.Get("attempt"), 10, 64); err == nil {
		res.Rev, err = strconv.ParseInt(f.Get("rev"), 10, 64)
	}
	posted.Attempt, posted.Rev = res.Attempt, res.Rev
	if _, perr := onceflow.ParseRef(res.RecordKey); err != nil || perr != nil || posted.WorkflowID == "" {
		fail(http.StatusBadRequest, "the form does not name an incident: reload the page")
		return
	}
	if res.RequestID == "" {
		res.RequestID = operator.NewRequestID()
		posted.RequestID = res.RequestID
	}
	switch res.Decision {
	case idemwf.Completed:
		result := strings.TrimSpace(posted.Form.Result)
		if result == "" || !json.Valid([]byte(result)) {
			fail(http.StatusBadRequest, "completed needs the activity's result as valid JSON")
			return
		}
		res.Result = json.RawMessage(result)
	case idemwf.Retry:
	case idemwf.Fail:
		if res.Reason == "" {
			fail(http.StatusBadRequest, "fail needs a reason")
			return
		}
	default:
		fail(http.StatusBadRequest, fmt.Sprintf("unknown decision %q", res.Decision))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if c.cfg.Evidence != nil {
		step := operator.Step{WorkflowID: posted.WorkflowID, RunID: posted.RunID, Pending: idemwf.PendingRecovery{
			Incident: res.Incident(), RecordKey: res.RecordKey, Activity: posted.Activity}}
		ev, err := c.cfg.Evidence.Evidence(ctx, step)
		switch {
		case errors.Is(err, operator.ErrNoEvidence):
		case err != nil:
			fail(http.StatusBadGateway, "reading the evidence failed, so the decision was not sent: "+err.Error())
			return
		default:
			res.Evidence = &ev
		}
	}
	if res.Reason == "" {
		res.Reason = "decided in the console"
		if res.Confirmed {
			fail(http.StatusBadRequest, "a decision confirmed against the evidence needs a reason")
			return
		}
	}
	wfID := posted.WorkflowID
	reply, err := operator.Resolve(ctx, c.cfg.Client, wfID, posted.RunID, res)
	var refused *operator.DecisionRefusedError
	var contradiction *operator.ContradictionError
	switch {
	case errors.As(err, &contradiction):
		fail(http.StatusConflict, fmt.Sprintf("not sent: %s contradicts the evidence, which implies %s (%s); tick \"confirm against the evidence\" and give a reason to send it anyway",
			res.Decision, contradiction.Evidence.Implies, contradiction.Evidence.Summary))
	case errors.As(err, &refused):
		posted.RequestID = "" // the form's next send is another request
		c.cfg.Logger.Warn("onceflow console: decision refused", "workflow_id", wfID, "incident", res.Incident().String(), "why", refused.Message)
		fail(http.StatusConflict, "refused: "+refused.Message)
	case err != nil:
		c.cfg.Logger.Warn("onceflow console: sending a decision failed", "workflow_id", wfID, "incident", res.Incident().String(), "err", err)
		fail(http.StatusBadGateway, "sending the decision failed: "+err.Error())
	case reply.Signalled:
		c.cfg.Logger.Info("onceflow console: decision sent as a signal", "workflow_id", wfID, "incident", res.Incident().String(), "decision", res.Decision, "request", res.RequestID)
		back(w, r, from, "signalled-"+string(res.Decision))
	default:
		code := "applied-"
		if reply.Repeated {
			code = "repeated-"
		}
		c.cfg.Logger.Info("onceflow console: decision applied", "workflow_id", wfID, "incident", reply.Applied.String(), "decision", reply.Decision,
			"request", res.RequestID, "by", res.By, "repeated", reply.Repeated)
		back(w, r, from, code+string(reply.Decision))
	}
}

// principal names who decides through the console, for the audit:
// Config.Principal's answer, else "console".
func (c *Console) principal(r *http.Request) string {
	if c.cfg.Principal != nil {
		if p := c.cfg.Principal(r); p != "" {
			return p
		}
	}
	return "console"
}

// back redirects to the page the form was on (the index, or a trail
// page), with a message code (post/redirect/get).
func back(w http.ResponseWriter, r *http.Request, from page, code string) {
	http.Redirect(w, r, from.path()+"?"+url.Values{"msg": {code}}.Encode(), http.StatusSeeOther)
}
