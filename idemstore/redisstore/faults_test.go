package redisstore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// as returns a function that checks a store call's result is a T.
func as[T any](t *testing.T) func(v any, err error) T {
	return func(v any, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		out, ok := v.(T)
		if !ok {
			var want T
			t.Fatalf("outcome %T %+v, want %T", v, v, want)
		}
		return out
	}
}

func inspect(t *testing.T, s *redisstore.Store, ref onceflow.Ref) onceflow.Record {
	t.Helper()
	obs, err := s.Inspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !obs.Found {
		t.Fatalf("no record %s", ref)
	}
	return obs.Record
}

// TestLostRepliesAreIndeterminateAndRetriesApplyOnce puts a proxy between
// the client and Redis that delivers every script and drops its reply.
// go-redis re-sends the script on EOF (MaxRetries 3 by default), so Redis
// runs each call four times; the caller gets Indeterminate, and the record
// shows exactly one effect.
func TestLostRepliesAreIndeterminateAndRetriesApplyOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	viaProxy := newStore(t, redisstore.Config{
		Client:         redistest.NewClient(t, proxy.Addr()), // default MaxRetries: 3
		CommandTimeout: 10 * time.Second,
	})
	direct, err := redisstore.New(redisstore.Config{Client: redistest.NewClient(t, srv.Addr()), Namespace: keyNamespace(viaProxy)})
	if err != nil {
		t.Fatal(err)
	}
	// A script the server does not know answers NOSCRIPT without running;
	// load them first so that every dropped reply is a run.
	if err := viaProxy.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture()
	owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()

	lost := func(name string, call func() error) {
		t.Helper()
		before := proxy.DroppedReplies()
		proxy.SetFault(redistest.DropScriptReplies)
		err := call()
		proxy.SetFault(redistest.Pass)
		var se *onceflow.Error
		if !errors.Is(err, onceflow.OutcomeIndeterminate) || !errors.As(err, &se) || se.Outcome != onceflow.OutcomeIndeterminate {
			t.Fatalf("%s with its reply lost: err = %v, want an OutcomeIndeterminate error", name, err)
		}
		if runs := proxy.DroppedReplies() - before; runs != 4 {
			t.Fatalf("%s ran %d times, want 4 (1 + go-redis' 3 retries)", name, runs)
		}
	}

	lost("claim+start", func() error { _, err := viaProxy.ClaimStart(t.Context(), f.ClaimStart(owner, nonce)); return err })
	r := inspect(t, direct, f.Ref)
	if r.State != onceflow.StateExecuting || r.Owner != owner || r.Nonce != nonce || r.Attempt != 1 || r.Rev != 1 {
		t.Fatalf("after 4 runs of one claim+start: %+v, want one acquisition", r)
	}
	// Re-sending the claim tells the invocation it is its own.
	ra := as[driver.ReplayedAcquire](t)(viaProxy.ClaimStart(t.Context(), f.ClaimStart(owner, nonce)))
	if ra.Record.Nonce != nonce {
		t.Fatalf("re-sent claim+start: nonce %q, want ours", ra.Record.Nonce)
	}
	own := ra.Ownership

	lost("renew", func() error {
		_, err := viaProxy.Renew(t.Context(), driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
		return err
	})
	if r2 := inspect(t, direct, f.Ref); r2.Rev != r.Rev || r2.State != onceflow.StateExecuting {
		t.Fatalf("after 4 renews: %+v", r2)
	}

	lost("complete", func() error {
		_, err := viaProxy.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: []byte("ok"), TTL: f.TTL})
		return err
	})
	r = inspect(t, direct, f.Ref)
	if r.State != onceflow.StateCompleted || r.Rev != 2 || string(r.Response) != "ok" {
		t.Fatalf("after 4 runs of one complete: %+v, want rev 2", r)
	}
	as[driver.AlreadyTransitioned](t)(viaProxy.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: []byte("ok"), TTL: f.TTL}))

	// Claim, start, fail, release, resolve on a second record.
	g := storetest.NewFixture()
	lost("claim", func() error { _, err := viaProxy.Claim(t.Context(), g.Claim(owner)); return err })
	acq := as[driver.ReplayedAcquire](t)(viaProxy.Claim(t.Context(), g.Claim(owner)))
	if acq.Ownership.Attempt != 1 || acq.Ownership.Rev != 1 {
		t.Fatalf("after 4 claims: %+v", acq.Record)
	}
	lost("release", func() error {
		_, err := viaProxy.Release(t.Context(), driver.ReleaseRequest{Ownership: acq.Ownership})
		return err
	})
	if obs, _ := direct.Inspect(t.Context(), g.Ref); obs.Found {
		t.Fatalf("release: record still there: %+v", obs.Record)
	}
	as[driver.Acquired](t)(viaProxy.Claim(t.Context(), g.Claim(owner)))
	lost("start", func() error {
		_, err := viaProxy.Start(t.Context(), driver.StartRequest{Ownership: acq.Ownership, Nonce: nonce, Lease: g.Lease, Retention: g.TTL})
		return err
	})
	if r := inspect(t, direct, g.Ref); r.State != onceflow.StateExecuting || r.Rev != 2 || r.Nonce != nonce {
		t.Fatalf("after 4 starts: %+v", r)
	}
	started := acq.Ownership
	started.Rev = 2
	lost("fail", func() error {
		_, err := viaProxy.Fail(t.Context(), driver.FailRequest{Ownership: started, Nonce: nonce, Target: onceflow.StateAbandoned, TTL: g.TTL})
		return err
	})
	if r := inspect(t, direct, g.Ref); r.State != onceflow.StateAbandoned || r.Rev != 3 {
		t.Fatalf("after 4 fails: %+v", r)
	}
	lost("resolve", func() error {
		_, err := viaProxy.Resolve(t.Context(), driver.ResolveRequest{Ref: g.Ref, Attempt: 1, Rev: 3, Target: onceflow.StateFailedRetryable, TTL: g.TTL})
		return err
	})
	if r := inspect(t, direct, g.Ref); r.State != onceflow.StateFailedRetryable || r.Rev != 4 {
		t.Fatalf("after 4 resolves: %+v", r)
	}
}

// TestUndeliveredCallsAreIndeterminateAndApplyNothing cuts the connection
// before the script reaches Redis: the caller cannot know that, so the
// error is still Indeterminate, and INSPECT shows nothing happened.
func TestUndeliveredCallsAreIndeterminateAndApplyNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	s := newStore(t, redisstore.Config{Client: redistest.NewClient(t, proxy.Addr()), CommandTimeout: 10 * time.Second})
	f := storetest.NewFixture()
	proxy.SetFault(redistest.ResetScripts)
	_, err := s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
	if !errors.Is(err, onceflow.OutcomeIndeterminate) {
		t.Fatalf("err = %v, want OutcomeIndeterminate", err)
	}
	_, err = s.Inspect(t.Context(), f.Ref)
	if !errors.Is(err, onceflow.OutcomeStoreUnavailable) || errors.Is(err, onceflow.OutcomeIndeterminate) {
		t.Fatalf("inspect err = %v, want OutcomeStoreUnavailable only", err)
	}
	proxy.SetFault(redistest.Pass)
	if obs, err := s.Inspect(t.Context(), f.Ref); err != nil || obs.Found {
		t.Fatalf("after an undelivered claim: %+v, %v; want no record", obs, err)
	}
}

// TestScriptFlushCostsOneReload: after SCRIPT FLUSH (or a restart or
// failover) the next call finds its script missing, sends it whole once,
// and behaves exactly as before.
func TestScriptFlushCostsOneReload(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := redistest.NewClient(t, srv.Addr())
	var evals, evalshas int
	client.AddHook(countHook{func(name string) {
		switch name {
		case "eval":
			evals++
		case "evalsha":
			evalshas++
		}
	}})
	s := newStore(t, redisstore.Config{Client: client})
	f := storetest.NewFixture()
	owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
	acq := as[driver.Acquired](t)(s.ClaimStart(t.Context(), f.ClaimStart(owner, nonce)))
	warm := s.ScriptReloads() // the first use of a script on a new server loads it
	if err := client.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	evals, evalshas = 0, 0
	as[driver.Transitioned](t)(s.Complete(t.Context(), driver.CompleteRequest{Ownership: acq.Ownership, Nonce: nonce, Response: []byte("ok"), TTL: f.TTL}))
	if got := s.ScriptReloads() - warm; got != 1 || evals != 1 || evalshas != 1 {
		t.Fatalf("after SCRIPT FLUSH: %d reloads, %d EVAL, %d EVALSHA; want 1, 1, 1", got, evals, evalshas)
	}
	rep := as[driver.CompletedReplay](t)(s.Claim(t.Context(), f.Claim(onceflow.NewOwner())))
	if string(rep.Record.Response) != "ok" {
		t.Fatalf("replay = %q", rep.Record.Response)
	}
	if r := inspect(t, s, f.Ref); r.Rev != 2 {
		t.Fatalf("record after the reloaded complete: %+v", r)
	}
}

// TestServerRestartClassifiesWhatItProves: with Redis down, mutations are
// Indeterminate and INSPECT is Unavailable; after a restart the store works
// again without being rebuilt.
func TestServerRestartClassifiesWhatItProves(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	s := newStore(t, redisstore.Config{Client: client, CommandTimeout: 2 * time.Second})
	f := storetest.NewFixture()
	as[driver.Acquired](t)(s.Claim(t.Context(), f.Claim(onceflow.NewOwner())))
	srv.Kill()
	if _, err := s.Claim(t.Context(), f.Claim(onceflow.NewOwner())); !errors.Is(err, onceflow.OutcomeIndeterminate) {
		t.Fatalf("claim with Redis down: %v, want OutcomeIndeterminate", err)
	}
	if _, err := s.Inspect(t.Context(), f.Ref); !errors.Is(err, onceflow.OutcomeStoreUnavailable) {
		t.Fatalf("inspect with Redis down: %v, want OutcomeStoreUnavailable", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted server is empty (it keeps nothing on disk) and has no
	// scripts cached.
	as[driver.Acquired](t)(s.Claim(t.Context(), f.Claim(onceflow.NewOwner())))
}

type countHook struct{ seen func(name string) }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.seen(cmd.Name())
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func keyNamespace(s *redisstore.Store) string {
	k := s.Key(storetest.NewFixture().Ref)
	return k[:strings.Index(k, ":idem:")]
}

// TestKeyLayout pins the record key and field names of DESIGN.md §2.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	ns := redistest.Namespace(t)
	s := newStore(t, redisstore.Config{Client: client, Namespace: ns})
	g, err := onceflow.NewDigester([]byte("secret"), 3)
	if err != nil {
		t.Fatal(err)
	}
	d := g.Digest("principal-7", "order-42", "charge")
	ref := onceflow.Ref{Code: "charge-payment", Digest: d}
	raw, err := hex.DecodeString(d.Hex)
	if err != nil {
		t.Fatal(err)
	}
	want := ns + ":idem:v2:d3:charge-payment:{" + base64.RawURLEncoding.EncodeToString(raw) + "}"
	if got := s.Key(ref); got != want || len(want) != len(ns)+len(":idem:v2:d3:charge-payment:{}")+43 {
		t.Fatalf("key = %q, want %q", got, want)
	}
	if strings.Contains(want, "order-42") || strings.Contains(want, "principal") {
		t.Fatal("raw scope in the key")
	}
	f := storetest.NewFixture()
	f.Ref = ref
	own := as[driver.Acquired](t)(s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))).Ownership
	fields, err := client.HGetAll(t.Context(), want).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range fields {
		names = append(names, k)
	}
	// reason (r) and resp are there only when they say something; m
	// packs state, attempt, rev, policy, createdAt, updatedAt, uncertain,
	// sum and codec; the owner (o), fingerprint (f) and nonce (n) are
	// raw bytes.
	wantFields := "f l m n o op"
	if got := strings.Join(sorted(names), " "); got != wantFields {
		t.Fatalf("fields = %s\nwant     %s", got, wantFields)
	}
	if !strings.HasPrefix(fields["m"], "EXECUTING:1:1:") || fields["o"] != redisstore.Raw(string(own.Owner)) || len(fields["n"]) != 16 ||
		fields["f"] != redisstore.Raw(string(f.Fingerprint)) || fields["op"] != string(f.Operation) {
		t.Fatalf("fields = %q", fields)
	}
}

func sorted(xs []string) []string {
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if xs[j] < xs[i] {
				xs[i], xs[j] = xs[j], xs[i]
			}
		}
	}
	return xs
}

// TestCorruptRecordsAreReportedNotGuessed corrupts records by hand: every
// script answers with an OutcomeCorrupt error naming the field, and changes
// nothing.
func TestCorruptRecordsAreReportedNotGuessed(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	s := newStore(t, redisstore.Config{Client: client})
	cases := []struct {
		field   string
		corrupt func(key string) error
	}{
		{"m", func(k string) error { return client.HDel(t.Context(), k, "m").Err() }},
		{"state", func(k string) error { return redisstore.SetField(t.Context(), client, k, "state", "RUNNING") }},
		// A field of the layout before this one: not the record's.
		{"state", func(k string) error { return client.HSet(t.Context(), k, "state", "RUNNING").Err() }},
		{"rev", func(k string) error { return redisstore.SetField(t.Context(), client, k, "rev", "abc") }},
		{"attempt", func(k string) error { return redisstore.SetField(t.Context(), client, k, "attempt", "-1") }},
		{"owner", func(k string) error { return redisstore.SetField(t.Context(), client, k, "owner", "short") }},
		{"owner", func(k string) error { return client.HSet(t.Context(), k, "owner", "short").Err() }},
		{"leaseUntil", func(k string) error { return redisstore.SetField(t.Context(), client, k, "leaseUntil", "(missing)") }},
		{"(key)", func(k string) error {
			ttl := client.PTTL(t.Context(), k).Val()
			return client.Set(t.Context(), k, "not a hash", ttl).Err()
		}},
	}
	for _, c := range cases {
		f := storetest.NewFixture()
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		own := as[driver.Acquired](t)(s.ClaimStart(t.Context(), f.ClaimStart(owner, nonce))).Ownership
		key := s.Key(f.Ref)
		if err := c.corrupt(key); err != nil {
			t.Fatal(err)
		}
		before := redistest.Snapshot(t.Context(), client, key)
		calls := map[string]func() error{
			"claim":      func() error { _, err := s.Claim(t.Context(), f.Claim(onceflow.NewOwner())); return err },
			"claimstart": func() error { _, err := s.ClaimStart(t.Context(), f.ClaimStart(owner, nonce)); return err },
			"start": func() error {
				_, err := s.Start(t.Context(), driver.StartRequest{Ownership: own, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
				return err
			},
			"complete": func() error {
				_, err := s.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, TTL: f.TTL})
				return err
			},
			"renew": func() error {
				_, err := s.Renew(t.Context(), driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
				return err
			},
			"release": func() error { _, err := s.Release(t.Context(), driver.ReleaseRequest{Ownership: own}); return err },
			"inspect": func() error { _, err := s.Inspect(t.Context(), f.Ref); return err },
			"resolve": func() error {
				_, err := s.Resolve(t.Context(), driver.ResolveRequest{Ref: f.Ref, Attempt: 1, Rev: 1, Target: onceflow.StateFailedRetryable, TTL: f.TTL})
				return err
			},
		}
		for name, call := range calls {
			err := call()
			var ce *onceflow.Error
			if !errors.Is(err, onceflow.OutcomeCorrupt) || !errors.As(err, &ce) || ce.Field != c.field {
				t.Fatalf("%s of a record with a corrupt %s: err = %v", name, c.field, err)
			}
		}
		if after := redistest.Snapshot(t.Context(), client, key); after != before {
			t.Fatalf("corrupt %s: the record was changed", c.field)
		}
	}
}

// TestScriptsCarryTheirHeader: every script source starts with #!lua and
// documents its KEYS, ARGV and replies, and so does every generated script
// (lua/gen), whose second line says it is generated.
func TestScriptsCarryTheirHeader(t *testing.T) {
	t.Parallel()
	sources, err := filepath.Glob("lua/*.lua")
	if err != nil || len(sources) != 7 {
		t.Fatalf("lua files: %v %v", sources, err)
	}
	generated, err := filepath.Glob("lua/gen/*.lua")
	if err != nil || len(generated) != 6 {
		t.Fatalf("generated lua files: %v %v", generated, err)
	}
	for _, name := range append(sources, generated...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		first, rest, _ := strings.Cut(src, "\n")
		if first != "#!lua" && !strings.HasPrefix(first, "#!lua flags=") {
			t.Errorf("%s does not start with #!lua", name)
		}
		if second, _, _ := strings.Cut(rest, "\n"); filepath.Dir(name) == filepath.Join("lua", "gen") &&
			second != "-- Code generated by go generate; DO NOT EDIT." {
			t.Errorf("%s: second line %q, want the generated-code line", name, second)
		}
		if filepath.Base(name) == "record.lua" {
			continue
		}
		for _, want := range []string{"-- KEYS[1]", "-- Replies"} {
			if !strings.Contains(src, want) {
				t.Errorf("%s header lacks %q", name, want)
			}
		}
	}
}

// TestCallsNeverOutliveTheirContext: whatever the go-redis options, a
// store call returns by its deadline. A client built without
// ContextTimeoutEnabled (go-redis' default) would wait for its 3s
// ReadTimeout on a black-holed network; the store stops waiting at the
// deadline and reports what the call proves: Indeterminate for a script
// that may write, Unavailable for INSPECT.
func TestCallsNeverOutliveTheirContext(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, documented := range []bool{false, true} {
		proxy := redistest.NewProxy(t, srv.Addr())
		client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: documented})
		t.Cleanup(func() { _ = client.Close() })
		const timeout = 100 * time.Millisecond
		s := newStore(t, redisstore.Config{Client: client, CommandTimeout: timeout})
		if err := s.LoadScripts(t.Context()); err != nil {
			t.Fatal(err)
		}
		proxy.SetFault(redistest.BlackHole)
		f := storetest.NewFixture()
		for _, c := range []struct {
			name  string
			ctx   time.Duration // the caller's own deadline, 0 for none
			call  func(ctx context.Context) error
			proof error
		}{
			{"claim", 0, func(ctx context.Context) error {
				_, err := s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
				return err
			}, onceflow.OutcomeIndeterminate},
			{"inspect", 0, func(ctx context.Context) error { _, err := s.Inspect(ctx, f.Ref); return err }, onceflow.OutcomeStoreUnavailable},
			{"claim with an earlier deadline", 30 * time.Millisecond, func(ctx context.Context) error {
				_, err := s.Claim(ctx, f.Claim(onceflow.NewOwner()))
				return err
			}, onceflow.OutcomeIndeterminate},
		} {
			ctx := t.Context()
			limit := timeout
			if c.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.ctx)
				defer cancel()
				limit = c.ctx
			}
			start := time.Now()
			err := c.call(ctx)
			took := time.Since(start)
			if !errors.Is(err, c.proof) {
				t.Errorf("ContextTimeoutEnabled=%v %s: err = %v, want %v", documented, c.name, err, c.proof)
			}
			if took > limit+50*time.Millisecond {
				t.Errorf("ContextTimeoutEnabled=%v %s: returned after %v, past its %v deadline", documented, c.name, took, limit)
			}
		}
	}
}

// TestAWaitForAConnectionEndsAtTheDeadline: a call that waits for a free
// connection (a pool of one, held by a call on a black-holed network with
// a longer timeout) returns by its own deadline, not the client's
// PoolTimeout: its context's Done closes at the deadline although the
// store arms no timer of its own per call.
func TestAWaitForAConnectionEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, PoolSize: 1, PoolTimeout: 10 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	ns := redistest.Namespace(t)
	holder := newStore(t, redisstore.Config{Client: client, Namespace: ns, CommandTimeout: time.Second})
	const timeout = 100 * time.Millisecond
	waiter := newStore(t, redisstore.Config{Client: client, Namespace: ns, CommandTimeout: timeout})
	if err := holder.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	proxy.SetFault(redistest.BlackHole)
	f := storetest.NewFixture()
	held := make(chan error, 1)
	go func() {
		_, err := holder.Inspect(context.Background(), f.Ref)
		held <- err
	}()
	redistest.WaitFor(t, time.Second, func() bool { return client.PoolStats().TotalConns == 1 && client.PoolStats().IdleConns == 0 },
		"the holder's call to take the only connection")
	start := time.Now()
	_, err := waiter.Inspect(context.Background(), f.Ref)
	took := time.Since(start)
	if !errors.Is(err, onceflow.OutcomeStoreUnavailable) {
		t.Errorf("the waiting call: err = %v, want OutcomeStoreUnavailable", err)
	}
	if took > timeout+100*time.Millisecond {
		t.Errorf("the waiting call returned after %v, past its %v deadline", took, timeout)
	}
	proxy.SetFault(redistest.Pass)
	<-held
}

// TestInspectIsReadOnly: INSPECT is declared no-writes and sent with
// EVALSHA_RO, so it answers on a read-only replica, under CLIENT PAUSE
// WRITE and when Redis is out of memory, where every script that may
// write is refused; on the replica, with no script cached, it goes by
// EVALSHA_RO and EVAL_RO, never by a command that may write.
func TestInspectIsReadOnly(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t)
	pc := redistest.NewClient(t, primary.Addr())
	s := newStore(t, redisstore.Config{Client: pc, CommandTimeout: time.Second})
	if err := s.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture()
	if _, err := s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())); err != nil {
		t.Fatal(err)
	}
	readable := func(t *testing.T, s *redisstore.Store, where string) {
		t.Helper()
		obs, err := s.Inspect(t.Context(), f.Ref)
		if err != nil || !obs.Found || obs.Record.State != onceflow.StateExecuting {
			t.Fatalf("%s: inspect = %+v, %v", where, obs, err)
		}
	}

	t.Run("replica", func(t *testing.T) {
		replica := redistest.StartReplica(t, primary.Addr())
		rc := redistest.NewClient(t, replica.Addr())
		if err := rc.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		rs := newStore(t, redisstore.Config{Client: rc, Namespace: keyNamespace(s), CommandTimeout: time.Second})
		readable(t, rs, "replica, no script cached")
		readable(t, rs, "replica, the script cached")
		stats := rc.Info(t.Context(), "commandstats").Val()
		for _, want := range []string{"cmdstat_evalsha_ro:", "cmdstat_eval_ro:calls=1,"} {
			if !strings.Contains(stats, want) {
				t.Errorf("the replica's commandstats lack %q:\n%s", want, stats)
			}
		}
		if strings.Contains(stats, "cmdstat_evalsha:") || strings.Contains(stats, "cmdstat_eval:") {
			t.Errorf("INSPECT sent EVALSHA or EVAL to the replica:\n%s", stats)
		}
		if _, err := rs.Claim(t.Context(), f.Claim(onceflow.NewOwner())); err == nil || !strings.Contains(err.Error(), "READONLY") {
			t.Fatalf("claim on the replica: %v, want READONLY", err)
		}
	})
	t.Run("paused writes and no memory", func(t *testing.T) {
		if err := pc.Do(t.Context(), "CLIENT", "PAUSE", 10000, "WRITE").Err(); err != nil {
			t.Fatal(err)
		}
		readable(t, s, "CLIENT PAUSE WRITE")
		if err := pc.Do(t.Context(), "CLIENT", "UNPAUSE").Err(); err != nil {
			t.Fatal(err)
		}
		if err := pc.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.ConfigSet(context.Background(), "maxmemory", "0").Err() })
		readable(t, s, "out of memory")
		if _, err := s.Claim(t.Context(), f.Claim(onceflow.NewOwner())); err == nil || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("claim out of memory: %v, want OOM", err)
		}
	})
}

// TestInspectAnswersWhileWritesArePausedWithNoScriptCached: after a
// restart, a failover or SCRIPT FLUSH the server has no script cached, and
// a failover pauses writes (CLIENT PAUSE WRITE). Redis judges an EVALSHA
// of an uncached script by the command's own flags, which say it may
// write, so an EVALSHA would wait for the pause to end, whatever the
// script's no-writes flag; INSPECT sends EVALSHA_RO and then EVAL_RO, and
// answers at once.
func TestInspectAnswersWhileWritesArePausedWithNoScriptCached(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := redistest.NewClient(t, srv.Addr())
	const timeout = 2 * time.Second
	s := newStore(t, redisstore.Config{Client: client, CommandTimeout: timeout})
	f := storetest.NewFixture()
	as[driver.Acquired](t)(s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())))
	if err := client.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.Do(t.Context(), "CLIENT", "PAUSE", 20000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
	reloads := s.ScriptReloads()
	start := time.Now()
	obs, err := s.Inspect(t.Context(), f.Ref)
	took := time.Since(start)
	if err != nil || !obs.Found || obs.Record.State != onceflow.StateExecuting {
		t.Fatalf("inspect while writes are paused and no script is cached: %+v, %v (after %v)", obs, err, took)
	}
	if took > timeout/4 {
		t.Fatalf("inspect took %v while writes were paused: it waited for the pause", took)
	}
	if got := s.ScriptReloads() - reloads; got != 1 {
		t.Fatalf("%d script reloads, want 1 (EVAL_RO after NOSCRIPT)", got)
	}
	// Scripts that may write wait for the pause, as they must.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Claim(ctx, f.Claim(onceflow.NewOwner())); !errors.Is(err, onceflow.OutcomeIndeterminate) {
		t.Fatalf("claim while writes are paused: %v, want it to wait (OutcomeIndeterminate at the deadline)", err)
	}
}

// TestCheckEvictionPolicy: noeviction passes; any policy that may evict
// is an *EvictionPolicyError naming it.
func TestCheckEvictionPolicy(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := redistest.NewClient(t, srv.Addr())
	s := newStore(t, redisstore.Config{Client: c})
	if err := s.CheckEvictionPolicy(t.Context()); err != nil {
		t.Fatalf("noeviction: %v", err)
	}
	if err := c.ConfigSet(t.Context(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	err := s.CheckEvictionPolicy(t.Context())
	var pe *redisstore.EvictionPolicyError
	if !errors.Is(err, redisstore.ErrEvictionPolicy) || !errors.As(err, &pe) || pe.Policy != "volatile-lru" || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("volatile-lru: err = %v", err)
	}
}

// TestResponsesOfEverySizeRoundTrip: a response is stored in 64-byte
// chunks up to 2 KiB (so the record stays a compact listpack) and whole
// above; replay, INSPECT and RESOLVE give back exactly the bytes stored.
func TestResponsesOfEverySizeRoundTrip(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	s := newStore(t, redisstore.Config{Client: client})
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 129, 2047, 2048, 2049, 64 << 10} {
		resp := make([]byte, n)
		for i := range resp {
			resp[i] = byte(i*7 + n) // NUL bytes too
		}
		f := storetest.NewFixture()
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		own := as[driver.Acquired](t)(s.ClaimStart(t.Context(), f.ClaimStart(owner, nonce))).Ownership
		as[driver.Transitioned](t)(s.Complete(t.Context(), driver.CompleteRequest{Ownership: own, Nonce: nonce, Response: resp, TTL: f.TTL}))
		rep := as[driver.CompletedReplay](t)(s.Claim(t.Context(), f.Claim(onceflow.NewOwner())))
		if !bytes.Equal(rep.Record.Response, resp) {
			t.Fatalf("%d bytes: replayed %d bytes that differ", n, len(rep.Record.Response))
		}
		if got := inspect(t, s, f.Ref).Response; !bytes.Equal(got, resp) {
			t.Fatalf("%d bytes: inspect gave %d bytes that differ", n, len(got))
		}
		enc := client.ObjectEncoding(t.Context(), s.Key(f.Ref)).Val()
		if want := "listpack"; n <= 2048 && enc != want {
			t.Fatalf("%d bytes: encoding %s, want %s", n, enc, want)
		}

		// RESOLVE writes the same way.
		g := storetest.NewFixture()
		gown, gnonce := executingOwnership(t, s, g)
		ab := as[driver.Transitioned](t)(s.Fail(t.Context(), driver.FailRequest{Ownership: gown, Nonce: gnonce, Target: onceflow.StateAbandoned, TTL: g.TTL}))
		req := driver.ResolveRequest{Ref: g.Ref, Attempt: ab.Record.Attempt, Rev: ab.Record.Rev, Target: onceflow.StateCompleted,
			Response: resp, Codec: g.Codec, Policy: g.Policy, TTL: g.TTL}
		as[driver.Transitioned](t)(s.Resolve(t.Context(), req))
		as[driver.AlreadyTransitioned](t)(s.Resolve(t.Context(), req))
		if rep := as[driver.CompletedReplay](t)(s.Claim(t.Context(), g.Claim(onceflow.NewOwner()))); !bytes.Equal(rep.Record.Response, resp) {
			t.Fatalf("%d bytes: replay after resolve differs", n)
		}
	}
}

func executingOwnership(t *testing.T, s *redisstore.Store, f storetest.Fixture) (driver.Ownership, onceflow.Nonce) {
	t.Helper()
	nonce := onceflow.NewNonce()
	return as[driver.Acquired](t)(s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), nonce))).Ownership, nonce
}
