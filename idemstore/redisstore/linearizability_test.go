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
// or Unavailable): it may or may not have applied. A bounded call
// (claim+start, complete, fail: bound.go) that failed so applied by its
// deadline or never: its operation returns at its deadline.
type linOutput struct {
	unknown bool
	summary string
}

// linCallTimeout is each call's deadline, shorter than the store's
// command timeout, so that a bounded call's deadline is the test's.
const linCallTimeout = 250 * time.Millisecond

// linLateBy is how long the proxy's DelayScripts holds a script: past
// linCallTimeout, so that the script reaches Redis after its deadline.
const linLateBy = 400 * time.Millisecond

// bounded reports whether the store bounds calls of kind by Redis' clock.
func (k linKind) bounded() bool {
	return k == linClaimStart || k == linComplete || k == linFail
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
// one partition per record. A call whose outcome is unknown leaves the
// model either as it applied it or as it was: it applied, or it never
// did (a call that linearizes at the end of a history, as an unbounded
// one may, has no effect on any answer either way).
var linModel = (&porcupine.NondeterministicModel{
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
	Init: func() []any { return []any{linState{m: refmodel.New()}} },
	Step: func(state, input, output any) []any {
		in := input.(linInput)
		st := state.(linState)
		m := st.m.Clone()
		got := in.apply(m)
		out := output.(linOutput)
		next := linState{m: m, key: summarise(m.Inspect(linNow, in.ref))}
		switch {
		case out.unknown:
			return []any{next, st}
		case summarise(got) == out.summary:
			return []any{next}
		}
		return nil
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
}).ToModel()

// linHistory records a history of store calls from concurrent clients.
// Its timestamps are nanoseconds on the monotonic clock since base, so
// that a deadline is a moment of the history too.
type linHistory struct {
	mu    sync.Mutex
	ops   []porcupine.Operation
	base  time.Time
	clock atomic.Int64
}

func newLinHistory() *linHistory { return &linHistory{base: time.Now()} }

// now is a strictly increasing timestamp, so that calls and returns are
// totally ordered as the clients saw them.
func (h *linHistory) now() int64 {
	t := time.Since(h.base).Nanoseconds()
	for {
		last := h.clock.Load()
		if t <= last {
			t = last + 1
		}
		if h.clock.CompareAndSwap(last, t) {
			return t
		}
	}
}

// at is the timestamp of the moment t.
func (h *linHistory) at(t time.Time) int64 { return t.Sub(h.base).Nanoseconds() }

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
	ctx, cancel := context.WithTimeout(ctx, linCallTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
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
		// It may have applied: a bounded call by its deadline, any
		// other anywhere after its call.
		out = linOutput{unknown: true, summary: err.Error()}
		ret = math.MaxInt64
		if in.kind.bounded() {
			ret = max(c.hist.at(deadline), call+1)
		}
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

// linFaults are the faults a history is recorded under.
type linFaults int

const (
	linNoFaults linFaults = iota
	// linAllFaults: replies dropped, calls reset, and calls delivered
	// late, each now and then.
	linAllFaults
	// linLateOnly: calls delivered late, a quarter of the time.
	linLateOnly
)

// linRun records a history of clients×perClient calls over records
// records, with the proxy's faults flipping under it, and returns it.
func linRun(t *testing.T, s func() *redisstore.Store, proxy *redistest.Proxy, clients, perClient, records int, mode linFaults) []porcupine.Operation {
	t.Helper()
	refs := &linRecords{recs: make([]storetest.Fixture, records)}
	for i := range refs.recs {
		refs.recs[i] = storetest.NewFixture()
	}
	hist := newLinHistory()
	proxy.SetDelay(linLateBy)
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
			if mode == linNoFaults {
				continue
			}
			if mode == linLateOnly {
				f := redistest.Pass
				if rng.IntN(4) == 0 {
					f = redistest.DelayScripts
				}
				proxy.SetFault(f)
				continue
			}
			switch r := rng.IntN(20); {
			case r < 1:
				proxy.SetFault(redistest.DropScriptReplies)
			case r < 2:
				proxy.SetFault(redistest.ResetScripts)
			case r < 3:
				proxy.SetFault(redistest.DelayScripts)
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
	seen := map[*redisstore.Store]bool{}
	var unbounded int64
	for _, c := range cs {
		if !seen[c.store] {
			seen[c.store] = true
			unbounded += redisstore.UnboundedCalls(c.store)
		}
	}
	if unbounded != 0 {
		// The history returns their failures at their deadline: that
		// holds of bounded calls only.
		t.Fatalf("%d claims or transitions went unbounded", unbounded)
	}
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

// TestLinearizabilityCatchesALateClaim: calls the proxy delivers after
// their deadline, a quarter of the time; on intact stores the history is
// linearizable with every failed bounded call held to its deadline, and
// on stores whose claim and transition scripts lack the bound's check
// (so that late calls still apply) the checker reports one that is not.
func TestLinearizabilityCatchesALateClaim(t *testing.T) {
	t.Parallel()
	for _, broken := range []bool{false, true} {
		name, want := "intact", porcupine.Ok
		if broken {
			name, want = "without the check", porcupine.Illegal
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stores, proxy, _ := linStores(t)
			mk := func() *redisstore.Store {
				s := stores()
				if broken {
					redisstore.MutateScript(s, "claim", boundCheck, noBoundCkck)
					redisstore.MutateScript(s, "transition", boundCheck, noBoundCkck)
					if err := s.LoadScripts(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				return s
			}
			// A late call that applied is caught only when a later call
			// saw its effect before the model could place it: a history
			// of the broken stores is not linearizable about four times
			// in five, so they get up to six.
			tries := 1
			if broken {
				tries = 6
			}
			var res porcupine.CheckResult
			for range tries {
				history := linRun(t, mk, proxy, 16, 80, 6, linLateOnly)
				if res = linCheck(t, history, t.TempDir()); res == want {
					return
				}
			}
			t.Fatalf("the history is %s, want %s (%d late deliveries)", res, want, proxy.LateCalls())
		})
	}
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
	history := linRun(t, stores, proxy, clients, per, 24, linAllFaults)
	unknown := 0
	for _, op := range history {
		if op.Output.(linOutput).unknown {
			unknown++
		}
	}
	t.Logf("%d calls from %d clients, %d with an unknown outcome (faults), %d dropped replies, %d resets, %d late deliveries",
		len(history), clients, unknown, proxy.DroppedReplies(), proxy.ResetCalls(), proxy.LateCalls())
	// Kept after the test, for the developer to open.
	if res := linCheck(t, history, os.TempDir()); res != porcupine.Ok {
		t.Fatalf("the history is %s", res)
	}
}

// TestPipelinedHistoriesAreLinearizable: the same workload from 16
// clients that share 4 stores, so that their claims and transitions ride
// the auto-pipeliner together, through a proxy that also holds script
// calls past their deadline before it delivers them (late pipelined
// calls), drops replies and resets calls; the stores' wall clocks are an
// hour or a second behind or ahead of Redis'. Every failed claim+start,
// complete and fail returns at its deadline: it applied by then or never.
func TestPipelinedHistoriesAreLinearizable(t *testing.T) {
	t.Parallel()
	stores, proxy, _ := linStores(t)
	shared := make([]*redisstore.Store, 4)
	for i, skew := range []time.Duration{-time.Hour, -time.Second, time.Second, time.Hour} {
		shared[i] = stores()
		redisstore.SetWallClock(shared[i], func() time.Time { return time.Now().Add(skew) })
		if err := shared[i].LoadScripts(t.Context()); err != nil { // its first reading, under that clock
			t.Fatal(err)
		}
	}
	var next atomic.Int64
	clients, per := linSize()
	history := linRun(t, func() *redisstore.Store { return shared[next.Add(1)%int64(len(shared))] }, proxy, clients, per, 24, linAllFaults)
	var pipelined int64
	for _, s := range shared {
		pipelined += redisstore.PipelinedScripts(s)
	}
	t.Logf("%d calls from %d clients on %d stores, %d scripts pipelined, %d late deliveries, %d dropped replies, %d resets",
		len(history), clients, len(shared), pipelined, proxy.LateCalls(), proxy.DroppedReplies(), proxy.ResetCalls())
	if pipelined == 0 {
		t.Fatal("no script rode the auto-pipeliner")
	}
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
	history := linRun(t, broken, proxy, 16, 80, 24, linNoFaults)
	if res := linCheck(t, history, t.TempDir()); res != porcupine.Illegal {
		t.Fatalf("the history of a script without its revision check is %s, want %s", res, porcupine.Illegal)
	}
}
