// Package console is the operator console of cmd/worker: a page on -http
// (/console, html/template, no front-end build) listing the pending
// recoveries with buttons to decide each (completed with a result, retry,
// fail with a reason), the recent orders and the trail of one order.
//
// A decision goes to the workflow as the onceflow.resolve Update (the
// signal where the server takes no Updates), exactly as `worker resolve`
// sends it (operator.Resolve), and the page shows the workflow's answer. The console asks for
// a token (-console-token) unless the worker runs with -dev: open
// /console?token=… once, and an HttpOnly, SameSite=Strict cookie keeps it.
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

	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/cmd/internal/trail"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

//go:embed console.html
var page string

var tmpl = template.Must(template.New("console").Parse(page))

// csp is the pages' Content-Security-Policy: no script at all, the one
// inline <style> of console.html by its hash, forms only to the console
// itself, no framing.
var csp = "default-src 'none'; style-src '" + styleHash(page) + "'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

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
	Token string
	// Dev opens the console without a token (a -dev worker on loopback),
	// to requests for a loopback host name only.
	Dev bool
	// Logger receives one line per decision. Default: discard.
	Logger *slog.Logger
}

// Console serves /console.
type Console struct {
	cfg Config
}

// New validates cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Client == nil || cfg.Trail.Ledger == nil {
		return nil, errors.New("console: Config.Client and Config.Trail.Ledger are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Console{cfg: cfg}, nil
}

// Register adds the console's routes to mux.
func (c *Console) Register(mux *http.ServeMux) {
	mux.Handle("GET /console", c.guard(http.HandlerFunc(c.index)))
	mux.Handle("GET /console/orders/{id}", c.guard(http.HandlerFunc(c.order)))
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
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet {
			if !c.tokenOK(t) {
				http.Error(w, "wrong console token", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/console", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q := r.URL.Query()
			q.Del("token")
			http.Redirect(w, r, r.URL.Path+query(q), http.StatusSeeOther)
			return
		}
		if ck, err := r.Cookie(cookieName); err == nil && c.tokenOK(ck.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && c.tokenOK(t) {
			next.ServeHTTP(w, r)
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

// incident is one pending recovery as the page shows it.
type incident struct {
	WorkflowID, RunID, Activity, RecordKey, State, Reason, ResultType, Since string
	Attempt, Rev                                                             int64
	Checkpoint                                                               *activity.Checkpoint
}

type view struct {
	Index           bool
	Message         string
	Failed          bool
	TaskQueue       string
	Pending         []incident
	Orders          []ledger.Order
	OrderID, Trail  string
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
	c.renderIndex(w, r, http.StatusOK, message(r.URL.Query().Get("msg")), false)
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
	case "signalled":
		return "sent " + decision + " as a signal (this server takes no Updates): reload to see it applied"
	}
	return ""
}

// renderIndex answers the index page with status and a message of the
// console's own.
func (c *Console) renderIndex(w http.ResponseWriter, r *http.Request, status int, msg string, failed bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	v := view{Index: true, TaskQueue: c.cfg.TaskQueue, Message: msg, Failed: failed}
	waiting, err := operator.ListPending(ctx, c.cfg.Client, c.cfg.Namespace, c.cfg.TaskQueue, 200)
	if err != nil {
		v.fail("listing the pending recoveries failed: " + err.Error())
	}
	for _, wf := range waiting {
		for _, p := range wf.Pending {
			v.Pending = append(v.Pending, incident{
				WorkflowID: wf.WorkflowID, RunID: wf.RunID, Activity: p.Activity, RecordKey: p.Incident.RecordKey,
				Attempt: p.Incident.Attempt, Rev: p.Incident.Rev, State: p.Details.State, Reason: p.Details.Reason,
				ResultType: p.ResultType, Since: p.Since.UTC().Format(time.RFC3339), Checkpoint: p.Details.Checkpoint,
			})
		}
	}
	if v.Orders, err = c.cfg.Trail.Ledger.RecentOrders(ctx, 20); err != nil {
		v.fail("reading the ledger failed: " + err.Error())
	}
	render(w, status, v)
}

func (c *Console) order(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	id := r.PathValue("id")
	v := view{OrderID: id}
	t, err := trail.Build(ctx, c.cfg.Trail, trail.Query{OrderID: id})
	var buf bytes.Buffer
	if werr := trail.Write(&buf, t); werr != nil && err == nil {
		err = werr
	}
	v.Trail = buf.String()
	if err != nil {
		v.Message, v.Failed = err.Error(), true
	}
	render(w, http.StatusOK, v)
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

// resolve sends the decision. The workflow's acceptance redirects to
// the index with a message code (post/redirect/get); a refusal or an error
// is answered at once, with the index and what went wrong.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) { c.renderIndex(w, r, status, msg, true) }
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "the form did not parse: "+err.Error())
		return
	}
	f := r.PostForm
	res := idemwf.Resolution{RecordKey: f.Get("record"), Decision: idemwf.Decision(f.Get("decision")), Reason: strings.TrimSpace(f.Get("reason"))}
	var err error
	if res.Attempt, err = strconv.ParseInt(f.Get("attempt"), 10, 64); err == nil {
		res.Rev, err = strconv.ParseInt(f.Get("rev"), 10, 64)
	}
	if _, perr := idemstore.ParseRef(res.RecordKey); err != nil || perr != nil || f.Get("workflow_id") == "" {
		fail(http.StatusBadRequest, "the form does not name an incident: reload the page")
		return
	}
	switch res.Decision {
	case idemwf.Completed:
		result := strings.TrimSpace(f.Get("result"))
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
	if res.Reason == "" {
		res.Reason = "decided in the console"
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	wfID := f.Get("workflow_id")
	reply, err := operator.Resolve(ctx, c.cfg.Client, wfID, f.Get("run_id"), res)
	var refused *operator.DecisionRefusedError
	switch {
	case errors.As(err, &refused):
		c.cfg.Logger.Warn("onceflow console: decision refused", "workflow_id", wfID, "incident", res.Incident().String(), "why", refused.Message)
		fail(http.StatusConflict, "refused: "+refused.Message)
	case err != nil:
		c.cfg.Logger.Warn("onceflow console: sending a decision failed", "workflow_id", wfID, "incident", res.Incident().String(), "err", err)
		fail(http.StatusBadGateway, "sending the decision failed: "+err.Error())
	case reply.Signalled:
		c.cfg.Logger.Info("onceflow console: decision sent as a signal", "workflow_id", wfID, "incident", res.Incident().String(), "decision", res.Decision)
		back(w, r, "signalled-"+string(res.Decision))
	default:
		c.cfg.Logger.Info("onceflow console: decision applied", "workflow_id", wfID, "incident", reply.Applied.String(), "decision", reply.Decision)
		back(w, r, "applied-"+string(res.Decision))
	}
}

// back redirects to the console with a message code (post/redirect/get).
func back(w http.ResponseWriter, r *http.Request, code string) {
	http.Redirect(w, r, "/console?"+url.Values{"msg": {code}}.Encode(), http.StatusSeeOther)
}
