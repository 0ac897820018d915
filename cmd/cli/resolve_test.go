package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	idemwf "github.com/onceflow/onceflow/workflow"
)

// resolve -decision fail needs -reason, as the console's fail form does:
// a usage error, before anything is sent (no Temporal here to send it to).
func TestResolveFailNeedsAReason(t *testing.T) {
	t.Parallel()
	args := []string{"-temporal-address", "127.0.0.1:1", "-workflow-id", "transfer-1", "-record", "withdraw:d1:" + strings.Repeat("a", 64), "-attempt", "1", "-rev", "2", "-decision", "fail"}
	for _, extra := range [][]string{nil, {"-reason", "  "}} {
		var out bytes.Buffer
		err := RunOperator(context.Background(), "resolve", append(args, extra...), func(string) string { return "" }, &out, nil)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "-decision fail needs -reason: say why the operation is given up") {
			t.Errorf("fail %q: %v, want a usage error asking for -reason", extra, err)
		}
	}
}

// A decision whose request the workflow had already applied is printed as
// such, not as applied now.
func TestARepeatedRequestIsPrintedAsAlreadyApplied(t *testing.T) {
	t.Parallel()
	inc := idemwf.Incident{RecordKey: "withdraw:d1:aa", Attempt: 1, Rev: 2}
	var out bytes.Buffer
	if err := writeApplied(&out, "transfer-1", "req-1", idemwf.DecisionReply{Applied: inc, Decision: idemwf.Retry, RequestID: "req-1", Repeated: true}); err != nil {
		t.Fatal(err)
	}
	if want := "already applied by request req-1: retry for withdraw:d1:aa@1.2 in transfer-1; nothing changed\n"; out.String() != want {
		t.Errorf("a repeated request: %q, want %q", out.String(), want)
	}
	out.Reset()
	if err := writeApplied(&out, "transfer-1", "req-2", idemwf.DecisionReply{Applied: inc, Decision: idemwf.Retry, RequestID: "req-2"}); err != nil {
		t.Fatal(err)
	}
	if want := "applied: retry for withdraw:d1:aa@1.2 in transfer-1 (request req-2)\n"; out.String() != want {
		t.Errorf("a new request: %q, want %q", out.String(), want)
	}
}

// waiting is a Temporal client whose workflow waits on p (PendingQuery);
// anything else panics.
type waiting struct {
	client.Client
	p []idemwf.PendingRecovery
}

func (w waiting) QueryWorkflow(_ context.Context, _, _, query string, _ ...any) (converter.EncodedValue, error) {
	if query != idemwf.PendingQuery {
		return nil, errors.New("unexpected query " + query)
	}
	b, err := json.Marshal(w.p)
	return jsonValue(b), err
}

type jsonValue []byte

func (v jsonValue) HasValue() bool    { return len(v) > 0 }
func (v jsonValue) Get(ptr any) error { return json.Unmarshal(v, ptr) }

// resolve -decision completed without -result sends null for an activity
// that returns only an error, as the workflow's incident says; for
// another it is a usage error naming the result's type; an incident the
// workflow no longer lists is left to the workflow (a resend is answered
// as already applied).
func TestCompletedWithoutAResult(t *testing.T) {
	t.Parallel()
	inc := idemwf.Incident{RecordKey: "notify:d1:aa", Attempt: 1, Rev: 2}
	res := idemwf.Resolution{RecordKey: inc.RecordKey, Attempt: 1, Rev: 2, Decision: idemwf.Completed}
	errorOnly := waiting{p: []idemwf.PendingRecovery{{Incident: inc, Activity: "Acme.NotifyAuditor", NoResult: true}}}
	if r := res; needResult(t.Context(), errorOnly, "books-1", "", &r) != nil || string(r.Result) != "null" {
		t.Errorf("an error-only activity: result %q, want null", r.Result)
	}
	typed := waiting{p: []idemwf.PendingRecovery{{Incident: inc, Activity: "Acme.PostEntry", ResultType: "books.Posted"}}}
	if err := needResult(t.Context(), typed, "books-1", "", &res); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "-decision completed needs -result: Acme.PostEntry's result as JSON, a books.Posted") {
		t.Errorf("a typed activity: %v, want a usage error naming books.Posted", err)
	}
	if err := needResult(t.Context(), waiting{}, "books-1", "", &res); err != nil || res.Result != nil {
		t.Errorf("an incident no longer listed: %v, result %q; want it sent as it is", err, res.Result)
	}
}
