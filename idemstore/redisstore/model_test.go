package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"

	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/refmodel"
)

// universe is the small world one sequence plays in: few refs, owners,
// operations and nonces, so that sequences collide often.
type universe struct {
	refs   []onceflow.Ref
	owners []onceflow.Owner
	ops    []onceflow.OperationID
	fps    []onceflow.Fingerprint
	nonces []onceflow.Nonce
	// known is the last ownership each owner was told it has, per ref.
	known map[onceflow.Ref]map[onceflow.Owner]driver.Ownership
}

func newUniverse() *universe {
	u := &universe{known: map[onceflow.Ref]map[onceflow.Owner]driver.Ownership{}}
	for range 2 {
		u.refs = append(u.refs, storetest.NewFixture().Ref)
	}
	for range 3 {
		u.owners = append(u.owners, onceflow.NewOwner())
	}
	for range 4 {
		u.nonces = append(u.nonces, onceflow.NewNonce())
	}
	u.ops = []onceflow.OperationID{"op-a", "op-b"}
	u.fps = []onceflow.Fingerprint{onceflow.FingerprintOf([]byte("a")), onceflow.FingerprintOf([]byte("b"))}
	return u
}

// byteSource yields the choices of a sequence: random ones, or a fuzzer's.
type byteSource interface{ next() byte }

type randSource struct{ r *rand.Rand }

func (s randSource) next() byte { return byte(s.r.UintN(256)) }

type fuzzSource struct {
	b []byte
	i int
}

func (s *fuzzSource) next() byte {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return s.b[s.i-1]
}

func pick[T any](src byteSource, xs []T) T { return xs[int(src.next())%len(xs)] }

// step is one operation: it runs against the store and the model and
// returns both outcomes. An invalid step (a NUL in its operation ID or
// reason) must be refused by the store with an OutcomeInvalid error, changing
// nothing; the model does not see it.
type step struct {
	desc    string
	store   func(ctx context.Context, s *redisstore.Store) (any, error)
	model   func(now time.Time, m *refmodel.Model) any
	invalid bool
}

func (u *universe) genStep(src byteSource) step {
	ref := pick(src, u.refs)
	owner := pick(src, u.owners)
	nonce := pick(src, u.nonces)
	op := u.ops[0]
	switch src.next() % 16 {
	case 0, 1:
		op = u.ops[1]
	case 2:
		op = "op-\x00" // refused: the schema holds no NUL
	}
	reason := pick(src, []string{"why", "why", "why", "wh\x00y", "\x00"})
	fp := u.fps[0]
	if src.next()%10 == 0 {
		fp = u.fps[1]
	}
	codec, policy := "json-v2", 2
	if src.next()%12 == 0 {
		codec = "proto-v1"
	}
	lease := pick(src, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, time.Hour})
	const ttl = 2 * time.Hour
	o, ok := u.known[ref][owner]
	if !ok {
		o = driver.Ownership{Ref: ref, Operation: op, Owner: owner, Attempt: 1, Rev: 1}
	}
	if d := src.next() % 6; d == 0 && o.Rev > 1 {
		o.Rev--
	} else if d == 1 {
		o.Rev++
	}
	claim := driver.ClaimRequest{Ref: ref, Operation: op, Fingerprint: fp, Owner: owner,
		Codec: codec, Policy: policy, Lease: lease, Retention: ttl}
	resp := []byte(fmt.Sprintf("resp-%d", src.next()%3))
	name := fmt.Sprintf("ref%d owner%s nonce%s", indexOf(u.refs, ref), owner[:4], nonce[:4])

	switch src.next() % 10 {
	case 0, 1:
		return step{"claim " + name,
			func(ctx context.Context, s *redisstore.Store) (any, error) { return s.Claim(ctx, claim) },
			func(now time.Time, m *refmodel.Model) any { return m.Claim(now, claim, "") },
			claim.Validate() != nil}
	case 2, 3:
		claim.Nonce = nonce
		return step{"claim+start " + name,
			func(ctx context.Context, s *redisstore.Store) (any, error) { return s.ClaimStart(ctx, claim) },
			func(now time.Time, m *refmodel.Model) any { return m.Claim(now, claim, nonce) },
			claim.Validate() != nil}
	case 4:
		req := driver.StartRequest{Ownership: o, Nonce: nonce, Lease: lease, Retention: ttl}
		return step{"start " + name,
			func(ctx context.Context, s *redisstore.Store) (any, error) { return s.Start(ctx, req) },
			func(now time.Time, m *refmodel.Model) any {
				return m.Transition(now, o, onceflow.StateExecuting, "CLAIMED", nonce, lease, nil, "")
			},
			req.Validate() != nil}
	case 5:
		req := driver.CompleteRequest{Ownership: o, Nonce: nonce, Response: resp, TTL: ttl}
		return step{"complete " + name,
			func(ctx context.Context, s *redisstore.Store) (any, error) { return s.Complete(ctx, req) },
			func(now time.Time, m *refmodel.Model) any {
				return m.Transition(now, o, onceflow.StateCompleted, "EXECUTING", nonce, 0, resp, "")
			},
			req.Validate(driver.DefaultMaxResponseBytes) != nil}
	case 6:
		target := pick(src, []onceflow.State{onceflow.StateFailedRetryable, onceflow.StateAbandoned})
		req := driver.FailRequest{Ownership: o, Nonce: nonce, Target: target, Reason: reason, TTL: ttl}
		return step{fmt.Sprintf("fail %s %s reason %q", target, name, reason),
			func(ctx context.Context, s *redisstore.Store) (any, error) { return s.Fail(ctx, req) },
			func(now time.Time, m *refmodel.Model) any {
				return m.Transition(now, o, target, "CLAIMED,EXECUTING", nonce, 0, nil, reason)
			},
			req.Validate() != nil}
	case 7:
		req := driver.RenewRequest{Ref: ref, Operation: op, Owner: owner, Nonce: nonce, Lease: lease, Retention: ttl}
		return step{"renew " + name,
			func(ctx context.Context, s *redisstore.Store) (any, error) { return s.Renew(ctx, req) },
			func(now time.Time, m *refmodel.Model) any { return m.Renew(now, req) },
			req.Validate() != nil}
	case 8:
		req := driver.ReleaseRequest{Ownership: o}
		return step{"release " + name,
			func(ctx context.Context, s *redisstore.Store) (any, error) { return s.Release(ctx, req) },
			func(now time.Time, m *refmodel.Model) any { return m.Release(now, o) },
			req.Validate() != nil}
	default:
		if src.next()%2 == 0 {
			return step{"inspect " + name,
				func(ctx context.Context, s *redisstore.Store) (any, error) { return s.Inspect(ctx, ref) },
				func(now time.Time, m *refmodel.Model) any { return m.Inspect(now, ref) },
				false}
		}
		target := pick(src, []onceflow.State{onceflow.StateFailedRetryable, onceflow.StateCompleted, onceflow.StateFailed})
		why := "resolved"
		if reason != "why" {
			why = reason
		}
		req := driver.ResolveRequest{Ref: ref, Attempt: max(o.Attempt, 1), Rev: o.Rev, Target: target,
			Response: resp, Codec: "json-v2", Policy: 2, Reason: why, TTL: ttl}
		return step{fmt.Sprintf("resolve %s %s reason %q", target, name, why),
			func(ctx context.Context, s *redisstore.Store) (any, error) { return s.Resolve(ctx, req) },
			func(now time.Time, m *refmodel.Model) any { return m.Resolve(now, req) },
			req.Validate(driver.DefaultMaxResponseBytes) != nil}
	}
}

func indexOf[T comparable](xs []T, x T) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// learn records what an outcome told its owner.
func (u *universe) learn(out any) {
	var o driver.Ownership
	switch v := out.(type) {
	case driver.Acquired:
		o = v.Ownership
	case driver.TakenOver:
		o = v.Ownership
	case driver.ReplayedAcquire:
		o = v.Ownership
	case driver.Transitioned:
		o = v.Ownership
	default:
		return
	}
	if u.known[o.Ref] == nil {
		u.known[o.Ref] = map[onceflow.Owner]driver.Ownership{}
	}
	u.known[o.Ref][o.Owner] = o
}

// serverTime is the store clock an outcome reports, if it reports one.
func serverTime(out any) time.Time {
	if obs, ok := out.(driver.Observation); ok {
		return obs.ServerTime
	}
	v := reflect.ValueOf(out)
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("Record"); f.IsValid() {
			return f.Interface().(onceflow.Record).ServerTime
		}
	}
	return time.Time{}
}

// normalize drops what the model does not track: the key's TTL.
func normalize(out any) any {
	if out == nil {
		return nil
	}
	v := reflect.New(reflect.TypeOf(out)).Elem()
	v.Set(reflect.ValueOf(out))
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("Record"); f.IsValid() {
			f.FieldByName("TTL").SetInt(0)
		}
	}
	return v.Interface()
}

// runSequence applies steps to the store and the model and fails on the
// first disagreement, printing the sequence so far.
func runSequence(t *testing.T, s *redisstore.Store, src byteSource, n int) {
	t.Helper()
	u, m := newUniverse(), refmodel.New()
	var trace []string
	for range n {
		st := u.genStep(src)
		trace = append(trace, st.desc)
		got, err := st.store(context.Background(), s)
		if st.invalid {
			// Refused before anything was sent: the record is as it was,
			// which the next steps (and their INSPECTs) check.
			var ve *onceflow.Error
			if !errors.As(err, &ve) {
				t.Fatalf("invalid request: %#v, %v; want an OutcomeInvalid error\nsequence:\n  %s", got, err, strings.Join(trace, "\n  "))
			}
			continue
		}
		if err != nil {
			t.Fatalf("store error: %v\nsequence:\n  %s", err, strings.Join(trace, "\n  "))
		}
		want := st.model(serverTime(got), m)
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Fatalf("store and model disagree\nstore: %#v\nmodel: %#v\nsequence:\n  %s",
				normalize(got), normalize(want), strings.Join(trace, "\n  "))
		}
		u.learn(got)
	}
}

// TestStoreMatchesReferenceModel runs thousands of random operation
// sequences against real Redis and the pure-Go reference model.
func TestStoreMatchesReferenceModel(t *testing.T) {
	t.Parallel()
	s := newStore(t, redisstore.Config{})
	const workers, sequences, length = 4, 500, 12
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (%d sequences of %d operations)", seed, workers*sequences, length)
	for w := range workers {
		t.Run(fmt.Sprint("worker", w), func(t *testing.T) {
			t.Parallel()
			for i := range sequences {
				r := rand.New(rand.NewPCG(seed, uint64(w*sequences+i)))
				runSequence(t, s, randSource{r}, length)
			}
		})
	}
}

// FuzzStateMachine drives the same comparison from fuzzer input.
func FuzzStateMachine(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("claim-then-start-then-complete-then-replay"))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 3, 2, 1, 1, 0, 0, 0, 0, 0, 3, 2, 5, 9, 9, 9, 9, 9, 9, 9, 9, 6})
	// claim+start; fail with a NUL in the reason (refused); inspect; a claim
	// with a NUL in the operation ID (refused); fail; inspect.
	f.Add([]byte{
		0, 0, 0, 5, 0, 1, 1, 3, 2, 0, 2,
		0, 0, 0, 5, 3, 1, 1, 3, 2, 0, 6, 1,
		0, 0, 0, 5, 0, 1, 1, 3, 2, 0, 9, 0,
		0, 1, 0, 2, 0, 1, 1, 3, 2, 0, 0,
		0, 0, 0, 5, 0, 1, 1, 3, 2, 0, 6, 1,
		0, 0, 0, 5, 0, 1, 1, 3, 2, 0, 9, 0,
	})
	s := newStore(f, redisstore.Config{})
	f.Fuzz(func(t *testing.T, data []byte) {
		runSequence(t, s, &fuzzSource{b: data}, 1+len(data)/12)
	})
}
