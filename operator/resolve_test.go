package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// updates is a Temporal client that records the Updates it is sent and
// answers each with the decision it carries; its workflow's decisions
// (DecisionsQuery) are decided.
type updates struct {
	client.Client // nil: any other call panics
	mu            sync.Mutex
	sent          []client.UpdateWorkflowOptions
	decided       []idemwf.Decided
}

func (u *updates) QueryWorkflow(_ context.Context, _, _, query string, _ ...any) (converter.EncodedValue, error) {
	if query != idemwf.DecisionsQuery {
		return nil, errors.New("unexpected query " + query)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return encode(u.decided)
}

func (u *updates) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sent = append(u.sent, o)
	return handle{o}, nil
}

type handle struct{ o client.UpdateWorkflowOptions }

func (h handle) WorkflowID() string { return h.o.WorkflowID }
func (h handle) RunID() string      { return h.o.RunID }
func (h handle) UpdateID() string   { return h.o.UpdateID }
func (h handle) Get(_ context.Context, v any) error {
	res := h.o.Args[0].(idemwf.Resolution)
	*v.(*idemwf.DecisionReply) = idemwf.DecisionReply{Applied: res.Incident(), Decision: res.Decision, RequestID: res.RequestID}
	return nil
}

// Resolve makes every decision request idempotent: the request ID (made
// when the caller gave none) travels in the payload and is the Update's
// ID, so a resend of the same request, also concurrent, is one Update for
// the server (which dedupes by Update ID) and one request for the workflow
// (which dedupes by request ID: TestARepeatedDecisionAppliesOnce).
func TestResolveSendsTheRequestIDAsTheUpdateID(t *testing.T) {
	t.Parallel()
	tc := &updates{}
	res := idemwf.Resolution{RecordKey: "charge-payment:d1:abc", Attempt: 1, Rev: 2, Decision: idemwf.Retry}
	reply, err := operator.Resolve(context.Background(), tc, "wf", "", res)
	if err != nil || reply.RequestID == "" || tc.sent[0].UpdateID != reply.RequestID {
		t.Fatalf("reply %+v, %v; sent %+v: want a generated request ID as the Update ID", reply, err, tc.sent)
	}
	res.RequestID = "req-1"
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := operator.Resolve(context.Background(), tc, "wf", "", res); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, o := range tc.sent[1:] {
		if o.UpdateID != "req-1" || o.Args[0].(idemwf.Resolution).RequestID != "req-1" {
			t.Fatalf("sent %+v; want Update ID and request ID req-1", o)
		}
	}
}

// A decision against its evidence is not sent unless confirmed with a
// reason.
func TestResolveRefusesADecisionAgainstTheEvidence(t *testing.T) {
	t.Parallel()
	tc := &updates{}
	ev := &idemwf.Evidence{Summary: "the gateway charged ch_1", Implies: idemwf.Completed, Result: json.RawMessage(`{"gateway_charge_id":"ch_1"}`)}
	res := idemwf.Resolution{RecordKey: "charge-payment:d1:abc", Attempt: 1, Rev: 2, Decision: idemwf.Retry, Evidence: ev, RequestID: "r"}
	for _, r := range []idemwf.Resolution{res, func() idemwf.Resolution { r := res; r.Confirmed = true; return r }()} {
		_, err := operator.Resolve(context.Background(), tc, "wf", "", r)
		var ce *operator.ContradictionError
		if !errors.Is(err, operator.ErrContradictsEvidence) || !errors.As(err, &ce) || ce.Evidence.Implies != idemwf.Completed {
			t.Fatalf("confirmed %v: err %v; want ErrContradictsEvidence", r.Confirmed, err)
		}
	}
	if err := operator.SignalResolve(context.Background(), tc, "wf", "", res); !errors.Is(err, operator.ErrContradictsEvidence) {
		t.Fatalf("signal: %v", err)
	}
	if len(tc.sent) != 0 {
		t.Fatalf("sent %+v; nothing may be sent", tc.sent)
	}
	res.Confirmed, res.Reason = true, "the charge was voided at the gateway by hand"
	if _, err := operator.Resolve(context.Background(), tc, "wf", "", res); err != nil || len(tc.sent) != 1 {
		t.Fatalf("confirmed with a reason: %v, sent %d", err, len(tc.sent))
	}
	res.Decision = idemwf.Completed
	res.Confirmed, res.Reason, res.Result = false, "", ev.Result
	if _, err := operator.Resolve(context.Background(), tc, "wf", "", res); err != nil {
		t.Fatalf("the implied decision: %v", err)
	}
}

// A request the workflow already applied is answered from its decisions
// as Repeated and not sent again: the server would answer the repeated
// Update ID with the first answer, which does not say so. The same
// request ID with another decision is refused as the workflow refuses
// it, unsent; a new request is sent.
func TestResolveAnswersARepeatedRequestFromTheDecisions(t *testing.T) {
	t.Parallel()
	inc := idemwf.Incident{RecordKey: "charge-payment:d1:abc", Attempt: 1, Rev: 2}
	tc := &updates{decided: []idemwf.Decided{{Incident: inc, Via: "update",
		Resolution: idemwf.Resolution{RecordKey: inc.RecordKey, Attempt: 1, Rev: 2, Decision: idemwf.Retry, RequestID: "req-1", By: "alice"}}}}
	res := idemwf.Resolution{RecordKey: inc.RecordKey, Attempt: 1, Rev: 2, Decision: idemwf.Retry, RequestID: "req-1", By: "bob"}
	reply, err := operator.Resolve(t.Context(), tc, "wf", "", res)
	if err != nil || !reply.Repeated || reply.Applied != inc || reply.Decision != idemwf.Retry || reply.RequestID != "req-1" || len(tc.sent) != 0 {
		t.Fatalf("the resend: %+v, %v, sent %d; want it answered as repeated, unsent", reply, err, len(tc.sent))
	}
	res.Decision, res.Reason = idemwf.Fail, "the bank refused it"
	var refused *operator.DecisionRefusedError
	if _, err := operator.Resolve(t.Context(), tc, "wf", "", res); !errors.As(err, &refused) ||
		refused.Message != "request req-1 already decided retry for "+inc.String()+": send this decision under a new request ID" || len(tc.sent) != 0 {
		t.Fatalf("another decision under the same request ID: %v, sent %d; want it refused, unsent", err, len(tc.sent))
	}
	res.RequestID = "req-2"
	if reply, err := operator.Resolve(t.Context(), tc, "wf", "", res); err != nil || reply.Repeated || len(tc.sent) != 1 {
		t.Fatalf("a new request: %+v, %v, sent %d; want it sent", reply, err, len(tc.sent))
	}
}
