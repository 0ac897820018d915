package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// renewHook holds the first RENEW call until released and records how
// many leases each RENEW call carried.
type renewHook struct {
	sha     string
	hold    chan struct{} // closed to let the first call go
	entered chan struct{} // closed when the first call arrived
	once    sync.Once
	mu      sync.Mutex
	sizes   []int
}

func (h *renewHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *renewHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *renewHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 2 && args[0] == cmdEvalSha && args[1] == h.sha {
			h.mu.Lock()
			h.sizes = append(h.sizes, args[2].(int))
			h.mu.Unlock()
			h.once.Do(func() {
				close(h.entered)
				<-h.hold
			})
		}
		return next(ctx, cmd)
	}
}

func (h *renewHook) callSizes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.sizes...)
}

// lease is one EXECUTING record and the request that renews it.
type testLease struct {
	key string
	req driver.RenewRequest
}

// startLeases starts n operations, each EXECUTING under a lease of its own.
func startLeases(t *testing.T, s *Store, n int) []testLease {
	t.Helper()
	out := make([]testLease, n)
	for i := range out {
		f := storetest.NewFixture()
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		if _, err := s.ClaimStart(t.Context(), f.ClaimStart(owner, nonce)); err != nil {
			t.Fatal(err)
		}
		out[i] = testLease{key: s.Key(f.Ref), req: driver.RenewRequest{
			Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: 2 * f.Lease, Retention: f.TTL,
		}}
	}
	return out
}

// renewTogether renews first, holds its call in flight until every other
// request waits for it, then lets it go: the others go as one call.
func renewTogether(t *testing.T, s *Store, h *renewHook, first testLease, rest []driver.RenewRequest, ctxs []context.Context) ([]driver.RenewOutcome, []error) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := s.Renew(t.Context(), first.req); err != nil {
			t.Error(err)
		}
	})
	<-h.entered
	outs, errs := make([]driver.RenewOutcome, len(rest)), make([]error, len(rest))
	for i, req := range rest {
		ctx := t.Context()
		if ctxs != nil && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		wg.Go(func() { outs[i], errs[i] = s.Renew(ctx, req) })
	}
	redistest.WaitFor(t, 10*time.Second, func() bool {
		s.renewals.mu.Lock()
		defer s.renewals.mu.Unlock()
		return len(s.renewals.queue) == len(rest)
	}, "the renewals did not all wait for the one in flight")
	close(h.hold)
	wg.Wait()
	return outs, errs
}

func newHookedStore(t *testing.T) (*Store, *renewHook, *redis.Client) {
	t.Helper()
	client := redistest.NewClient(t, redistest.Addr(t))
	h := &renewHook{sha: redis7Scripts.renew.hash.(string), hold: make(chan struct{}), entered: make(chan struct{})}
	client.AddHook(h)
	s, err := New(Config{Client: client, Namespace: redistest.Namespace(t), CommandTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !s.renewals.on {
		t.Fatal("a *redis.Client with ContextTimeoutEnabled does not batch renewals")
	}
	return s, h, client
}

// TestRenewalsThatWaitGoAsOneCallEachFencedOnItsOwn: renewals that arrive
// while one is in flight go as one script call, and each lease in it is
// fenced on its own: the holder's leases are renewed, a renewal by
// another invocation (another nonce) is refused, a missing record is
// reported missing, and a corrupt record is refused and left as it was,
// exactly as if each had been sent alone.
func TestRenewalsThatWaitGoAsOneCallEachFencedOnItsOwn(t *testing.T) {
	t.Parallel()
	s, h, client := newHookedStore(t)
	ctx := t.Context()
	ls := startLeases(t, s, 5)
	stranger := ls[2].req
	stranger.Nonce = onceflow.NewNonce()
	gone := storetest.NewFixture()
	missing := driver.RenewRequest{Ref: gone.Ref, Operation: gone.Operation, Owner: onceflow.NewOwner(), Nonce: onceflow.NewNonce(), Lease: time.Minute, Retention: time.Hour}
	if err := setField(ctx, client, ls[3].key, "fp", "not-a-fingerprint"); err != nil {
		t.Fatal(err)
	}
	corruptBefore := client.HGetAll(ctx, ls[3].key).Val()
	before := map[int]string{}
	for _, i := range []int{1, 2, 4} {
		before[i], _, _ = getField(ctx, client, ls[i].key, "leaseUntil")
	}

	outs, errs := renewTogether(t, s, h, ls[0], []driver.RenewRequest{ls[1].req, stranger, missing, ls[3].req, ls[4].req}, nil)

	if got := h.callSizes(); len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Fatalf("RENEW calls carried %v leases, want [1 5]: the five that waited go as one call", got)
	}
	for _, i := range []int{0, 4} { // ls[1] and ls[4]
		r, ok := outs[i].(driver.Renewed)
		if errs[i] != nil || !ok {
			t.Fatalf("renewal %d: %v, %v; want Renewed", i, outs[i], errs[i])
		}
		if r.Record.Owner != []driver.RenewRequest{ls[1].req, ls[4].req}[i/4].Owner {
			t.Errorf("renewal %d answered another lease's record: %+v", i, r.Record)
		}
	}
	for _, i := range []int{1, 4} {
		if got, _, _ := getField(ctx, client, ls[i].key, "leaseUntil"); got == before[i] {
			t.Errorf("lease %d: leaseUntil is still %s, want it renewed", i, got)
		}
	}
	if r, ok := outs[1].(driver.Refused); errs[1] != nil || !ok || r.Reason != driver.RefusedNonce {
		t.Errorf("another invocation's renewal: %#v, %v; want Refused (nonce mismatch)", outs[1], errs[1])
	}
	if got, _, _ := getField(ctx, client, ls[2].key, "leaseUntil"); got != before[2] {
		t.Errorf("a refused renewal moved leaseUntil from %s to %s", before[2], got)
	}
	if _, ok := outs[2].(driver.Missing); errs[2] != nil || !ok {
		t.Errorf("renewal of a missing record: %#v, %v; want Missing", outs[2], errs[2])
	}
	var corrupt *onceflow.Error
	if !errors.As(errs[3], &corrupt) || corrupt.Field != "fp" {
		t.Errorf("renewal of a record with a corrupt fp: %v; want an OutcomeCorrupt error naming fp", errs[3])
	}
	if got := client.HGetAll(ctx, ls[3].key).Val(); !equalMaps(got, corruptBefore) {
		t.Errorf("the corrupt record changed: %v, was %v", got, corruptBefore)
	}
}

// TestARenewalOfAKeyThatIsNotAHashFailsAloneInABatch: a key that is not a
// hash makes Redis fail the whole script (WRONGTYPE); the store then sends
// each renewal of that call on its own, so the others are renewed and
// only that one is refused as corrupt.
func TestARenewalOfAKeyThatIsNotAHashFailsAloneInABatch(t *testing.T) {
	t.Parallel()
	s, h, client := newHookedStore(t)
	ls := startLeases(t, s, 4)
	if err := client.Del(t.Context(), ls[2].key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.Set(t.Context(), ls[2].key, "a string", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	outs, errs := renewTogether(t, s, h, ls[0], []driver.RenewRequest{ls[1].req, ls[2].req, ls[3].req}, nil)
	if got := h.callSizes(); len(got) != 5 || got[1] != 3 {
		t.Fatalf("RENEW calls carried %v leases, want [1 3 1 1 1]: the batch, then each on its own", got)
	}
	for _, i := range []int{0, 2} {
		if _, ok := outs[i].(driver.Renewed); errs[i] != nil || !ok {
			t.Errorf("renewal %d: %#v, %v; want Renewed", i, outs[i], errs[i])
		}
	}
	var corrupt *onceflow.Error
	if !errors.As(errs[1], &corrupt) || corrupt.Field != "(key)" {
		t.Errorf("renewal of a key that is no hash: %v; want an OutcomeCorrupt error naming the key", errs[1])
	}
	if got := client.Get(t.Context(), ls[2].key).Val(); got != "a string" {
		t.Errorf("the key that is no hash changed: %q", got)
	}
}

// TestARenewalThatGivesUpWhileWaitingIsNotSent: a renewal whose context
// ends while it waits for the call in flight returns at once with an
// OutcomeIndeterminate error, and is left out of the next call.
func TestARenewalThatGivesUpWhileWaitingIsNotSent(t *testing.T) {
	t.Parallel()
	s, h, _ := newHookedStore(t)
	ls := startLeases(t, s, 3)
	gaveUp, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		if _, err := s.Renew(t.Context(), ls[0].req); err != nil {
			t.Error(err)
		}
	})
	<-h.entered
	wg.Go(func() { _, err = s.Renew(gaveUp, ls[1].req) })
	redistest.WaitFor(t, 10*time.Second, func() bool {
		s.renewals.mu.Lock()
		defer s.renewals.mu.Unlock()
		return len(s.renewals.queue) == 1
	}, "the renewal did not wait")
	cancel()
	redistest.WaitFor(t, 10*time.Second, func() bool {
		s.renewals.mu.Lock()
		defer s.renewals.mu.Unlock()
		return len(s.renewals.queue) == 0
	}, "the renewal that gave up is still queued")
	var out driver.RenewOutcome
	var err2 error
	wg.Go(func() { out, err2 = s.Renew(t.Context(), ls[2].req) })
	redistest.WaitFor(t, 10*time.Second, func() bool {
		s.renewals.mu.Lock()
		defer s.renewals.mu.Unlock()
		return len(s.renewals.queue) == 1
	}, "the last renewal did not wait")
	close(h.hold)
	wg.Wait()
	var se *onceflow.Error
	if !errors.As(err, &se) || se.Outcome != onceflow.OutcomeIndeterminate || !errors.Is(err, context.Canceled) {
		t.Errorf("the renewal that gave up: %v; want an OutcomeIndeterminate error of context.Canceled", err)
	}
	if _, ok := out.(driver.Renewed); err2 != nil || !ok {
		t.Errorf("the renewal after it: %#v, %v; want Renewed", out, err2)
	}
	if got := h.callSizes(); len(got) != 2 || got[1] != 1 {
		t.Errorf("RENEW calls carried %v leases, want [1 1]: the one that gave up is not sent", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
