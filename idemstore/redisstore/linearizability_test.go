package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/refmodel"
)

// linKind is a store operation of a recorded history.
type linKind string

const (
	linClaimStart linKind = "claim+start"
	linComplete   linKind = "complete"
	linFail       linKind = "fail"
	linRenew      linKind = "renew"
	linInspect    linKind = "inspect"
	linResolve    linKind = "resolve"
)

// linInput is one call: the request of its kind.
type linInput struct {
	kind    linKind
	ref     onceflow.Ref
	claim   driver.ClaimRequest
	own     driver.Ownership
	nonce   onceflow.Nonce
	target  onceflow.State
	resp    []byte
	resolve driver.ResolveRequest
}

// linOutput is what the call answered, summarised to what the model
// decides (not the clocks); unknown when the call failed (Indeterminate
// or Unavailable): it may or may not have applied.
type linOutput struct {
	unknown bool
	summary string
}

// linLease keeps every lease alive for the whole history, so that the
// model needs no clock.
const linLease = 10 * time.Minute

// linNow is the model's constant clock.
var linNow = time.UnixMilli(1_700_000_000_000)

// summarise reduces an outcome to the fields the state machine decides.
func summarise(v any) string {
	rec := func(r onceflow.Record) string {
		return fmt.Sprintf("%s owner=%.8s attempt=%d rev=%d nonce=%.8s", r.State, r.Owner, r.Attempt, r.Rev, r.Nonce)
	}
	switch o := v.(type) {
	case driver.Acquired:
		return fmt.Sprintf("acquired %s", rec(o.Record))
	case driver.TakenOver:
		return fmt.Sprintf("taken over from %s (%v) %s", o.From, o.EffectUnknown, rec(o.Record))
	case driver.ReplayedAcquire:
		return fmt.Sprintf("replayed acquire attempt=%d rev=%d", o.Ownership.Attempt, o.Ownership.Rev)
	case driver.CompletedReplay:
		return fmt.Sprintf("completed replay %q", o.Record.Response)
	case driver.InProgress:
		return "in progress"
	case driver.AwaitingDecision:
		return "awaiting decision"
	case driver.OperationFailed:
		return "operation failed"
	case driver.Transitioned:
		return fmt.Sprintf("transitioned %s attempt=%d rev=%d", o.Record.State, o.Ownership.Attempt, o.Ownership.Rev)
	case driver.AlreadyTransitioned:
		return fmt.Sprintf("already %s", o.Record.State)
	case driver.Refused:
		return fmt.Sprintf("refused %s", o.Reason)
	case driver.Missing:
		return "missing"
	case driver.Renewed:
		return "renewed"
	case driver.Observation:
		if !o.Found {
			return "not found"
		}
		return fmt.Sprintf("found %s resp=%q", rec(o.Record), o.Record.Response)
	}
	return fmt.Sprintf("unexpected %T", v)
}

// apply runs in on the model.
func (in linInput) apply(m *refmodel.Model) any {
	switch in.kind {
	case linClaimStart:
		return m.Claim(linNow, in.claim, in.nonce)
	case linComplete:
		return m.Transition(linNow, in.own, onceflow.StateCompleted, "EXECUTING", in.nonce, 0, in.resp, "")
	case linFail:
		return m.Transition(linNow, in.own, in.target, "CLAIMED,EXECUTING", in.nonce, 0, nil, "failed")
	case linRenew:
		return m.Renew(linNow, driver.RenewRequest{Ref: in.ref, Owner: in.own.Owner, Operation: in.own.Operation, Nonce: in.nonce, Lease: linLease})
	case linInspect:
		return m.Inspect(linNow, in.ref)
	case linResolve:
		return m.Resolve(linNow, in.resolve)
	}
	panic("unknown kind " + in.kind)
}

// linState is a state of the model: the model (of one record, a
// partition) and what distinguishes it, the record's summary.
type linState struct {
	m   *refmodel.Model
	key string
}

// linModel is the sequential specification: refmodel's state machine,
// one partition per record.
var linModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byRef := map[onceflow.Ref][]porcupine.Operation{}
		var order []onceflow.Ref
		for _, op := range history {
			ref := op.Input.(linInput).ref
			if _, ok := byRef[ref]; !ok {
				order = append(order, ref)
			}
			byRef[ref] = append(byRef[ref], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, ref := range order {
			out = append(out, byRef[ref])
		}
		return out
	},
	Init: func() any { return linState{m: refmodel.New()} },
	Step: func(state, input, output any) (bool, any) {
		in := input.(linInput)
		m := state.(linState).m.Clone()
		got := in.apply(m)
		out := output.(linOutput)
		return out.unknown || summarise(got) == out.summary, linState{m: m, key: summarise(m.Inspect(linNow, in.ref))}
	},
	Equal: func(a, b any) bool { return a.(linState).key == b.(linState).key },
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(state.(linState).key))
		return h.Sum64()
	},
	DescribeState: func(state any) string { return state.(linState).key },
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		res := out.summary
		if out.unknown {
			res = "unknown: " + res
		}
		return fmt.Sprintf("%s %.8s → %s", in.kind, in.own.Owner, res)
	},
}

// linHistory records a history of store calls from concurrent clients.
type linHistory struct {
	mu    sync.Mutex
	ops   []porcupine.Operation
	clock atomic.Int64
}

// now is a strictly increasing timestamp, so that calls and returns are
// totally ordered as the clients saw them.
func (h *linHistory) now() int64 { return h.clock.Add(1) }

func (h *linHistory) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// linClient is one client's view: the ownerships it holds, by record.
type linClient struct {
	id    int
	store *redisstore.Store
	hist  *linHistory
	rng   *rand.Rand
	held  map[onceflow.Ref]linHeld
}

type linHeld struct {
	own   driver.Ownership
	nonce onceflow.Nonce
}

// call sends in to the store and records it.
func (c *linClient) call(ctx context.Context, in linInput) any {
	call := c.hist.now()
	var v any
	var err error
	switch in.kind {
	case linClaimStart:
		v, err = c.store.ClaimStart(ctx, in.claim)
	case linComplete:
		v, err = c.store.Complete(ctx, driver.CompleteRequest{Ownership: in.own, Nonce: in.nonce, Response: in.resp, TTL: time.Hour})
	case linFail:
		v, err = c.store.Fail(ctx, driver.FailRequest{Ownership: in.own, Nonce: in.nonce, Target: in.target, Reason: "failed", TTL: time.Hour})
	case linRenew:
		v, err = c.store.Renew(ctx, driver.RenewRequest{Ref: in.ref, Owner: in.own.Owner, Operation: in.own.Operation, Nonce: in.nonce,
			Lease: linLease, Retention: time.Hour})
	case linInspect:
		v, err = c.store.Inspect(ctx, in.ref)
	case linResolve:
		v, err = c.store.Resolve(ctx, in.resolve)
	}
	ret := c.hist.now()
	out := linOutput{}
	switch {
	case errors.Is(err, onceflow.OutcomeIndeterminate) || errors.Is(err, onceflow.OutcomeStoreUnavailable):
		// It may have applied: it may linearize anywhere after its call.
		out = linOutput{unknown: true, summary: err.Error()}
		ret = math.MaxInt64
	case err != nil:
		// Any other error (a reply that does not decode) is an answer
		// the state machine never gives.
		out.summary = "error: " + err.Error()
	default:
		out.summary = summarise(v)
	}
	c.hist.add(porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
	if err != nil {
		return nil
	}
	return v
}

// linRecords are the records the clients share; one is replaced by a
// fresh one now and then, so that the history keeps reaching every state.
type linRecords struct {
	mu   sync.Mutex
	recs []storetest.Fixture
}

func (r *linRecords) pick(rng *rand.Rand) storetest.Fixture {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := rng.IntN(len(r.recs))
	if rng.IntN(50) == 0 {
		r.recs[i] = storetest.NewFixture()
	}
	return r.recs[i]
}

// step makes one random call on one of refs.
func (c *linClient) step(ctx context.Context, refs *linRecords) {
	f := refs.pick(c.rng)
	h, holds := c.held[f.Ref]
	switch r := c.rng.IntN(10); {
	case holds && r < 4:
		resp := []byte("resp-" + strconv.Itoa(c.id) + "-" + strconv.Itoa(c.rng.IntN(1000)))
		in := linInput{kind: linComplete, ref: f.Ref, own: h.own, nonce: h.nonce, resp: resp}
		stale := c.rng.IntN(4) == 0
		if stale {
			in.own.Rev++ // a revision the record does not have: refused, unless the script forgets the check
		}
		c.call(ctx, in)
		if !stale {
			delete(c.held, f.Ref)
		}
	case holds && r < 6:
		target := onceflow.StateFailedRetryable
		if c.rng.IntN(2) == 0 {
			target = onceflow.StateAbandoned
		}
		c.call(ctx, linInput{kind: linFail, ref: f.Ref, own: h.own, nonce: h.nonce, target: target})
		delete(c.held, f.Ref)
	case holds && r < 8:
		c.call(ctx, linInput{kind: linRenew, ref: f.Ref, own: h.own, nonce: h.nonce})
	case holds || r < 3:
		v := c.call(ctx, linInput{kind: linInspect, ref: f.Ref})
		obs, ok := v.(driver.Observation)
		if ok && obs.Found && obs.Record.State == onceflow.StateAbandoned {
			target := onceflow.StateCompleted
			if c.rng.IntN(2) == 0 {
				target = onceflow.StateFailedRetryable
			}
			c.call(ctx, linInput{kind: linResolve, ref: f.Ref, resolve: driver.ResolveRequest{Ref: f.Ref, Attempt: obs.Record.Attempt,
				Rev: obs.Record.Rev, Target: target, Response: []byte("resolved"), Codec: f.Codec, Policy: f.Policy, Reason: "operator",
				TTL: time.Hour}})
		}
	default:
		req := f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())
		req.Lease = linLease
		v := c.call(ctx, linInput{kind: linClaimStart, ref: f.Ref, claim: req, nonce: req.Nonce})
		switch o := v.(type) {
		case driver.Acquired:
			c.held[f.Ref] = linHeld{own: o.Ownership, nonce: req.Nonce}
		case driver.TakenOver:
			c.held[f.Ref] = linHeld{own: o.Ownership, nonce: req.Nonce}
		}
	}
}

// linRun records a history of clients×perClient calls over records
// records, with the proxy's faults flipping under it, and returns it.
func linRun(t *testing.T, s func() *redisstore.Store, proxy *redistest.Proxy, clients, perClient, records int, faulty bool) []porcupine.Operation {
	t.Helper()
	refs := &linRecords{recs: make([]storetest.Fixture, records)}
	for i := range refs.recs {
		refs.recs[i] = storetest.NewFixture()
	}
	hist := &linHistory{}
	// The stores first: their LoadScripts must not meet a fault.
	cs := make([]*linClient, clients)
	for id := range cs {
		cs[id] = &linClient{id: id, store: s(), hist: hist, rng: rand.New(rand.NewPCG(uint64(id), 7)), held: map[onceflow.Ref]linHeld{}}
	}
	stopFaults := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopFaults:
				proxy.SetFault(redistest.Pass)
				return
			case <-t.C:
			}
			if !faulty {
				continue
			}
			switch r := rng.IntN(20); {
			case r < 1:
				proxy.SetFault(redistest.DropScriptReplies)
			case r < 2:
				proxy.SetFault(redistest.ResetScripts)
			default:
				proxy.SetFault(redistest.Pass)
			}
		}
	})
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for range perClient {
				c.step(context.Background(), refs)
			}
		})
	}
	wg.Wait()
	close(stopFaults)
	faults.Wait()
	return hist.ops
}

// linCheck checks a history; a history that is not linearizable is
// written into dir as porcupine's HTML visualisation, named in the log.
func linCheck(t *testing.T, history []porcupine.Operation, dir string) porcupine.CheckResult {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(linModel, history, time.Minute)
	if res != porcupine.Ok {
		file := filepath.Join(dir, sanitizeFileName(fmt.Sprintf("onceflow-linearizability-%s-%d.html", t.Name(), time.Now().UnixNano())))
		if err := porcupine.VisualizePath(linModel, info, file); err != nil {
			t.Logf("visualise the history: %v", err)
		} else {
			t.Logf("the history (%d calls) is %s: open %s", len(history), res, file)
		}
	}
	return res
}

func sanitizeFileName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '/' || c == ' ' {
			b[i] = '_'
		}
	}
	return string(b)
}

// linStores returns a function that makes a store through proxy (no
// go-redis retries, so that each call reaches Redis at most once), and
// the proxy.
func linStores(t *testing.T) (func() *redisstore.Store, *redistest.Proxy, string) {
	t.Helper()
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	ns := redistest.Namespace(t)
	return func() *redisstore.Store {
		c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		s := newStore(t, redisstore.Config{Client: c, Namespace: ns, CommandTimeout: 2 * time.Second})
		if err := s.LoadScripts(t.Context()); err != nil {
			t.Fatal(err)
		}
		return s
	}, proxy, ns
}

// linSize is the history's size: 16 clients, and 40 calls each by
// default; ONCEFLOW_LINEARIZABILITY=long makes it 700 each (11,200 calls).
func linSize() (clients, perClient int) {
	if os.Getenv("ONCEFLOW_LINEARIZABILITY") == "long" {
		return 16, 700
	}
	return 16, 40
}

// TestHistoriesAreLinearizable: 16 clients call claim+start, complete
// (some with a stale revision), fail, renew, inspect and resolve on a few
// shared records through a proxy that drops replies and resets
// connections; the history, with every failed call's outcome unknown,
// is linearizable against refmodel's state machine (porcupine).
func TestHistoriesAreLinearizable(t *testing.T) {
	t.Parallel()
	stores, proxy, _ := linStores(t)
	clients, per := linSize()
	history := linRun(t, stores, proxy, clients, per, 24, true)
	unknown := 0
	for _, op := range history {
		if op.Output.(linOutput).unknown {
			unknown++
		}
	}
	t.Logf("%d calls from %d clients, %d with an unknown outcome (faults), %d dropped replies, %d resets",
		len(history), clients, unknown, proxy.DroppedReplies(), proxy.ResetCalls())
	// Kept after the test, for the developer to open.
	if res := linCheck(t, history, os.TempDir()); res != porcupine.Ok {
		t.Fatalf("the history is %s", res)
	}
}

// TestLinearizabilityCatchesABrokenScript: the same workload, without
// faults (a lost reply would hide the broken answer it carried), on stores
// whose transition script forgets to check the revision; the checker
// reports the history not linearizable (and writes its visualisation).
// The script checks the revision in two places: its fast path (a complete
// by the record's own invocation) and the full path; both are broken.
func TestLinearizabilityCatchesABrokenScript(t *testing.T) {
	t.Parallel()
	stores, proxy, _ := linStores(t)
	broken := func() *redisstore.Store {
		s := stores()
		redisstore.MutateScript(s, "transition",
			"if state == 'EXECUTING' and sum == '' and tonumber(mrev) == rev and", "if state == 'EXECUTING' and sum == '' and",
			"if tonumber(r.rev) ~= rev then return", "if false then return")
		return s
	}
	history := linRun(t, broken, proxy, 16, 80, 24, false)
	if res := linCheck(t, history, t.TempDir()); res != porcupine.Illegal {
		t.Fatalf("the history of a script without its revision check is %s, want %s", res, porcupine.Illegal)
	}
}
