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
	"slices"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/clientaddr"
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

// Defaults of Config, which withDefaults applies.
const (
	defaultPath      = "/console"
	defaultRecent    = 20
	defaultNamespace = "default"
)

// Config configures the console. Client is required; every other field
// has a default.
type Config struct {
	// Client talks to Temporal. Required.
	Client client.Client
	// Namespace is the Temporal namespace of the workflows (the one Client
	// was dialled with). Default: "default".
	Namespace string
	// TaskQueue is whose workflows the index lists: those that wait on a
	// decision and the recent ones. Default (empty): every task queue of
	// the namespace.
	TaskQueue string
	// Path is where the console is mounted: its pages are Path and
	// Path/workflows/{id}, and its forms post to Path/resolve. It starts
	// with "/" and does not end with one. Default: "/console".
	Path string
	// Token guards the console. Empty: the console is off, unless Dev.
	// Otherwise it must pass CheckToken (at least 32 bytes' worth:
	// `openssl rand -hex 32`). Failed attempts are limited per client
	// address: 10 at once, then one every 6s.
	Token string
	// Dev opens the console without a token (a development worker on
	// loopback), to requests for a loopback host name only.
	Dev bool
	// Logger receives one line per decision. Default: discard.
	Logger *slog.Logger
	// Evidence supplies what the downstream says about each pending step,
	// shown beside its decision forms and sent with the decision; when it
	// implements FactSource too, what the service holds about each
	// workflow. Default: none; the decisions rest on the history alone.
	Evidence operator.EvidenceSource
	// Principal names who decides, for the decisions' audit (for example
	// from an authenticating proxy's header). Default (nil, or an empty
	// answer): "console".
	Principal func(*http.Request) string
	// Recent is how many recent workflows the index lists. Default: 20.
	Recent int
}

// withDefaults fills in cfg's defaults and validates it.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Client == nil {
		return cfg, errors.New("console: Config.Client is required: the Temporal client the workflows are read and decided through")
	}
	if cfg.Token != "" {
		if err := CheckToken(cfg.Token); err != nil {
			return cfg, err
		}
	}
	if cfg.Namespace == "" {
		cfg.Namespace = defaultNamespace
	}
	if cfg.Path == "" {
		cfg.Path = defaultPath
	}
	if !strings.HasPrefix(cfg.Path, "/") || strings.HasSuffix(cfg.Path, "/") || strings.ContainsAny(cfg.Path, "{}?# ") {
		return cfg, fmt.Errorf("console: Config.Path %q must start with / and not end with one, such as /console", cfg.Path)
	}
	if cfg.Recent <= 0 {
		cfg.Recent = defaultRecent
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// FactSource is what a service holds about the business object a workflow
// acts on (the order example's order and its ledger rows). A
// Config.Evidence that implements it adds the Facts to the workflow's
// page and their Summary to the index. It answers operator.ErrNoEvidence
// for a workflow it knows nothing about; it must not change anything.
type FactSource interface {
	Facts(ctx context.Context, w Workflow) (Facts, error)
}

// Workflow names the workflow a FactSource is asked about.
type Workflow struct {
	ID, RunID, Type string
}

// Facts are what a service holds about one workflow's business object.
type Facts struct {
	// Title heads the facts on the workflow's page ("Order 01a2…").
	Title string
	// Summary is one line for the index ("completed, 19.99 USD").
	Summary string
	// Rows are the facts, one a row: a label and a value.
	Rows []Fact
}

// Fact is one row of Facts.
type Fact struct {
	Label, Value string
}

// Console is the operator console: an http.Handler for the requests under
// Config.Path.
type Console struct {
	cfg      Config
	mux      *http.ServeMux
	failures *failures
	now      func() time.Time // the limit's clock
}

// New fills in cfg's defaults and validates it.
func New(cfg Config) (*Console, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, mux: http.NewServeMux(), failures: newFailures(), now: time.Now}
	c.routes(c.mux)
	return c, nil
}

// Register adds the console's routes (Config.Path and below) to mux.
func (c *Console) Register(mux *http.ServeMux) {
	mux.Handle(c.cfg.Path, c)
	mux.Handle(c.cfg.Path+"/", c)
}

// ServeHTTP serves the console's pages and forms.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes(mux *http.ServeMux) {
	p := c.cfg.Path
	mux.Handle("GET "+p, c.guard(http.HandlerFunc(c.index)))
	mux.Handle("GET "+p+"/workflows/{id}", c.guard(http.HandlerFunc(c.workflow)))
	mux.Handle("POST "+p+"/resolve", http.NewCrossOriginProtection().Handler(c.guard(http.HandlerFunc(c.resolve))))
	mux.Handle("POST "+p+"/ask", http.NewCrossOriginProtection().Handler(c.guard(http.HandlerFunc(c.ask))))
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
			http.Error(w, "the console is off: give it a token (the worker's -console-token, ONCEFLOW_CONSOLE_TOKEN)", http.StatusNotFound)
			return
		}
		// A client over its limit of failed attempts gets no comparison at
		// all, not even of the right token: else the limit would only
		// hide which guess was right.
		client, now := clientaddr.Of(r.RemoteAddr), c.now()
		if wait := c.failures.wait(client, now); wait > 0 {
			h.Set("Retry-After", retryAfter(wait))
			http.Error(w, fmt.Sprintf("too many wrong console tokens from your address: try again in %s seconds", retryAfter(wait)), http.StatusTooManyRequests)
			return
		}
		failed := func() {
			if c.failures.fail(client, now) {
				c.cfg.Logger.Warn("onceflow console: wrong tokens from one address; its next attempts are refused for a while", "client", client,
					"burst", failedTokenBurst, "interval", failedTokenInterval)
			}
			http.Error(w, "wrong console token", http.StatusUnauthorized)
		}
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet {
			if !c.tokenOK(t) {
				failed()
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: c.cfg.Path, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
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
		http.Error(w, "open "+c.cfg.Path+"?token=<the console token> once to sign in", http.StatusUnauthorized)
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
	// Base is the console's Config.Path.
	Base                                                                     string
	WorkflowID, RunID, Activity, RecordKey, State, Reason, ResultType, Since string
	Attempt, Rev                                                             int64
	Checkpoint                                                               *onceflow.Checkpoint
	// NoResult: the activity returns only an error, so the completed form
	// asks for no result (and sends none).
	NoResult bool
	// DownstreamKey is the reference the downstream knows the operation by
	// (the activity's DownstreamKey option), "" when it declares none.
	DownstreamKey string
	// Retention is the time left in the downstream's retention of the
	// operation's key ("23h59m0s left", "expired 1h0m0s ago"), "" when the
	// activity declares none; RetentionExpired says a retry needs an
	// override reason (the retry form asks for it).
	Retention        string
	RetentionExpired bool
	// Evidence is what the downstream says (Config.Evidence, or the
	// activity's own Reconcile when last asked), or nil; EvidenceError why
	// it could not be read.
	Evidence      *idemwf.Evidence
	EvidenceError string
	// Reconcile: the activity declares a Reconcile, which the page's ask
	// button asks now (operator.AskDownstream).
	Reconcile bool
	// ActionError is what the action returned when its effect became
	// unknown: the downstream's own words; nil when it returned nothing.
	ActionError *idemwf.ActionError
	// RequestID is the decision request's ID, one per page drawn: a
	// double click or a resubmitted form applies once.
	RequestID string
	// Form is what the operator typed, kept when the decision failed.
	Form form
	// Page is the page that shows the incident (the index, or its
	// workflow's): where a decision returns to.
	Page page
}

// ReasonFor is the reason typed in decision d's form, when it failed.
func (i incident) ReasonFor(d string) string {
	if i.Form.Decision == d {
		return i.Form.Reason
	}
	return ""
}

// OverrideFor is the override reason typed in the retry form, when it
// failed.
func (i incident) OverrideFor() string {
	if i.Form.Decision == string(idemwf.Retry) {
		return i.Form.OverrideRetention
	}
	return ""
}

// retention is an incident's RETENTION LEFT, as worker pending shows it:
// the time left at now, or how long ago it expired; "" without one.
func retention(p idemwf.PendingRecovery, now time.Time) (text string, expired bool) {
	ends := p.RetentionEnds
	switch {
	case ends.IsZero() && p.RetentionPassed:
		return "expired", true
	case ends.IsZero():
		return "", false
	case !now.Before(ends):
		return "expired " + now.Sub(ends).Truncate(time.Second).String() + " ago", true
	}
	return ends.Sub(now).Truncate(time.Second).String() + " left", false
}

// ConfirmFor says whether decision d's form was confirmed, when it failed.
func (i incident) ConfirmFor(d string) bool { return i.Form.Decision == d && i.Form.Confirm }

// TrailPath is the address of the incident's workflow's page: the index's
// link from each incident to its trail (and the business object the
// service's facts name).
func (i incident) TrailPath() string { return page{id: i.WorkflowID}.path(i.Base) }

// OnIndex says the incident is shown on the index.
func (i incident) OnIndex() bool { return i.Page.id == "" }

// form is a decision form's input.
type form struct {
	Decision, Result, Reason string
	Confirm                  bool
	// OverrideRetention is the retry's reason to go past the downstream's
	// retention (Resolution.OverrideRetention).
	OverrideRetention string
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

// ResultTypeName is the Go type the completed form's result decodes into
// (transfer.Confirmation), "" when the workflow does not know it (any
// JSON is then taken).
func (i incident) ResultTypeName() string {
	if i.ResultType == "JSON" {
		return ""
	}
	return i.ResultType
}

// Prefilled says the completed form's value is the evidence's result, not
// what the operator typed.
func (i incident) Prefilled() bool {
	return i.Form.Decision != string(idemwf.Completed) && i.Evidence != nil && i.Evidence.Implies == idemwf.Completed && len(i.Evidence.Result) > 0
}

// Implies is the decision the evidence implies, or "".
func (i incident) Implies() string {
	if i.Evidence == nil {
		return ""
	}
	return string(i.Evidence.Implies)
}

// page names a page of the console: a workflow's (id), or the index (the
// zero page).
type page struct{ id string }

// parsePage reads a page from a form's "page" field ("workflows/ID");
// anything else is the index.
func parsePage(v string) page {
	id, ok := strings.CutPrefix(v, "workflows/")
	if !ok || id == "" {
		return page{}
	}
	return page{id: id}
}

// String is the page as a form carries it.
func (p page) String() string {
	if p.id == "" {
		return ""
	}
	return "workflows/" + p.id
}

// path is the page's address under the console's path base.
func (p page) path(base string) string {
	if p.id == "" {
		return base
	}
	return base + "/workflows/" + url.PathEscape(p.id)
}

// recent is one row of the index's recent workflows.
type recent struct {
	ID, RunID, Type, Status string
	Started                 time.Time
	// Path is the workflow's page.
	Path string
	// Summary is the FactSource's one line about it.
	Summary string
}

// view is what a page shows.
type view struct {
	Base    string
	Index   bool
	Self    string
	Message string
	Failed  bool
	// TaskQueue is the task queue listed, "" for every one.
	TaskQueue string
	Pending   []incident
	Recent    []recent

	// A workflow's page.
	WorkflowID, RunID, Type, Status string
	Facts                           *Facts
	FactsError                      string
	Input                           []string
	Timeline                        []operator.Event
	TimelineError                   string
	Truncated                       bool
	Decisions                       []idemwf.Decided
	DecisionsError                  string
	Raw                             string
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
// "applied-", "repeated-" or "signalled-" and the decision, or "asked"
// (ask); "" for any other.
func message(code string) string {
	if code == "asked" {
		return "asked the downstream: its answer is the incident's evidence below"
	}
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
		return "already applied by this request: " + decision + "; nothing changed"
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
	// The service's own source first; else what the activity's own
	// Reconcile said when last asked (the ask button).
	assessed, _ := operator.Assess(ctx, operator.FirstEvidence(c.cfg.Evidence, operator.AskedEvidence), waiting) // a failure is in its step's EvidenceError
	for _, a := range assessed {
		p := a.Pending
		in := incident{
			Base: c.cfg.Path, WorkflowID: a.WorkflowID, RunID: a.RunID, Activity: p.Activity, RecordKey: p.Incident.RecordKey,
			Attempt: p.Incident.Attempt, Rev: p.Incident.Rev, State: p.Details.State, Reason: p.Details.Reason,
			ResultType: p.ResultType, NoResult: p.NoResult, Since: p.Since.UTC().Format(time.RFC3339), Checkpoint: p.Details.Checkpoint, DownstreamKey: p.Details.DownstreamKey,
			Evidence: a.Evidence, EvidenceError: a.EvidenceError, RequestID: operator.NewRequestID(), Page: pg,
			Reconcile: p.Reconcile, ActionError: p.ActionError,
		}
		in.Retention, in.RetentionExpired = retention(p, c.now())
		if posted != nil && posted.key() == in.key() {
			in.Form = posted.Form
			if posted.RequestID != "" {
				in.RequestID = posted.RequestID
			}
		}
		v.Pending = append(v.Pending, in)
	}
}

// recentQuery is the visibility query of the workflows the index lists.
func (c *Console) recentQuery() string {
	if c.cfg.TaskQueue == "" {
		return ""
	}
	return fmt.Sprintf("TaskQueue = '%s'", strings.ReplaceAll(c.cfg.TaskQueue, "'", "''"))
}

// recent lists the task queue's recent workflows, each with its facts'
// summary when the evidence source has facts.
func (c *Console) recent(ctx context.Context, v *view) {
	resp, err := c.cfg.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: c.cfg.Namespace, PageSize: int32(c.cfg.Recent), Query: c.recentQuery()})
	if err != nil {
		v.fail("listing the recent workflows failed: " + err.Error())
		return
	}
	facts, _ := c.cfg.Evidence.(FactSource)
	for i, e := range resp.GetExecutions() {
		if i == c.cfg.Recent {
			break
		}
		rw := recent{ID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), Type: e.GetType().GetName(),
			Status: operator.Status(e.GetStatus()), Started: e.GetStartTime().AsTime()}
		rw.Path = page{id: rw.ID}.path(c.cfg.Path)
		if facts != nil {
			f, err := facts.Facts(ctx, Workflow{ID: rw.ID, RunID: rw.RunID, Type: rw.Type})
			switch {
			case errors.Is(err, operator.ErrNoEvidence):
			case err != nil:
				rw.Summary = "the service's facts could not be read: " + err.Error()
			default:
				rw.Summary = strings.TrimSpace(f.Title + ": " + f.Summary)
			}
		}
		v.Recent = append(v.Recent, rw)
	}
}

// renderIndex answers the index page with status and a message of the
// console's own; posted is the failed form to show again, or nil.
func (c *Console) renderIndex(w http.ResponseWriter, r *http.Request, code int, msg string, failed bool, posted *incident) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	v := view{Base: c.cfg.Path, Index: true, Self: c.cfg.Path, TaskQueue: c.cfg.TaskQueue, Message: msg, Failed: failed}
	c.pending(ctx, &v, "", page{}, posted)
	c.recent(ctx, &v)
	render(w, code, v)
}

func (c *Console) workflow(w http.ResponseWriter, r *http.Request) {
	c.renderWorkflow(w, r, page{id: r.PathValue("id")}, http.StatusOK, message(r.URL.Query().Get("msg")), false, nil)
}

// closedQueryTimeout bounds the query of a closed workflow's decisions,
// which waits for a worker to replay it.
const closedQueryTimeout = 5 * time.Second

// renderWorkflow answers a workflow's page: what the service holds about
// it, its timeline and input from its history, the decision forms of the
// incidents it waits on, its decisions, and the raw trail. A workflow
// Temporal does not know is a 404.
func (c *Console) renderWorkflow(w http.ResponseWriter, r *http.Request, pg page, code int, msg string, failed bool, posted *incident) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	v := view{Base: c.cfg.Path, Self: pg.path(c.cfg.Path), Message: msg, Failed: failed, WorkflowID: pg.id}
	d, err := c.cfg.Client.DescribeWorkflowExecution(ctx, pg.id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		v.fail("no workflow " + pg.id + " in the namespace " + c.cfg.Namespace)
		render(w, http.StatusNotFound, v)
		return
	case err != nil:
		v.fail("asking Temporal about the workflow failed: " + err.Error())
		render(w, http.StatusBadGateway, v)
		return
	}
	info := d.GetWorkflowExecutionInfo()
	v.RunID, v.Type, v.Status = info.GetExecution().GetRunId(), info.GetType().GetName(), operator.Status(info.GetStatus())
	h, err := operator.ReadHistory(ctx, c.cfg.Client, pg.id, v.RunID, d)
	if err != nil {
		v.TimelineError = err.Error()
	}
	running := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if h.Closed != "" {
		// It closed after the description was read (a decision's workflow
		// completing): the status is the history's, as its timeline ends.
		v.Status, running = h.Closed, false
	}
	v.Timeline, v.Truncated = h.Timeline, h.Truncated
	for _, in := range h.Input {
		var buf bytes.Buffer
		if json.Indent(&buf, in, "", "  ") == nil {
			v.Input = append(v.Input, buf.String())
		}
	}
	if facts, ok := c.cfg.Evidence.(FactSource); ok {
		f, err := facts.Facts(ctx, Workflow{ID: pg.id, RunID: v.RunID, Type: v.Type})
		switch {
		case errors.Is(err, operator.ErrNoEvidence):
		case err != nil:
			v.FactsError = err.Error()
		default:
			v.Facts = &f
		}
	}
	if running {
		c.pending(ctx, &v, pg.id, pg, posted)
		if v.Decisions, err = operator.Decisions(ctx, c.cfg.Client, pg.id, v.RunID); err != nil {
			v.DecisionsError = "the workflow's decisions could not be read: " + err.Error()
		}
	} else {
		// A closed workflow answers a query by a worker's replay of its
		// history: bounded, and not fatal without one.
		qctx, cancel := context.WithTimeout(ctx, closedQueryTimeout)
		v.Decisions, err = operator.Decisions(qctx, c.cfg.Client, pg.id, v.RunID)
		cancel()
		if err != nil {
			v.DecisionsError = "the closed workflow's decisions could not be read (is a worker running to replay it?): " + err.Error()
		}
	}
	v.Raw = raw(v, h)
	render(w, code, v)
}

// raw is the workflow's trail as indented JSON: the page's raw text.
func raw(v view, h operator.History) string {
	var steps []operator.Step
	for _, p := range v.Pending {
		steps = append(steps, operator.Step{WorkflowID: p.WorkflowID, RunID: p.RunID, Pending: idemwf.PendingRecovery{
			Incident: idemwf.Incident{RecordKey: p.RecordKey, Attempt: p.Attempt, Rev: p.Rev}, RecordKey: p.RecordKey, Activity: p.Activity, ResultType: p.ResultType, NoResult: p.NoResult}})
	}
	b, err := json.MarshalIndent(struct {
		WorkflowID string           `json:"workflow_id"`
		RunID      string           `json:"run_id"`
		Status     string           `json:"status"`
		History    operator.History `json:"history"`
		Pending    []operator.Step  `json:"pending,omitempty"`
		Decisions  []idemwf.Decided `json:"decisions,omitempty"`
		Facts      *Facts           `json:"facts,omitempty"`
	}{v.WorkflowID, v.RunID, v.Status, h, steps, v.Decisions, v.Facts}, "", "  ")
	if err != nil {
		return "the trail does not encode as JSON: " + err.Error()
	}
	return string(b)
}

func render(w http.ResponseWriter, code int, v view) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, "index", v); err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
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
	fail := func(code int, msg string) {
		if from.id != "" {
			c.renderWorkflow(w, r, from, code, msg, true, &posted)
			return
		}
		c.renderIndex(w, r, code, msg, true, &posted)
	}
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "the form did not parse: "+err.Error())
		return
	}
	f := r.PostForm
	from = parsePage(f.Get("page"))
	posted = incident{WorkflowID: f.Get("workflow_id"), RunID: f.Get("run_id"), RecordKey: f.Get("record"), Activity: f.Get("activity"),
		RequestID: f.Get("request_id"), Form: form{Decision: f.Get("decision"), Result: f.Get("result"), Reason: f.Get("reason"), Confirm: f.Get("confirm") != "",
			OverrideRetention: f.Get("override_retention")}}
	res := idemwf.Resolution{RecordKey: posted.RecordKey, Decision: idemwf.Decision(posted.Form.Decision), Reason: strings.TrimSpace(posted.Form.Reason),
		RequestID: posted.RequestID, By: c.principal(r), RequestedAt: time.Now().UTC(), Confirmed: posted.Form.Confirm,
		OverrideRetention: strings.TrimSpace(posted.Form.OverrideRetention)}
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
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	switch res.Decision {
	case idemwf.Completed:
		if code, msg := c.completedResult(ctx, posted, &res); code != 0 {
			fail(code, msg)
			return
		}
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
		c.back(w, r, from, "signalled-"+string(res.Decision))
	default:
		code := "applied-"
		if reply.Repeated {
			code = "repeated-"
		}
		c.cfg.Logger.Info("onceflow console: decision applied", "workflow_id", wfID, "incident", reply.Applied.String(), "decision", reply.Decision,
			"request", res.RequestID, "by", res.By, "repeated", reply.Repeated)
		c.back(w, r, from, code+string(reply.Decision))
	}
}

// completedResult puts the posted form's result in res, a completed
// decision; a non-zero code and its message when the form cannot be sent.
func (c *Console) completedResult(ctx context.Context, posted incident, res *idemwf.Resolution) (code int, msg string) {
	if result := strings.TrimSpace(posted.Form.Result); result != "" {
		if !json.Valid([]byte(result)) {
			return http.StatusBadRequest, "completed needs the activity's result as valid JSON"
		}
		res.Result = json.RawMessage(result)
		return 0, ""
	}
	// No result typed: right only for an activity that returns none, as
	// the workflow itself says (never the form). An incident it does not
	// list (decided already: a resend, which Resolve answers) is left to
	// the workflow to answer.
	p, err := operator.PendingRecoveries(ctx, c.cfg.Client, posted.WorkflowID, posted.RunID)
	if err != nil {
		return http.StatusBadGateway, "asking the workflow what it waits on failed, so the decision was not sent: " + err.Error()
	}
	switch i := slices.IndexFunc(p, func(p idemwf.PendingRecovery) bool { return p.Incident == res.Incident() }); {
	case i >= 0 && !p[i].NoResult:
		return http.StatusBadRequest, "completed needs the activity's result as valid JSON"
	case i >= 0:
		res.Result = json.RawMessage("null")
	}
	return 0, ""
}

// ask asks the downstream now about a posted incident, through its
// activity's own Reconcile (operator.AskDownstream), and returns to the
// page, which shows the answer as the incident's evidence.
func (c *Console) ask(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		c.renderIndex(w, r, http.StatusBadRequest, "the form did not parse: "+err.Error(), true, nil)
		return
	}
	f := r.PostForm
	from := parsePage(f.Get("page"))
	inc := idemwf.Incident{RecordKey: f.Get("record")}
	var err error
	if inc.Attempt, err = strconv.ParseInt(f.Get("attempt"), 10, 64); err == nil {
		inc.Rev, err = strconv.ParseInt(f.Get("rev"), 10, 64)
	}
	fail := func(code int, msg string) {
		if from.id != "" {
			c.renderWorkflow(w, r, from, code, msg, true, nil)
			return
		}
		c.renderIndex(w, r, code, msg, true, nil)
	}
	wfID := f.Get("workflow_id")
	if _, perr := onceflow.ParseRef(inc.RecordKey); err != nil || perr != nil || wfID == "" {
		fail(http.StatusBadRequest, "the form does not name an incident: reload the page")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 90*time.Second)
	defer cancel()
	if _, err := operator.AskDownstream(ctx, c.cfg.Client, wfID, f.Get("run_id"), inc); err != nil {
		c.cfg.Logger.Warn("onceflow console: asking the downstream failed", "workflow_id", wfID, "incident", inc.String(), "err", err)
		fail(http.StatusBadGateway, "asking the downstream failed: "+err.Error())
		return
	}
	c.cfg.Logger.Info("onceflow console: asked the downstream", "workflow_id", wfID, "incident", inc.String(), "by", c.principal(r))
	c.back(w, r, from, "asked")
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

// back redirects to the page the form was on (the index, or a workflow's
// page), with a message code (post/redirect/get).
func (c *Console) back(w http.ResponseWriter, r *http.Request, from page, code string) {
	http.Redirect(w, r, from.path(c.cfg.Path)+"?"+url.Values{"msg": {code}}.Encode(), http.StatusSeeOther)
}
