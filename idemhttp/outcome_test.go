package idemhttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/onceflow/onceflow"
)

// Every error outcome has an answer in the table; an error the executor
// does not classify is a 500, not a 503 that invites a retry of a bug;
// a store that failed because the client left is not "store unavailable".
func TestEveryOutcomeHasAProblem(t *testing.T) {
	t.Parallel()
	for _, o := range onceflow.Outcomes() {
		if _, ok := problems[o]; ok == o.Succeeded() {
			t.Errorf("outcome %q: in the table %v, succeeded %v", o, ok, o.Succeeded())
		}
	}
	m := &Middleware{log: slog.New(slog.DiscardHandler)}
	if p := m.problem(context.Background(), onceflow.Ref{}, errors.New("something new")); p.Status != http.StatusInternalServerError || p.Type != ProblemInternal {
		t.Errorf("unclassified: %+v", p)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	storeErr := &onceflow.Error{Outcome: onceflow.OutcomeIndeterminate, Op: "claim", Err: context.Canceled}
	if p := m.problem(gone, onceflow.Ref{}, storeErr); p.Title != "Request not processed" {
		t.Errorf("client gone: %+v", p)
	}
	if p := m.problem(context.Background(), onceflow.Ref{}, storeErr); p.Title != "Idempotency store unavailable" || p.Status != http.StatusServiceUnavailable {
		t.Errorf("store unavailable: %+v", p)
	}
}
