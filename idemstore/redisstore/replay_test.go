package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// testStore is New, for a test.
func testStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eachReadPath runs test, in parallel subtests, with a store of cfg whose
// replay reads go to Redis by themselves, and with one whose every replay
// read rides the auto-pipeliner (the default, with a read held in flight
// so that none goes alone); the first has Config.NoAutoPipeline.
func eachReadPath(t *testing.T, cfg Config, test func(t *testing.T, s *Store)) {
	t.Helper()
	for _, pipelined := range []bool{false, true} {
		name := "direct"
		if pipelined {
			name = "auto-pipelined"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := cfg
			c.NoAutoPipeline = !pipelined
			s := testStore(t, c)
			if pipelined {
				s.pipeReads.Add(1)
			}
			test(t, s)
			if pipelined && s.pipelined.Load() == 0 {
				t.Fatal("no replay read rode the auto-pipeliner")
			}
		})
	}
}

// completedRecord writes a COMPLETED record of resp and returns its
// fixture and ownership.
func completedRecord(t *testing.T, s *Store, resp []byte) (storetest.Fixture, driver.Ownership) {
	t.Helper()
	ctx := context.Background()
	f := storetest.NewFixture()
	nonce := onceflow.NewNonce()
	acq, err := s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), nonce))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Complete(ctx, driver.CompleteRequest{Ownership: acq.(driver.Acquired).Ownership, Nonce: nonce, Response: resp, TTL: f.TTL})
	if err != nil {
		t.Fatal(err)
	}
	return f, out.(driver.Transitioned).Ownership
}

// TestReplayIsOneReadWithoutAScript replays responses of every stored
// shape (one chunk, two, more than the first read asks for, stored whole)
// and checks that each was served by the replay read, with the record's
// fence; an empty response, which the read cannot tell from a missing
// one, is replayed by the script.
func TestReplayIsOneReadWithoutAScript(t *testing.T) {
	t.Parallel()
	eachReadPath(t, Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)}, testReplayIsOneReadWithoutAScript)
}

func testReplayIsOneReadWithoutAScript(t *testing.T, s *Store) {
	ctx := context.Background()
	for _, n := range []int{0, 1, 63, 64, 65, 100, 256, 257, 1000, schema.ChunkSize * schema.MaxChunks, 5000} {
		resp := bytes.Repeat([]byte{'a', 0, 'z'}, n/3+1)[:n]
		f, own := completedRecord(t, s, resp)
		before := s.plainReplays.Load()
		out, err := s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		rep, ok := out.(driver.CompletedReplay)
		if !ok || !bytes.Equal(rep.Record.Response, resp) {
			t.Fatalf("%d bytes: %T %+v", n, out, out)
		}
		obs, err := s.Inspect(ctx, f.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Record.Fence() != obs.Record.Fence() || rep.Record.Attempt != own.Attempt || rep.Record.Rev != own.Rev {
			t.Fatalf("%d bytes: replay fence %+v, record %+v", n, rep.Record.Fence(), obs.Record.Fence())
		}
		served := s.plainReplays.Load() - before
		if want := int64(1); n == 0 && served != 0 || n > 0 && served != want {
			t.Fatalf("%d bytes: %d replays served without the script", n, served)
		}
	}
}

// TestReplayReadNeverReplaysACorruptRecord corrupts, in a COMPLETED
// record, each field the replay read reads, in every way the schema
// refuses (and the response's chunks: changed, missing, short, after a
// gap): the claim is refused with an OutcomeCorrupt error naming the field,
// is never answered from the read, and nothing changes.
func TestReplayReadNeverReplaysACorruptRecord(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	eachReadPath(t, Config{Client: client, Namespace: redistest.Namespace(t), CommandTimeout: 5 * time.Second}, func(t *testing.T, s *Store) {
		testReplayReadNeverReplaysACorruptRecord(t, s, client)
	})
}

func testReplayReadNeverReplaysACorruptRecord(t *testing.T, s *Store, client *redis.Client) {
	ctx := context.Background()
	kinds := map[string]schema.Kind{}
	for _, r := range schema.Fields {
		kinds[r.Name] = r.Kind
	}
	type corruption struct {
		field, value string // value "(missing)" deletes the field
		want         string // the field the error names
	}
	var cases []corruption
	for _, field := range []string{"state", "fp", "codec", "policy", "attempt", "rev", "createdAt", "sum"} {
		for _, g := range garbles(kinds[field]) {
			cases = append(cases, corruption{field, g, field})
		}
	}
	// The parts of m the read does not replay are checked all the same.
	for _, field := range []string{"updatedAt", "uncertain"} {
		for _, g := range garbles(kinds[field]) {
			cases = append(cases, corruption{field, g, field})
		}
	}
	chunk := strings.Repeat("c", schema.ChunkSize)
	cases = append(cases,
		corruption{schema.MetaField, "COMPLETED:1", schema.MetaField},
		corruption{schema.MetaField, "", schema.MetaField},
		corruption{schema.MetaField, "(missing)", schema.MetaField},
		corruption{"resp", "(missing)", "resp"},
		corruption{"resp", strings.Repeat("x", schema.ChunkSize), "resp"}, // changed bytes: the sum says so
		corruption{"resp2", "(missing)", "resp"},                          // the response is shorter than its sum
		corruption{"resp2", "tampered", "resp"},
		corruption{"resp", "short", "resp2"},  // a chunk after one shorter than a whole chunk
		corruption{"resp3", chunk, "resp3"},   // a chunk beyond the response, after a short one
		corruption{"resp4", "stray", "resp4"}, // a chunk after a missing one
	)
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s=%.12q", c.field, c.value), func(t *testing.T) {
			f, _ := completedRecord(t, s, bytes.Repeat([]byte("0123456789"), 10)) // two chunks
			key := s.Key(f.Ref)
			if err := setField(ctx, client, key, c.field, c.value); err != nil {
				t.Fatal(err)
			}
			before, served := redistest.Snapshot(ctx, client, key), s.plainReplays.Load()
			for _, claim := range []func() (driver.ClaimOutcome, error){
				func() (driver.ClaimOutcome, error) { return s.Claim(ctx, f.Claim(onceflow.NewOwner())) },
				func() (driver.ClaimOutcome, error) {
					return s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
				},
			} {
				out, err := claim()
				var ce *onceflow.Error
				if !errors.As(err, &ce) || ce.Field != c.want {
					t.Fatalf("claim answered %T %+v, %v; want an OutcomeCorrupt error naming %s", out, out, err, c.want)
				}
			}
			if s.plainReplays.Load() != served {
				t.Fatal("the replay read served a corrupt record")
			}
			if redistest.Snapshot(ctx, client, key) != before {
				t.Fatal("the claim changed the corrupt record")
			}
		})
	}
}

// TestRecordsNotCompletedGoToTheScript claims records in every other
// state, and a COMPLETED one under another codec: each is answered by
// claim.lua (its own outcome), never by the replay read.
func TestRecordsNotCompletedGoToTheScript(t *testing.T) {
	t.Parallel()
	s := testStore(t, Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	ctx := context.Background()
	claimed := func(f storetest.Fixture) driver.Ownership {
		out, err := s.Claim(ctx, f.Claim(onceflow.NewOwner()))
		if err != nil {
			t.Fatal(err)
		}
		return out.(driver.Acquired).Ownership
	}
	executing := func(f storetest.Fixture) (driver.Ownership, onceflow.Nonce) {
		nonce := onceflow.NewNonce()
		out, err := s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), nonce))
		if err != nil {
			t.Fatal(err)
		}
		return out.(driver.Acquired).Ownership, nonce
	}
	fail := func(f storetest.Fixture, target onceflow.State) driver.Ownership {
		own, nonce := executing(f)
		out, err := s.Fail(ctx, driver.FailRequest{Ownership: own, Nonce: nonce, Target: target, Reason: "test", TTL: f.TTL})
		if err != nil {
			t.Fatal(err)
		}
		return out.(driver.Transitioned).Ownership
	}
	cases := []struct {
		name  string
		setup func(storetest.Fixture) storetest.Fixture // returns the fixture to claim with
		want  string
	}{
		{"CLAIMED", func(f storetest.Fixture) storetest.Fixture { claimed(f); return f }, "driver.InProgress"},
		{"EXECUTING", func(f storetest.Fixture) storetest.Fixture { executing(f); return f }, "driver.InProgress"},
		{"FAILED_RETRYABLE", func(f storetest.Fixture) storetest.Fixture { fail(f, onceflow.StateFailedRetryable); return f }, "driver.TakenOver"},
		{"ABANDONED", func(f storetest.Fixture) storetest.Fixture { fail(f, onceflow.StateAbandoned); return f }, "driver.AwaitingDecision"},
		{"FAILED", func(f storetest.Fixture) storetest.Fixture {
			own := fail(f, onceflow.StateAbandoned)
			if _, err := s.Resolve(ctx, driver.ResolveRequest{Ref: f.Ref, Attempt: own.Attempt, Rev: own.Rev, Target: onceflow.StateFailed, Reason: "no", TTL: f.TTL}); err != nil {
				t.Fatal(err)
			}
			return f
		}, "driver.OperationFailed"},
		{"COMPLETED, another codec", func(f storetest.Fixture) storetest.Fixture {
			g, _ := completedRecord(t, s, []byte("r"))
			g.Codec = "proto-v1"
			return g
		}, "driver.CodecMismatch"},
		{"COMPLETED, another policy", func(f storetest.Fixture) storetest.Fixture {
			g, _ := completedRecord(t, s, []byte("r"))
			g.Policy++
			return g
		}, "driver.CodecMismatch"},
		{"COMPLETED, another request", func(f storetest.Fixture) storetest.Fixture {
			g, _ := completedRecord(t, s, []byte("r"))
			g.Fingerprint = onceflow.FingerprintOf([]byte("another request"))
			return g
		}, "driver.FingerprintMismatch"},
		{"no record", func(f storetest.Fixture) storetest.Fixture { return f }, "driver.Acquired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.setup(storetest.NewFixture())
			served := s.plainReplays.Load()
			out, err := s.Claim(ctx, f.Claim(onceflow.NewOwner()))
			if err != nil || fmt.Sprintf("%T", out) != c.want {
				t.Fatalf("claim = %T %v, want %s", out, err, c.want)
			}
			if s.plainReplays.Load() != served {
				t.Fatal("the replay read answered a claim it should have left to the script")
			}
		})
	}
}

// TestReplayReadTouchesOneKey checks the replay read is one HMGET of the
// record's key (so under Cluster it goes to the key's slot) and sends no
// script.
func TestReplayReadTouchesOneKey(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	s := testStore(t, Config{Client: client, Namespace: redistest.Namespace(t)})
	f, _ := completedRecord(t, s, []byte("ok"))
	var sent []string
	hooked := redis.NewClient(client.Options())
	t.Cleanup(func() { _ = hooked.Close() })
	hooked.AddHook(recordHook{&sent})
	s2 := testStore(t, Config{Client: hooked, Namespace: s.ns})
	out, err := s2.ClaimStart(context.Background(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
	if _, ok := out.(driver.CompletedReplay); !ok || err != nil {
		t.Fatalf("claim = %T %v", out, err)
	}
	if len(sent) != 1 || sent[0] != "hmget "+s.Key(f.Ref) {
		t.Fatalf("sent %q, want one HMGET of the record's key", sent)
	}
}

type recordHook struct{ sent *[]string }

func (h recordHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h recordHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		line := cmd.Name()
		if line == "hello" || line == "client" {
			return next(ctx, cmd) // the connection's handshake
		}
		if len(args) > 1 {
			line += fmt.Sprint(" ", args[1])
		}
		*h.sent = append(*h.sent, line)
		return next(ctx, cmd)
	}
}
func (h recordHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// cachingClient is a client of the test server with go-redis'
// server-assisted client-side cache.
func cachingClient(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: redistest.Client(t).Options().Addr, Protocol: 3, ContextTimeoutEnabled: true,
		ClientSideCacheConfig: &redis.ClientSideCacheConfig{MaxEntries: 1024},
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestReplayCacheServesOnlyCompletedRecords runs the replay read through
// go-redis' client-side cache (Config.ReplayCache): a COMPLETED record's
// replays hit the cache and are exact; a record read (and cached) while
// it was EXECUTING is never replayed from that entry: the claim after its
// completion replays the stored response, through the script when the
// cache still holds the stale entry. Without ReplayCache the store reads
// past the client's cache.
func TestReplayCacheServesOnlyCompletedRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := redistest.Namespace(t)
	cc := cachingClient(t)
	cached := testStore(t, Config{Client: cc, Namespace: ns, ReplayCache: true, NoAutoPipeline: true})
	direct := testStore(t, Config{Client: redistest.Client(t), Namespace: ns})
	if _, err := New(Config{Client: redistest.Client(t), Namespace: ns, ReplayCache: true}); err == nil {
		t.Fatal("ReplayCache accepted a client without a client-side cache")
	}

	t.Run("COMPLETED replays hit the cache", func(t *testing.T) {
		resp := bytes.Repeat([]byte("r"), 100)
		f, _ := completedRecord(t, direct, resp)
		hits := cc.CSCStats().Hits
		for range 5 {
			out, err := cached.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
			if rep, ok := out.(driver.CompletedReplay); !ok || err != nil || !bytes.Equal(rep.Record.Response, resp) {
				t.Fatalf("replay = %T %v", out, err)
			}
		}
		if cc.CSCStats().Hits == hits {
			t.Fatal("no replay was served from the client-side cache")
		}
	})
	t.Run("an entry cached while EXECUTING is never replayed", func(t *testing.T) {
		f := storetest.NewFixture()
		nonce := onceflow.NewNonce()
		acq, err := direct.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), nonce))
		if err != nil {
			t.Fatal(err)
		}
		hits := cc.CSCStats().Hits
		for range 3 { // the read of the EXECUTING record is cached
			if out, err := cached.Claim(ctx, f.Claim(onceflow.NewOwner())); err != nil || fmt.Sprintf("%T", out) != "driver.InProgress" {
				t.Fatalf("claim of the EXECUTING record = %T %v", out, err)
			}
		}
		if cc.CSCStats().Hits == hits {
			t.Fatal("the read of the EXECUTING record was never answered from the cache")
		}
		if _, err := direct.Complete(ctx, driver.CompleteRequest{Ownership: acq.(driver.Acquired).Ownership, Nonce: nonce, Response: []byte("done"), TTL: f.TTL}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			out, err := cached.Claim(ctx, f.Claim(onceflow.NewOwner()))
			if rep, ok := out.(driver.CompletedReplay); !ok || err != nil || string(rep.Record.Response) != "done" {
				t.Fatalf("claim after completion = %T %+v %v", out, out, err)
			}
		}
	})
	for _, pipelined := range []bool{false, true} {
		t.Run(fmt.Sprintf("without ReplayCache the cache is not read (auto-pipelined=%t)", pipelined), func(t *testing.T) {
			cc := cachingClient(t)
			s := testStore(t, Config{Client: cc, Namespace: ns, NoAutoPipeline: !pipelined})
			if pipelined {
				s.pipeReads.Add(1) // a read in flight: every read rides the auto-pipeliner
			}
			f, _ := completedRecord(t, direct, []byte("ok"))
			for range 3 {
				if out, err := s.Claim(ctx, f.Claim(onceflow.NewOwner())); err != nil || fmt.Sprintf("%T", out) != "driver.CompletedReplay" {
					t.Fatalf("replay = %T %v", out, err)
				}
			}
			if st := cc.CSCStats(); st.Hits != 0 || st.Entries != 0 {
				t.Fatalf("the store used the client's cache: %+v", st)
			}
			if pipelined && s.pipelined.Load() != 3 {
				t.Fatalf("%d reads rode the auto-pipeliner, want 3", s.pipelined.Load())
			}
		})
	}
}

// TestReplayReadStopsWhileClaimsFindNothing: after missLimit claims of new
// records (each read found nothing), claims go straight to the script,
// which still replays a COMPLETED record; within probeEvery claims a read
// finds that replay, and from then on replays are reads again.
func TestReplayReadStopsWhileClaimsFindNothing(t *testing.T) {
	t.Parallel()
	s := testStore(t, Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	ctx := context.Background()
	done, _ := completedRecord(t, s, []byte("done")) // one miss, one replay-free complete
	for range missLimit {
		f := storetest.NewFixture()
		if out, err := s.Claim(ctx, f.Claim(onceflow.NewOwner())); err != nil || fmt.Sprintf("%T", out) != "driver.Acquired" {
			t.Fatalf("claim = %T %v", out, err)
		}
	}
	reads := 0
	for range probeEvery {
		if s.gate.read() {
			reads++
		}
	}
	if reads != 1 {
		t.Fatalf("%d of %d claims would read first after a run of claims that found nothing, want 1", reads, probeEvery)
	}
	replay := func() {
		t.Helper()
		out, err := s.Claim(ctx, done.Claim(onceflow.NewOwner()))
		if rep, ok := out.(driver.CompletedReplay); !ok || err != nil || string(rep.Record.Response) != "done" {
			t.Fatalf("replay = %T %v", out, err)
		}
	}
	for i := 0; s.plainReplays.Load() == 0; i++ {
		if i > probeEvery {
			t.Fatalf("no read within %d claims of a COMPLETED record", i)
		}
		replay()
	}
	served := s.plainReplays.Load()
	for range 5 {
		replay()
	}
	if got := s.plainReplays.Load() - served; got != 5 {
		t.Fatalf("%d of 5 replays were reads after the reads turned back on", got)
	}
}
