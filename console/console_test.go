package console

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	updatepb "go.temporal.io/api/update/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// noWorkflows is a Temporal client with no workflow at all: all the
// index page asks of it. Anything else it is asked panics (nil).
type noWorkflows struct{ client.Client }

func (noWorkflows) ListWorkflow(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	return &workflowservice.ListWorkflowExecutionsResponse{}, nil
}

func (noWorkflows) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("workflow not found")
}

// newMux is a console of cfg (its Client filled in) on a mux.
func newMux(t *testing.T, cfg Config) *http.ServeMux {
	t.Helper()
	return newMuxWith(t, noWorkflows{}, cfg)
}

// newMuxWith is newMux with the Temporal client tc.
func newMuxWith(t *testing.T, tc client.Client, cfg Config) *http.ServeMux {
	t.Helper()
	cfg.Client, cfg.TaskQueue = tc, "onceflow"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	c.Register(mux)
	return mux
}

type answer struct {
	status int
	header http.Header
	body   string
}

// do serves one request for host through mux; headers are name, value
// pairs.
func do(mux http.Handler, method, host, target, body string, headers ...string) answer {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	res := w.Result()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header, string(b)}
}

// Under -dev the console answers only for a loopback host name: a page
// of evil.example rebound to 127.0.0.1 is same-origin to the browser, so
// its reads and its posts (Origin http://evil.example) carry
// Host: evil.example, and are refused 421 before anything reaches Temporal
// (whose fake here would panic on a decision).
func TestDevConsoleAnswersOnlyLoopbackHosts(t *testing.T) {
	t.Parallel()
	mux := newMux(t, Config{Dev: true})
	form := url.Values{"workflow_id": {"order-1"}, "record": {"charge-card:d1:00"}, "attempt": {"1"}, "rev": {"2"}, "decision": {"retry"}}.Encode()
	for _, host := range []string{"evil.example", "evil.example:8080", "localhost.evil.example:8080", "127.0.0.1.evil.example", "127.0.0.2:8080", "0.0.0.0:8080", "[::2]:8080"} {
		if a := do(mux, "GET", host, "/console", ""); a.status != http.StatusMisdirectedRequest {
			t.Errorf("GET /console for Host %s: %d %s", host, a.status, a.body)
		}
		if a := do(mux, "GET", host, "/console/workflows/order-1", ""); a.status != http.StatusMisdirectedRequest {
			t.Errorf("GET a workflow's trail for Host %s: %d", host, a.status)
		}
		a := do(mux, "POST", host, "/console/resolve", form, "Content-Type", "application/x-www-form-urlencoded",
			"Origin", "http://"+host, "Sec-Fetch-Site", "same-origin")
		if a.status != http.StatusMisdirectedRequest {
			t.Errorf("a same-origin post for Host %s: %d %s", host, a.status, a.body)
		}
	}
	for _, host := range []string{"localhost", "localhost:8080", "LocalHost:1", "127.0.0.1", "127.0.0.1:8080", "[::1]", "[::1]:8080"} {
		if a := do(mux, "GET", host, "/console", ""); a.status != http.StatusOK || !strings.Contains(a.body, "Pending recoveries") {
			t.Errorf("GET /console for Host %s: %d %s", host, a.status, a.body)
		}
	}
	// With a token, outside -dev, the token is the guard and any Host may
	// reach the console (behind a proxy, on a name of the operator's).
	tok := newMux(t, Config{Token: testToken})
	if a := do(tok, "GET", "console.internal.example", "/console", "", "Authorization", "Bearer "+testToken); a.status != http.StatusOK {
		t.Errorf("with the token, on a name of the operator's: %d %s", a.status, a.body)
	}
}

// Every answer of the console carries a Content-Security-Policy that
// allows no script (and the page's one inline style by its hash), and
// nosniff: the pages, the refusals, the off switch.
func TestConsoleHeadersOnEveryAnswer(t *testing.T) {
	t.Parallel()
	dev := newMux(t, Config{Dev: true})
	tok := newMux(t, Config{Token: testToken})
	off := newMux(t, Config{})
	page := do(dev, "GET", "127.0.0.1:8080", "/console", "")
	if page.status != http.StatusOK {
		t.Fatalf("the page: %d %s", page.status, page.body)
	}
	_, rest, _ := strings.Cut(page.body, "<style>")
	style, _, _ := strings.Cut(rest, "</style>")
	sum := sha256.Sum256([]byte(style))
	wantStyle := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	if strings.Contains(page.body, "<script") {
		t.Errorf("the page has a script, which the policy refuses")
	}
	for name, a := range map[string]answer{
		"the index":          page,
		"a trail, no token":  do(tok, "GET", "localhost", "/console/workflows/order-1", ""),
		"a rebound host":     do(dev, "GET", "evil.example", "/console", ""),
		"no token":           do(tok, "GET", "localhost", "/console", ""),
		"a wrong token":      do(tok, "GET", "localhost", "/console?token=nope", ""),
		"the console is off": do(off, "GET", "localhost", "/console", ""),
	} {
		p := a.header.Get("Content-Security-Policy")
		if !strings.Contains(p, "default-src 'none'") || strings.Contains(p, "unsafe-inline") || strings.Contains(p, "script-src") ||
			!strings.Contains(p, wantStyle) || !strings.Contains(p, "form-action 'self'") || !strings.Contains(p, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q, want no script and the page's style by its hash (%s)", name, p, wantStyle)
		}
		if a.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", name, a.header.Get("X-Content-Type-Options"))
		}
	}
}

// ?msg= is a code of the console's own: a link that carries text of
// someone else's shows nothing of it.
func TestConsoleShowsOnlyItsOwnMessages(t *testing.T) {
	t.Parallel()
	mux := newMux(t, Config{Dev: true})
	for _, msg := range []string{"Your session expired: sign in again at https://evil.example", "<b>bold</b>", "applied-<i>x</i>", "applied-everything", "refused-retry"} {
		a := do(mux, "GET", "localhost", "/console?"+url.Values{"msg": {msg}, "failed": {"1"}}.Encode(), "")
		if a.status != http.StatusOK || strings.Contains(a.body, `id="message"`) || strings.Contains(a.body, "evil.example") || strings.Contains(a.body, "everything") {
			t.Errorf("?msg=%s shows a message: %d %s", msg, a.status, a.body)
		}
	}
	for code, want := range map[string]string{"applied-retry": "applied: retry", "applied-completed": "applied: completed", "signalled-fail": "sent fail as a signal",
		"repeated-retry": "already applied by this request: retry; nothing changed"} {
		a := do(mux, "GET", "localhost", "/console?msg="+code, "")
		if !strings.Contains(a.body, `<p class="msg" id="message">`+want) {
			t.Errorf("?msg=%s: want %q in %s", code, want, a.body)
		}
	}
	// A form that names no incident is answered with the page and what is
	// wrong, not redirected with the text in the address.
	a := do(mux, "POST", "localhost", "/console/resolve", "decision=retry", "Content-Type", "application/x-www-form-urlencoded")
	if a.status != http.StatusBadRequest || a.header.Get("Location") != "" || !strings.Contains(a.body, "the form does not name an incident") {
		t.Errorf("a bad form: %d %v %s", a.status, a.header, a.body)
	}
}

// oneWaiting is a Temporal client with one running workflow that waits on
// one charge incident.
type oneWaiting struct {
	client.Client
	p []idemwf.PendingRecovery
}

func (oneWaiting) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{{
		Execution: &commonpb.WorkflowExecution{WorkflowId: "order-1", RunId: "run-1"}, Type: &commonpb.WorkflowType{Name: "PlaceOrder"},
		Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}}}, nil
}

func (o oneWaiting) QueryWorkflow(_ context.Context, _, _, query string, _ ...any) (converter.EncodedValue, error) {
	if query != idemwf.PendingQuery {
		return nil, errors.New("unexpected query " + query)
	}
	b, err := json.Marshal(o.p)
	return jsonValue(b), err
}

type jsonValue []byte

func (v jsonValue) HasValue() bool    { return len(v) > 0 }
func (v jsonValue) Get(ptr any) error { return json.Unmarshal(v, ptr) }

// noCharge is the evidence of a downstream that took no money: retry.
var noCharge = operator.EvidenceFunc(func(context.Context, operator.Step) (idemwf.Evidence, error) {
	return idemwf.Evidence{Summary: "the gateway took no money under this operation key", Implies: idemwf.Retry}, nil
})

// orders is a FactSource that knows the workflow order-1 as an order.
type orders struct{ operator.EvidenceFunc }

func (orders) Facts(_ context.Context, w Workflow) (Facts, error) {
	if w.ID != "order-1" {
		return Facts{}, operator.ErrNoEvidence
	}
	return Facts{Title: "Order 1", Summary: "reserved, 19.99 USD", Rows: []Fact{{Label: "order", Value: "reserved, 19.99 USD"}}}, nil
}

// A decision form that fails keeps what the operator typed (the result,
// the reason, the confirmation), and the incident's evidence is shown
// beside it: here the gateway has no call, so retry is implied. The
// incident links to its workflow's page, and the index lists the recent
// workflow with what the service's facts say of it.
func TestAFailedFormKeepsItsInput(t *testing.T) {
	t.Parallel()
	key := "charge-card:d1:" + strings.Repeat("a", 64)
	p := idemwf.PendingRecovery{Incident: idemwf.Incident{RecordKey: key, Attempt: 1, Rev: 2}, RecordKey: key, Activity: "order.ChargeCard", ResultType: "ledger.Payment"}
	p.Details.DownstreamKey = "T-42"
	mux := newMuxWith(t, oneWaiting{p: []idemwf.PendingRecovery{p}}, Config{Dev: true, Evidence: orders{noCharge}})
	page := do(mux, "GET", "localhost", "/console", "")
	if page.status != http.StatusOK || !strings.Contains(page.body, "took no money under this operation key") || !strings.Contains(page.body, `class="retry implied"`) {
		t.Fatalf("the page: %d %s", page.status, page.body)
	}
	for _, want := range []string{`<a class="trail-link" href="/console/workflows/order-1">`, `<td class="summary">Order 1: reserved, 19.99 USD</td>`,
		`downstream key <code class="downstream-key">T-42</code>`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("no %q in the index: %s", want, page.body)
		}
	}
	form := url.Values{"workflow_id": {"order-1"}, "run_id": {"run-1"}, "record": {key}, "attempt": {"1"}, "rev": {"2"}, "activity": {"order.ChargeCard"},
		"request_id": {"req-1"}, "decision": {"completed"}, "result": {"{broken json"}, "reason": {"typed by hand"}, "confirm": {"yes"}}.Encode()
	a := do(mux, "POST", "localhost", "/console/resolve", form, "Content-Type", "application/x-www-form-urlencoded")
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "needs the activity&#39;s result as valid JSON") {
		t.Fatalf("a bad result: %d %s", a.status, a.body)
	}
	for _, want := range []string{">{broken json</textarea>", `value="typed by hand"`, `value="req-1"`, `checked`} {
		if !strings.Contains(a.body, want) {
			t.Errorf("the form lost its input: no %q in %s", want, a.body)
		}
	}
}

// A workflow Temporal does not know is a 404, with the page.
func TestAnUnknownWorkflowIsNotFound(t *testing.T) {
	t.Parallel()
	mux := newMux(t, Config{Dev: true})
	if a := do(mux, "GET", "localhost", "/console/workflows/no-such-workflow", ""); a.status != http.StatusNotFound || !strings.Contains(a.body, "no workflow no-such-workflow in the namespace default") {
		t.Fatalf("an unknown workflow: %d %s", a.status, a.body)
	}
}

// The console mounts at Config.Path: its pages, links, forms and cookie
// are under it, and nothing else of the mux is its.
func TestConsoleMountsAtItsPath(t *testing.T) {
	t.Parallel()
	key := "charge-card:d1:" + strings.Repeat("a", 64)
	p := idemwf.PendingRecovery{Incident: idemwf.Incident{RecordKey: key, Attempt: 1, Rev: 2}, RecordKey: key, Activity: "order.ChargeCard"}
	mux := newMuxWith(t, oneWaiting{p: []idemwf.PendingRecovery{p}}, Config{Token: testToken, Path: "/ops/onceflow"})
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the service's own") })
	a := do(mux, "GET", "localhost", "/ops/onceflow", "", "Authorization", "Bearer "+testToken)
	for _, want := range []string{`action="/ops/onceflow/resolve"`, `href="/ops/onceflow/workflows/order-1"`, `id="refresh" href="/ops/onceflow"`} {
		if a.status != http.StatusOK || !strings.Contains(a.body, want) {
			t.Errorf("at /ops/onceflow: %d, no %q in %s", a.status, want, a.body)
		}
	}
	if a := do(mux, "GET", "localhost", "/console", ""); a.body != "the service's own" {
		t.Errorf("/console of the service: %d %s", a.status, a.body)
	}
	a = do(mux, "GET", "localhost", "/ops/onceflow?token="+testToken, "")
	if ck := a.header.Get("Set-Cookie"); a.status != http.StatusSeeOther || !strings.Contains(ck, "Path=/ops/onceflow;") {
		t.Errorf("signing in: %d, cookie %q", a.status, ck)
	}
	for _, bad := range []string{"console", "/console/", "/a b"} {
		if _, err := New(Config{Client: noWorkflows{}, Path: bad}); err == nil {
			t.Errorf("Config.Path %q: no error", bad)
		}
	}
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Config.Client is required") {
		t.Errorf("no client: %v", err)
	}
}

// testToken is a console token of the shortest hex length CheckToken
// takes (openssl rand -hex 32).
const testToken = "5f0c3b8e2a7d4c1b9e6f0a3d8c2b7e4f1a9d6c3b0e8f5a2d7c4b1e9f6a3d0c8b"

// A console token that cannot hold 32 random bytes is refused when the
// console is made (the worker then does not start), with how to make one;
// 64 hex digits or 43 base64 characters are enough.
func TestConsoleRefusesAShortToken(t *testing.T) {
	t.Parallel()
	cfg := Config{Client: noWorkflows{}}
	for _, tok := range []string{"secret-token", "x", strings.Repeat("a", 63), testToken[:63], strings.Repeat("Zz", 21), // 42 base64 characters
		testToken + " ", testToken + ";", testToken + "\n", testToken + "é"} {
		cfg.Token = tok
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("token %q: %v, want a refusal that says how to make one", tok, err)
		}
		if CheckToken(tok) == nil {
			t.Errorf("CheckToken(%q) accepted it", tok)
		}
	}
	for _, tok := range []string{testToken, strings.ToUpper(testToken), "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=", // openssl rand -base64 32
		"q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq8_", "a.b~c-d_e+f/" + strings.Repeat("Q", 31)} {
		cfg.Token = tok
		if _, err := New(cfg); err != nil {
			t.Errorf("token %q: %v", tok, err)
		}
	}
}

// Wrong tokens are limited per client address: failedTokenBurst of them
// at once (as ?token=, a cookie or a bearer token), then 429 with
// Retry-After, for the right token too (else the limit would not slow a
// guesser down); another address is not limited, and one attempt comes
// back every failedTokenInterval.
func TestConsoleLimitsFailedTokens(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Client: noWorkflows{}, Namespace: "default", TaskQueue: "onceflow", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c.now = func() time.Time { return now }
	mux := http.NewServeMux()
	c.Register(mux)
	from := func(addr, target string, headers ...string) answer {
		r := httptest.NewRequest("GET", target, nil)
		r.RemoteAddr = addr
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Set(headers[i], headers[i+1])
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		res := w.Result()
		b, _ := io.ReadAll(res.Body)
		return answer{res.StatusCode, res.Header, string(b)}
	}
	wrong := strings.Repeat("0", 64)
	attempts := []func(addr string) answer{
		func(addr string) answer { return from(addr, "/console?token="+wrong) },
		func(addr string) answer { return from(addr, "/console", "Cookie", cookieName+"="+wrong) },
		func(addr string) answer { return from(addr, "/console", "Authorization", "Bearer "+wrong) },
	}
	for i := range failedTokenBurst {
		if a := attempts[i%len(attempts)]("192.0.2.1:1234"); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d %s", i+1, a.status, a.body)
		}
	}
	for _, a := range []answer{attempts[0]("192.0.2.1:1234"), attempts[1]("192.0.2.1:5678"), from("192.0.2.1:1", "/console", "Authorization", "Bearer "+testToken)} {
		if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "6" || !strings.Contains(a.body, "try again in 6 seconds") {
			t.Fatalf("over the limit: %d Retry-After %q %s, want 429, Retry-After 6", a.status, a.header.Get("Retry-After"), a.body)
		}
	}
	if a := from("198.51.100.7:1", "/console", "Authorization", "Bearer "+testToken); a.status != http.StatusOK {
		t.Fatalf("another address with the right token: %d %s", a.status, a.body)
	}
	if a := from("[2001:db8::1]:1", "/console", "Authorization", "Bearer "+wrong); a.status != http.StatusUnauthorized {
		t.Fatalf("another address with a wrong token: %d %s", a.status, a.body)
	}
	if a := from("192.0.2.1:1", "/console"); a.status != http.StatusTooManyRequests {
		t.Fatalf("over the limit, no token: %d", a.status)
	}
	now = now.Add(failedTokenInterval)
	// A request with no token is no attempt: it uses up nothing.
	if a := from("192.0.2.1:1", "/console"); a.status != http.StatusUnauthorized || !strings.Contains(a.body, "open /console?token=") {
		t.Fatalf("one interval later, no token: %d %s", a.status, a.body)
	}
	if a := from("192.0.2.1:1", "/console", "Authorization", "Bearer "+testToken); a.status != http.StatusOK {
		t.Fatalf("one interval later, the right token: %d %s", a.status, a.body)
	}
	if a := attempts[2]("192.0.2.1:1"); a.status != http.StatusUnauthorized {
		t.Fatalf("one interval later, a wrong token: %d %s", a.status, a.body)
	}
	if a := attempts[2]("192.0.2.1:1"); a.status != http.StatusTooManyRequests {
		t.Fatalf("a second wrong token within the interval: %d %s", a.status, a.body)
	}
	// An IPv6 client's /64 is one client.
	for range failedTokenBurst {
		attempts[2]("[2001:db8:1:2::a]:1")
	}
	if a := attempts[2]("[2001:db8:1:2::b]:1"); a.status != http.StatusTooManyRequests {
		t.Fatalf("another address of the same IPv6 /64: %d", a.status)
	}
}

// oneClosed is a Temporal client with one completed workflow,
// transfer-1, whose history is a withdrawal that failed once and then
// completed after a decision.
type oneClosed struct{ noWorkflows }

func (oneClosed) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if id != "transfer-1" {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-1"}, Type: &commonpb.WorkflowType{Name: "Transfer"},
		Status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}}, nil
}

func (oneClosed) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	at := func(s int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 1, 2, 3, 4, s, 0, time.UTC))
	}
	input, _ := converter.GetDefaultDataConverter().ToPayloads(map[string]any{"reference": "T-42", "amount": 12345})
	decision, _ := converter.GetDefaultDataConverter().ToPayloads(idemwf.Resolution{Decision: idemwf.Retry, By: "alice", Reason: "the bank shows nothing"})
	return &events{list: []*historypb.HistoryEvent{
		{EventId: 1, EventTime: at(0), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{WorkflowType: &commonpb.WorkflowType{Name: "Transfer"}, Input: input, Identity: "starter"}}},
		{EventId: 5, EventTime: at(1), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{ActivityType: &commonpb.ActivityType{Name: "Withdraw"}}}},
		{EventId: 6, EventTime: at(2), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: 5, Attempt: 3, Identity: "worker-7"}}},
		{EventId: 7, EventTime: at(3), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
			ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{ScheduledEventId: 5, Identity: "worker-7", Failure: &failurepb.Failure{
				Message: "bank: timed out", FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: "onceflow.EffectUnknown"}}}}}},
		{EventId: 9, EventTime: at(4), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{
			WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{AcceptedRequest: &updatepb.Request{
				Meta: &updatepb.Meta{Identity: "cli@host"}, Input: &updatepb.Input{Name: idemwf.ResolveUpdate, Args: decision}}}}},
		{EventId: 12, EventTime: at(5), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED},
	}}
}

func (oneClosed) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return jsonValue("[]"), nil
}

// events is a history iterator over list.
type events struct{ list []*historypb.HistoryEvent }

func (e *events) HasNext() bool { return len(e.list) > 0 }

func (e *events) Next() (*historypb.HistoryEvent, error) {
	ev := e.list[0]
	e.list = e.list[1:]
	return ev, nil
}

// A workflow's page comes from its own history, for any workflow: the
// timeline (time, step, state, attempt, actor), a decision's row naming
// who sent it, the input, and the raw trail collapsed.
func TestAWorkflowsPageIsItsHistory(t *testing.T) {
	t.Parallel()
	mux := newMuxWith(t, oneClosed{}, Config{Dev: true})
	a := do(mux, "GET", "localhost", "/console/workflows/transfer-1", "")
	if a.status != http.StatusOK {
		t.Fatalf("the page: %d %s", a.status, a.body)
	}
	for _, want := range []string{
		`<h2>Workflow transfer-1</h2>`, `<strong class="status">COMPLETED</strong>`,
		`<td>2026-01-02 03:04:02.000</td><td class="step"><code>Withdraw</code></td><td class="state">started</td><td class="attempt">3</td><td class="actor">worker-7</td>`,
		`<td class="state">failed (onceflow.EffectUnknown)</td><td class="attempt">3</td><td class="actor">worker-7</td><td>bank: timed out</td>`,
		`<td class="step"><code>onceflow.decide</code></td><td class="state">decision: retry</td><td class="attempt"></td><td class="actor">alice</td><td>the bank shows nothing</td>`,
		`&#34;reference&#34;: &#34;T-42&#34;`, `<details id="raw">`,
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("no %q in the page: %s", want, a.body)
		}
	}
}

// TestTheConsoleShowsTheRetentionWindow (issue 36): an incident shows the
// time left in the downstream's retention of its key; once it has
// expired, the page says a retry needs an override, and the retry form
// asks for its reason (override_retention), keeping it when the form
// fails.
func TestTheConsoleShowsTheRetentionWindow(t *testing.T) {
	t.Parallel()
	key := "charge-card:d1:" + strings.Repeat("a", 64)
	within := idemwf.PendingRecovery{Incident: idemwf.Incident{RecordKey: key, Attempt: 1, Rev: 2}, RecordKey: key, Activity: "order.ChargeCard",
		RetentionEnds: time.Now().Add(23*time.Hour + 30*time.Minute)}
	page := do(newMuxWith(t, oneWaiting{p: []idemwf.PendingRecovery{within}}, Config{Dev: true}), "GET", "localhost", "/console", "")
	if page.status != http.StatusOK || !strings.Contains(page.body, `<span class="retention">23h`) || strings.Contains(page.body, "override_retention") {
		t.Fatalf("within the window: %d %s", page.status, page.body)
	}
	expired := within
	expired.RetentionEnds = time.Now().Add(-time.Hour)
	down := operator.EvidenceFunc(func(context.Context, operator.Step) (idemwf.Evidence, error) {
		return idemwf.Evidence{}, errors.New("ledger down")
	})
	mux := newMuxWith(t, oneWaiting{p: []idemwf.PendingRecovery{expired}}, Config{Dev: true, Evidence: down})
	page = do(mux, "GET", "localhost", "/console", "")
	for _, want := range []string{`<span class="retention expired">expired 1h`, "a retry needs a reason to override it", `name="override_retention" required`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("past the window: no %q in %s", want, page.body)
		}
	}
	form := url.Values{"workflow_id": {"order-1"}, "run_id": {"run-1"}, "record": {key}, "attempt": {"1"}, "rev": {"2"}, "activity": {"order.ChargeCard"},
		"request_id": {"req-1"}, "decision": {"retry"}, "override_retention": {"the gateway shows no charge"}}.Encode()
	a := do(mux, "POST", "localhost", "/console/resolve", form, "Content-Type", "application/x-www-form-urlencoded")
	if a.status != http.StatusBadGateway || !strings.Contains(a.body, `value="the gateway shows no charge"`) {
		t.Fatalf("a failed retry form lost its override: %d %s", a.status, a.body)
	}
}

// closedSinceDescribed is oneClosed whose description is older than its
// history: it still says RUNNING, with the withdrawal running, while the
// history ends in the workflow's completion (a decision's workflow
// completing between the two reads).
type closedSinceDescribed struct{ oneClosed }

func (c closedSinceDescribed) DescribeWorkflowExecution(ctx context.Context, id, run string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	d, err := c.oneClosed.DescribeWorkflowExecution(ctx, id, run)
	if err != nil {
		return nil, err
	}
	d.WorkflowExecutionInfo.Status = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	d.PendingActivities = []*workflowpb.PendingActivityInfo{{ActivityType: &commonpb.ActivityType{Name: "Withdraw"}, Attempt: 4}}
	return d, nil
}

// The workflow's page shows the state the decision left: a workflow that
// completed after its description was read is COMPLETED, as its timeline
// ends, with no activity running and no decision form.
func TestAWorkflowsPageShowsTheStateTheDecisionLeft(t *testing.T) {
	t.Parallel()
	a := do(newMuxWith(t, closedSinceDescribed{}, Config{Dev: true}), "GET", "localhost", "/console/workflows/transfer-1?msg=applied-retry", "")
	if a.status != http.StatusOK || !strings.Contains(a.body, `<strong class="status">COMPLETED</strong>`) || !strings.Contains(a.body, `<td class="state">completed</td>`) {
		t.Fatalf("the page: %d %s", a.status, a.body)
	}
	for _, gone := range []string{"RUNNING", `<td class="state">running</td>`, `<form method="post"`} {
		if strings.Contains(a.body, gone) {
			t.Errorf("the page of a completed workflow shows %q: %s", gone, a.body)
		}
	}
}

// deciding is oneWaiting that takes decisions: it records the Updates and
// answers each as applied; decided are the decisions its workflow applied
// before (DecisionsQuery).
type deciding struct {
	oneWaiting
	mu      sync.Mutex
	sent    []idemwf.Resolution
	decided []idemwf.Decided
}

func (d *deciding) QueryWorkflow(ctx context.Context, id, run, query string, args ...any) (converter.EncodedValue, error) {
	if query == idemwf.DecisionsQuery {
		d.mu.Lock()
		defer d.mu.Unlock()
		b, err := json.Marshal(d.decided)
		return jsonValue(b), err
	}
	return d.oneWaiting.QueryWorkflow(ctx, id, run, query, args...)
}

func (d *deciding) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	res := o.Args[0].(idemwf.Resolution)
	d.sent = append(d.sent, res)
	return applied{o, res}, nil
}

// applied is the handle of an Update answered as applied.
type applied struct {
	o   client.UpdateWorkflowOptions
	res idemwf.Resolution
}

func (a applied) WorkflowID() string { return a.o.WorkflowID }
func (a applied) RunID() string      { return a.o.RunID }
func (a applied) UpdateID() string   { return a.o.UpdateID }
func (a applied) Get(_ context.Context, v any) error {
	*v.(*idemwf.DecisionReply) = idemwf.DecisionReply{Applied: a.res.Incident(), Decision: a.res.Decision, RequestID: a.res.RequestID}
	return nil
}

// postForm posts a decision form of the incident key@1.2 of order-1.
func postForm(mux http.Handler, key string, fields ...string) answer {
	form := url.Values{"workflow_id": {"order-1"}, "run_id": {"run-1"}, "record": {key}, "attempt": {"1"}, "rev": {"2"}, "activity": {"transfer.Withdraw"}}
	for i := 0; i+1 < len(fields); i += 2 {
		form.Set(fields[i], fields[i+1])
	}
	return do(mux, "POST", "localhost", "/console/resolve", form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
}

// The completed form knows the activity's result: its Go type beside the
// input, pre-filled with the result the evidence implies; an activity that
// returns only an error is asked for none, and its completed decision is
// sent with null, while another's without a result is refused unsent.
func TestTheResultFormKnowsTheResultType(t *testing.T) {
	t.Parallel()
	key := "withdraw:d1:" + strings.Repeat("b", 64)
	typed := idemwf.PendingRecovery{Incident: idemwf.Incident{RecordKey: key, Attempt: 1, Rev: 2}, RecordKey: key, Activity: "transfer.Withdraw", ResultType: "transfer.Confirmation"}
	withdrawn := operator.EvidenceFunc(func(context.Context, operator.Step) (idemwf.Evidence, error) {
		return idemwf.Evidence{Summary: "the bank withdrew 12.00 EUR under T-42", Implies: idemwf.Completed, Result: json.RawMessage(`{"id":"W-42"}`)}, nil
	})
	tc := &deciding{oneWaiting: oneWaiting{p: []idemwf.PendingRecovery{typed}}}
	mux := newMuxWith(t, tc, Config{Dev: true, Evidence: withdrawn})
	page := do(mux, "GET", "localhost", "/console", "")
	want := `result <code class="result-type">transfer.Confirmation</code> as JSON (pre-filled from the evidence)<textarea name="result" required>{&#34;id&#34;:&#34;W-42&#34;}</textarea>`
	if page.status != http.StatusOK || !strings.Contains(page.body, want) {
		t.Fatalf("the page: %d, no %q in %s", page.status, want, page.body)
	}
	if a := postForm(mux, key, "decision", "completed", "request_id", "req-1"); a.status != http.StatusBadRequest || !strings.Contains(a.body, "completed needs the activity&#39;s result as valid JSON") || len(tc.sent) != 0 {
		t.Fatalf("completed without a result for a transfer.Confirmation: %d, sent %d: %s", a.status, len(tc.sent), a.body)
	}

	errorOnly := typed
	errorOnly.ResultType, errorOnly.NoResult = "", true
	tc = &deciding{oneWaiting: oneWaiting{p: []idemwf.PendingRecovery{errorOnly}}}
	mux = newMuxWith(t, tc, Config{Dev: true})
	page = do(mux, "GET", "localhost", "/console", "")
	if !strings.Contains(page.body, "transfer.Withdraw returns only an error: completed takes no result.") || strings.Contains(page.body, `name="result"`) {
		t.Fatalf("the form of an error-only activity: %s", page.body)
	}
	a := postForm(mux, key, "decision", "completed", "request_id", "req-2")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/console?msg=applied-completed" || len(tc.sent) != 1 || string(tc.sent[0].Result) != "null" {
		t.Fatalf("completed for an error-only activity: %d %v, sent %+v", a.status, a.header, tc.sent)
	}
}

// A form sent again with the request ID the workflow already applied (a
// resubmitted page) says so, and sends nothing.
func TestARepeatedRequestSaysItWasAlreadyApplied(t *testing.T) {
	t.Parallel()
	key := "withdraw:d1:" + strings.Repeat("c", 64)
	inc := idemwf.Incident{RecordKey: key, Attempt: 1, Rev: 2}
	tc := &deciding{oneWaiting: oneWaiting{p: []idemwf.PendingRecovery{{Incident: inc, RecordKey: key, Activity: "transfer.Withdraw"}}},
		decided: []idemwf.Decided{{Incident: inc, Via: "update", Resolution: idemwf.Resolution{RecordKey: key, Attempt: 1, Rev: 2, Decision: idemwf.Retry, RequestID: "req-9", By: "console"}}}}
	mux := newMuxWith(t, tc, Config{Dev: true})
	a := postForm(mux, key, "decision", "retry", "request_id", "req-9")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/console?msg=repeated-retry" || len(tc.sent) != 0 {
		t.Fatalf("the resubmitted form: %d %v, sent %d", a.status, a.header, len(tc.sent))
	}
	if page := do(mux, "GET", "localhost", a.header.Get("Location"), ""); !strings.Contains(page.body, "already applied by this request: retry; nothing changed") {
		t.Fatalf("the page after it: %s", page.body)
	}
	// An error-only activity's completed, sent again once the workflow
	// waits on it no more, is answered the same.
	tc.mu.Lock()
	tc.oneWaiting.p = nil
	tc.decided = []idemwf.Decided{{Incident: inc, Via: "update", Resolution: idemwf.Resolution{RecordKey: key, Attempt: 1, Rev: 2, Decision: idemwf.Completed,
		Result: json.RawMessage("null"), RequestID: "req-10", By: "console"}}}
	tc.mu.Unlock()
	if a := postForm(mux, key, "decision", "completed", "request_id", "req-10"); a.status != http.StatusSeeOther || a.header.Get("Location") != "/console?msg=repeated-completed" || len(tc.sent) != 0 {
		t.Fatalf("the resubmitted completed form: %d %v %s, sent %d", a.status, a.header, a.body, len(tc.sent))
	}
}
