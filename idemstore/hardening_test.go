package idemstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"

	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// renewing says what a misbehaving store's Renew does.
type renewing int

const (
	renewHangs     renewing = iota // blocks, ignoring its context, until the test ends
	renewFailsFast                 // answers an indeterminate error at once
	renewIsLate                    // applies the renewal, then answers after the lease's deadline
)

func (r renewing) String() string {
	return [...]string{"hangs", "fails fast", "answers late"}[r]
}

// misbehavingStore passes everything to a real store but Renew, and notes
// when the confirming claim was sent, the lease it granted, and the
// deadline of every Renew's context.
type misbehavingStore struct {
	driver.Store
	timeout  time.Duration
	mode     renewing
	released chan struct{} // closed when the test ends: hung renewals return

	mu        sync.Mutex
	leaseEnd  time.Time // claim send time + the lease the reply granted
	deadlines []time.Time
}

func (s *misbehavingStore) CommandTimeout() time.Duration { return s.timeout }

func (s *misbehavingStore) ClaimStart(ctx context.Context, req driver.ClaimRequest) (driver.ClaimOutcome, error) {
	sent := time.Now()
	out, err := s.Store.ClaimStart(ctx, req)
	if a, ok := out.(driver.Acquired); ok {
		s.mu.Lock()
		s.leaseEnd = sent.Add(a.Record.LeaseRemaining())
		s.mu.Unlock()
	}
	return out, err
}

func (s *misbehavingStore) Renew(ctx context.Context, req driver.RenewRequest) (driver.RenewOutcome, error) {
	dl, ok := ctx.Deadline()
	s.mu.Lock()
	if !ok {
		dl = time.Time{}
	}
	s.deadlines = append(s.deadlines, dl)
	leaseEnd := s.leaseEnd
	s.mu.Unlock()
	indeterminate := &onceflow.Error{Outcome: onceflow.OutcomeIndeterminate, Op: "renew", Ref: req.Ref, Err: errors.New("no answer")}
	switch s.mode {
	case renewHangs:
		<-s.released
		return nil, indeterminate
	case renewFailsFast:
		return nil, indeterminate
	}
	out, err := s.Store.Renew(context.WithoutCancel(ctx), req)
	time.Sleep(time.Until(leaseEnd) + 20*time.Millisecond) // well past the deadline
	return out, err
}

// Hardening 1: whatever Renew does (hang, fail fast, answer late), the
// action's context is cancelled by the deadline, before the lease runs
// out, with ErrLeaseUnconfirmed; every Renew carries a context deadline no
// later than the lease; Execute does not wait for a hung renewal.
func TestLeaseDeadlineFiresWhateverRenewDoes(t *testing.T) {
	t.Parallel()
	const lease, timeout = 300 * time.Millisecond, 50 * time.Millisecond
	rs, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t), CommandTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []renewing{renewHangs, renewFailsFast, renewIsLate} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			store := &misbehavingStore{Store: rs, timeout: timeout, mode: mode, released: make(chan struct{})}
			t.Cleanup(func() { close(store.released) })
			exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: lease})
			if err != nil {
				t.Fatal(err)
			}
			margin := exec.Config().SafetyMargin
			f := storetest.NewFixture()
			var doneAt time.Time
			var cause error
			returned := make(chan error, 1)
			go func() {
				_, err := exec.Execute(context.Background(), request(f), func(ctx context.Context) ([]byte, error) {
					select {
					case <-ctx.Done():
						doneAt, cause = time.Now(), context.Cause(ctx)
					case <-time.After(3 * lease):
						return nil, errors.New("the action was never cancelled")
					}
					return nil, cause
				})
				returned <- err
			}()
			var err2 error
			select {
			case err2 = <-returned:
			case <-time.After(5 * lease):
				t.Fatal("Execute did not return: it waits for a renewal that hangs")
			}
			if !errors.Is(cause, idemstore.ErrLeaseUnconfirmed) || !errors.Is(err2, idemstore.ErrLeaseUnconfirmed) {
				t.Fatalf("cause %v, Execute %v; want ErrLeaseUnconfirmed", cause, err2)
			}
			store.mu.Lock()
			defer store.mu.Unlock()
			// The deadline is the lease end less the margin; allow half the
			// margin for the cancellation to reach the action.
			if late := doneAt.Sub(store.leaseEnd.Add(-margin)); late > margin/2 {
				t.Fatalf("cancelled %v after the deadline (lease end %v less the %v margin)", late, store.leaseEnd, margin)
			}
			if len(store.deadlines) == 0 {
				t.Fatal("no renewal was tried")
			}
			for i, dl := range store.deadlines {
				if dl.IsZero() || dl.After(store.leaseEnd) {
					t.Fatalf("renewal %d had context deadline %v, want one no later than the lease end %v", i, dl, store.leaseEnd)
				}
			}
		})
	}
}

// Hardening 1, with real faults: a real go-redis client (go-redis'
// default options, and the documented ContextTimeoutEnabled) whose network
// is black-holed mid-action. The action is cancelled with
// ErrLeaseUnconfirmed before leaseUntil by Redis' clock, and a competing
// executor, which takes over once the lease has run out, never starts its
// action before the first one's context is done.
func TestBlackholedRedisCancelsTheActionBeforeItsLeaseEnds(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, lease := range []time.Duration{300 * time.Millisecond, 3 * time.Second} {
		for _, documented := range []bool{false, true} {
			name := fmt.Sprintf("lease=%v/ContextTimeoutEnabled=%v", lease, documented)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				blackholeRun(t, srv.Addr(), lease, documented)
			})
		}
	}
}

func blackholeRun(t *testing.T, addr string, lease time.Duration, documented bool) {
	proxy := redistest.NewProxy(t, addr)
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: documented})
	t.Cleanup(func() { _ = viaProxy.Close() })
	direct := redistest.NewClient(t, addr)
	ns, timeout := redistest.Namespace(t), min(redisstore.DefaultCommandTimeout, lease/8)
	newExec := func(c redis.UniversalClient) (*redisstore.Store, *idemstore.Executor) {
		s, err := redisstore.New(redisstore.Config{Client: c, Namespace: ns, CommandTimeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		e, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: s, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		return s, e
	}
	first, firstExec := newExec(viaProxy)
	_, secondExec := newExec(direct)
	if err := first.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture()
	key := first.Key(f.Ref)

	running, firstDone := make(chan struct{}), make(chan struct{})
	var cause error
	var redisNow, leaseUntil int64
	firstReturned := make(chan struct{})
	go func() {
		defer close(firstReturned)
		_, _ = firstExec.Execute(context.Background(), request(f), func(ctx context.Context) ([]byte, error) {
			close(running)
			select {
			case <-ctx.Done():
			case <-time.After(lease + 5*time.Second):
				t.Error("the first action was never cancelled")
				<-ctx.Done()
			}
			cause = context.Cause(ctx)
			// Where Redis' clock is now, and the lease it holds.
			tm, err := direct.Time(context.Background()).Result()
			if err == nil {
				redisNow = tm.UnixMilli()
			}
			leaseUntil, _ = strconv.ParseInt(direct.HGet(context.Background(), key, "l").Val(), 10, 64) // leaseUntil
			close(firstDone)
			return nil, cause
		})
	}()
	<-running
	proxy.SetFault(redistest.BlackHole)

	// The competitor retries until it may run (an idempotent downstream,
	// so the takeover of the expired EXECUTING record runs the action).
	req := request(f)
	req.IdempotentDownstream = true
	var secondRan atomic.Bool
	deadline := time.Now().Add(lease + 10*time.Second)
	for !secondRan.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the competitor never ran")
		}
		_, err := secondExec.Execute(t.Context(), req, func(context.Context) ([]byte, error) {
			select {
			case <-firstDone:
			default:
				t.Error("the competitor's action started while the first one's context was not done")
			}
			secondRan.Store(true)
			return []byte("second"), nil
		})
		var ip *onceflow.Error
		switch {
		case err == nil:
		case errors.As(err, &ip):
			time.Sleep(min(max(ip.RetryAfter, time.Millisecond), 20*time.Millisecond))
		default:
			t.Fatalf("competitor: %v", err)
		}
	}
	<-firstDone
	if !errors.Is(cause, idemstore.ErrLeaseUnconfirmed) {
		t.Fatalf("the first action's cause = %v, want ErrLeaseUnconfirmed", cause)
	}
	if redisNow == 0 || leaseUntil == 0 || redisNow >= leaseUntil {
		t.Fatalf("the first action was cancelled at Redis time %d, its lease ran until %d: not before the lease ended", redisNow, leaseUntil)
	}
	proxy.SetFault(redistest.Pass)
	select {
	case <-firstReturned:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Execute never returned")
	}
}

// Hardening 2: the record of an attempt that dies mid-action outlives its
// lease, even with FailureRetention at its minimum (the lease): the next
// attempt, after the lease ran out, learns the effect may have happened
// and never runs blindly.
func TestCrashedAttemptsRecordOutlivesItsLease(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	cfg := idemstore.ExecutorConfig{Lease: lease, FailureRetention: lease}
	e, f := newEnv(t, cfg), storetest.NewFixture()
	// The first attempt's process dies once its action ran: no renewal,
	// completion or failure reaches the store any more.
	dying, exec := e.isolatedWith(t, cfg)
	_, err := exec.Execute(t.Context(), request(f), func(context.Context) ([]byte, error) {
		for _, m := range []storetest.Method{storetest.MethodRenew, storetest.MethodComplete, storetest.MethodFail, storetest.MethodInspect} {
			dying.InjectAlways(m, storetest.ErrorBeforeApply)
		}
		return []byte("charged"), nil
	})
	if !errors.Is(err, onceflow.OutcomeEffectUnknown) {
		t.Fatalf("the dying attempt: %v", err)
	}
	storetest.WaitLeaseExpired(t, e.store, f.Ref)
	var runs atomic.Int32
	_, err = e.exec.Execute(t.Context(), request(f), counted(&runs, "again", nil))
	var eu *onceflow.Error
	if !errors.As(err, &eu) || !eu.Recorded || runs.Load() != 0 {
		t.Fatalf("next attempt after the lease: err = %v, %d runs; want a recorded onceflow.Error and no run", err, runs.Load())
	}
}

// Hardening 3: an invocation of the same owner whose lease expired is
// dead. Its owner's next invocation takes over: from EXECUTING that is an
// uncertain takeover (Reconcile, IdempotentDownstream, else abandoned),
// with the rev bumped so the dead invocation is fenced; from CLAIMED a
// safe one. While the lease lives it is in progress, with the lease left.
func TestSameOwnerAfterItsLeaseExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	dead := func(t *testing.T, fused bool) (storetest.Fixture, onceflow.Owner, driver.Ownership, onceflow.Nonce) {
		f := storetest.NewFixture()
		f.Lease = 20 * time.Millisecond
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		var out driver.ClaimOutcome
		var err error
		if fused {
			out, err = e.store.ClaimStart(t.Context(), f.ClaimStart(owner, nonce))
		} else {
			out, err = e.store.Claim(t.Context(), f.Claim(owner))
		}
		if err != nil {
			t.Fatal(err)
		}
		storetest.WaitLeaseExpired(t, e.store, f.Ref)
		return f, owner, out.(driver.Acquired).Ownership, nonce
	}
	t.Run("EXECUTING, no hook: abandoned", func(t *testing.T) {
		f, owner, own, nonce := dead(t, true)
		req := request(f)
		req.Owner = owner
		var runs atomic.Int32
		_, err := e.exec.Execute(t.Context(), req, counted(&runs, "x", nil))
		var eu *onceflow.Error
		if !errors.As(err, &eu) || !eu.Recorded || runs.Load() != 0 {
			t.Fatalf("err = %v, %d runs; want a recorded onceflow.Error", err, runs.Load())
		}
		r := e.wantState(t, f.Ref, onceflow.StateAbandoned)
		if r.Owner != owner || r.Attempt != own.Attempt || r.Rev <= own.Rev {
			t.Fatalf("record %+v: same owner and attempt, rev bumped past %d", r, own.Rev)
		}
		// The dead invocation, were it to wake, is fenced.
		out, err := e.store.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: []byte("zombie"), TTL: time.Hour})
		if _, ok := out.(driver.Refused); !ok || err != nil {
			t.Fatalf("the dead invocation's complete: %T %v, want Refused", out, err)
		}
	})
	t.Run("EXECUTING, idempotent downstream: runs", func(t *testing.T) {
		f, owner, own, nonce := dead(t, true)
		req := request(f)
		req.Owner, req.IdempotentDownstream = owner, true
		res, err := e.exec.Execute(t.Context(), req, counted(new(atomic.Int32), "ok", nil))
		if err != nil || res.Outcome != onceflow.OutcomeRan || res.TookOver != onceflow.StateExecuting || !own.Fence().Less(res.Fence) {
			t.Fatalf("%+v, %v", res, err)
		}
		out, err := e.store.Renew(t.Context(), driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: time.Minute, Retention: time.Hour})
		if _, ok := out.(driver.Refused); !ok || err != nil {
			t.Fatalf("the dead invocation's renew: %T %v, want Refused", out, err)
		}
	})
	t.Run("CLAIMED: a safe takeover", func(t *testing.T) {
		f, owner, _, _ := dead(t, false)
		req := request(f)
		req.Owner = owner
		res, err := e.exec.Execute(t.Context(), req, counted(new(atomic.Int32), "ok", nil))
		if err != nil || res.Outcome != onceflow.OutcomeRan || res.TookOver != onceflow.StateClaimed {
			t.Fatalf("%+v, %v", res, err)
		}
	})
	t.Run("live lease: in progress with the lease left", func(t *testing.T) {
		f := storetest.NewFixture()
		owner := onceflow.NewOwner()
		if _, err := e.store.ClaimStart(t.Context(), f.ClaimStart(owner, onceflow.NewNonce())); err != nil {
			t.Fatal(err)
		}
		req := request(f)
		req.Owner = owner
		_, err := e.exec.Execute(t.Context(), req, counted(new(atomic.Int32), "x", nil))
		var ip *onceflow.Error
		if !errors.As(err, &ip) || !ip.SameOwner || ip.RetryAfter < f.Lease/2 {
			t.Fatalf("err = %v, want in progress by the same owner with about %v left", err, f.Lease)
		}
	})
}

// Hardening 5: a response the store cannot keep (over its size limit)
// makes the record ABANDONED at once: the effect happened, its result is
// lost, and nobody should wait for the lease to learn it.
func TestOversizedResponseIsAbandonedAtOnce(t *testing.T) {
	t.Parallel()
	rs, err := redisstore.New(redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t), MaxResponseBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: rs})
	if err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture()
	_, err = exec.Execute(t.Context(), request(f), counted(new(atomic.Int32), strings.Repeat("x", 17), nil))
	var eu *onceflow.Error
	if !errors.As(err, &eu) || !eu.Recorded || !errors.Is(err, onceflow.OutcomeInvalid) {
		t.Fatalf("err = %v, want a recorded onceflow.Error caused by the size limit", err)
	}
	obs, err := rs.Inspect(t.Context(), f.Ref)
	if err != nil || obs.Record.State != onceflow.StateAbandoned || !strings.Contains(obs.Record.Reason, "cannot be stored") {
		t.Fatalf("record %+v, %v; want ABANDONED saying the response cannot be stored", obs.Record, err)
	}
}
