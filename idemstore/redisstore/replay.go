package redisstore

import (
	"context"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
)

// A replay is one read command, no script: HMGET of the fields a replay
// needs, checked in Go by the rules the scripts check them by. Only a
// clean COMPLETED match is replayed from it; anything else (no record,
// another state, another fingerprint, codec or policy, a field that breaks
// its rule, a response that does not match its checksum, a chunk after a
// missing one) is left to claim.lua, which decides, and refuses a corrupt
// record, as it always did. A read writes nothing, so the rule that a
// corrupt record is refused before any write holds without a script.

// The fields the replay read asks for, in the order of the reply: the
// fingerprint, the packed fields (schema.MetaField: the state, codec,
// policy, attempt, rev, createdAt and sum among them) and the first
// chunks.
const (
	rdFp = iota
	rdMeta
	rdResp // the first chunk; replayChunks chunks follow it
)

// replayChunks is how many response chunks the replay read asks for: a
// response of up to replayChunks × schema.ChunkSize bytes is replayed with
// one command; a longer one needs a second read of the rest.
const replayChunks = 4

// replayArgs is the replay read, with the key left out (index 1). The
// values are boxed once, here: each read copies the slice and sets the key.
var replayArgs = func() []any {
	args := []any{"hmget", nil, schema.Fields[schema.FFp].Key, schema.MetaField}
	for i := 1; i <= replayChunks; i++ {
		args = append(args, schema.ChunkField(i))
	}
	return args
}()

// restArgs reads the chunks after the first replayChunks.
var restArgs = func() []any {
	args := []any{"hmget", nil}
	for i := replayChunks + 1; i <= schema.MaxChunks; i++ {
		args = append(args, schema.ChunkField(i))
	}
	return args
}()

// A fresh operation pays for the replay read with a round trip that finds
// nothing to replay. So the store reads first only while reads find
// replays: after missLimit reads in a row found nothing, only every
// probeEvery-th claim reads first, and the first replay a read finds turns
// the reads back on (a run of duplicates does so within probeEvery
// claims). Skipping the read changes no outcome: claim.lua replays a
// COMPLETED record itself, as it did before the read existed.
const (
	missLimit  = 64
	probeEvery = 16
)

// replayGate decides whether a claim reads first.
type replayGate struct {
	misses  atomic.Int64 // reads in a row that found nothing, up to missLimit
	skipped atomic.Int64 // claims since the reads stopped
}

// read reports whether this claim should send the replay read first.
func (g *replayGate) read() bool {
	if g.misses.Load() < missLimit {
		return true
	}
	return g.skipped.Add(1)%probeEvery == 0
}

// found records whether a read found a replay.
func (g *replayGate) found(replay bool) {
	switch n := g.misses.Load(); {
	case replay && n != 0:
		g.misses.Store(0)
	case !replay && n < missLimit:
		g.misses.Add(1)
	}
}

// replayRead is what the replay read found: a replay, or nothing to
// replay (then claim.lua decides).
type replayRead struct {
	rec onceflow.Record
	ok  bool
}

// readReplay sends the replay read and checks it. A transport error is
// returned as it is (the caller classifies it); any other doubt is
// ok == false.
func (s *Store) readReplay(ctx context.Context, c *replayCall, key any, req driver.ClaimRequest) (replayRead, error) {
	v, err := s.hmget(ctx, c, replayArgs, key)
	if err != nil || v == nil {
		return replayRead{}, err
	}
	meta, ok := replayMatch(v, req)
	if !ok {
		return replayRead{}, nil
	}
	chunks := v[rdResp:]
	var rest []string
	if last := chunks[len(chunks)-1]; len(last) == schema.ChunkSize {
		// The response may go on: read the rest.
		if rest, err = s.hmget(ctx, c, restArgs, key); err != nil || rest == nil {
			return replayRead{}, err
		}
	}
	resp, ok := joinReplayChunks(chunks, rest)
	if !ok {
		return replayRead{}, nil
	}
	sum, _ := schema.ParseChecksum(meta[schema.FSum])
	if crc32.Checksum(resp, castagnoli) != sum {
		return replayRead{}, nil // claim.lua replays it, and the decoder refuses it
	}
	attempt, _ := schema.ParseInteger(meta[schema.FAttempt])
	rev, _ := schema.ParseInteger(meta[schema.FRev])
	created, _ := schema.ParseInteger(meta[schema.FCreatedAt])
	return replayRead{ok: true, rec: onceflow.Record{
		State: onceflow.StateCompleted, Attempt: attempt, Rev: rev, Codec: req.Codec, Policy: req.Policy,
		CreatedAt: time.UnixMilli(created), Response: resp,
	}}, nil
}

// replayCall holds what a replay read would otherwise allocate on every
// call: its bounded context, its arguments and its command. The store keeps
// them in a sync.Pool (Store.calls) for the reads that return only once
// go-redis has let go of them (the reads bounded by the context's deadline;
// runGuarded's reads may outlive the store's wait, so each gets a new one).
// release clears every reference before it goes back, so the pool holds no
// caller's context, key or reply.
type replayCall struct {
	ctx  deadlineCtx
	args [max(4+replayChunks, 2+schema.MaxChunks-replayChunks)]any // replayArgs, restArgs
	cmd  redis.StringSliceCmd
	// keyBuf holds the key (key), and keeps its capacity from read to read.
	keyBuf []byte
	// lent is set when the auto-pipeliner may still hold cmd (readPipelined).
	lent bool
}

// key builds ref's key in c and returns it as an argument (see blob).
func (c *replayCall) key(s *Store, ref onceflow.Ref) any {
	c.keyBuf = s.appendKey(c.keyBuf[:0], ref)
	return blob{&c.keyBuf}
}

// release clears c and puts it back into pool, unless the auto-pipeliner
// may still hold it.
func (c *replayCall) release(pool *sync.Pool) {
	if c.lent {
		return
	}
	c.ctx = deadlineCtx{}
	clear(c.args[:])
	c.cmd = redis.StringSliceCmd{}
	c.keyBuf = c.keyBuf[:0]
	pool.Put(c)
}

// hmget sends one of the replay reads (args, with the key at index 1) in
// c's command and returns its values, or nil when the reply does not hold
// one a field.
func (s *Store) hmget(ctx context.Context, c *replayCall, args []any, key any) ([]string, error) {
	a := c.args[:len(args)]
	copy(a, args)
	a[1] = key
	c.cmd = *redis.NewStringSliceCmd(ctx, a...)
	if err := s.read(ctx, c); err != nil {
		return nil, err
	}
	if v := c.cmd.Val(); len(v) == len(args)-2 {
		return v, nil
	}
	return nil, nil
}

// read sends the replay read in c: through the auto-pipeliner while
// another read is in flight (unless Config.NoAutoPipeline), else by itself
// (go-redis may answer it from its client-side cache, which
// Config.ReplayCache allows), or, when the client has a cache the store
// must not use, as a pipeline of one, which go-redis always sends to the
// server.
func (s *Store) read(ctx context.Context, c *replayCall) error {
	cmd := &c.cmd
	if s.pipeOn {
		n := s.pipeReads.Add(1)
		defer s.pipeReads.Add(-1)
		if n > 1 {
			if ap := s.autoPipeliner(ctx); ap != nil {
				return s.readPipelined(ctx, c, ap)
			}
		}
	}
	if !s.bypassCache {
		return s.client.Process(ctx, cmd)
	}
	pipe := s.client.Pipeline()
	if err := pipe.Process(ctx, cmd); err != nil {
		return err
	}
	_, err := pipe.Exec(ctx)
	return err
}

// readPipelined sends the replay read in c through the auto-pipeliner
// and waits for it until ctx is done. The auto-pipeliner runs a queued
// command whatever its context says, so a read the store stopped waiting
// for may still be in go-redis' hands: then c is lent, never pooled
// again.
func (s *Store) readPipelined(ctx context.Context, c *replayCall, ap *redis.AutoPipeliner) error {
	s.pipelined.Add(1)
	f := ap.Submit(ctx, &c.cmd)
	if err := f.WaitContext(ctx); err != nil {
		if ctx.Err() != nil {
			c.lent = true
			return fmt.Errorf("redisstore: no reply to the auto-pipelined replay read by the deadline: %w", context.Cause(ctx))
		}
		return err
	}
	return nil
}

// autoPipeliner returns the client's deferred auto-pipeliner, asking the
// client for it the first time (go-redis makes one a client, and starts
// its goroutines then), or nil when the client could not give it: the
// reads then go by themselves, and the store says so once.
func (s *Store) autoPipeliner(ctx context.Context) *redis.AutoPipeliner {
	if ap := s.pipe.Load(); ap != nil || s.pipeGone.Load() {
		return ap
	}
	s.pipeMu.Lock()
	defer s.pipeMu.Unlock()
	if ap := s.pipe.Load(); ap != nil || s.pipeGone.Load() {
		return ap
	}
	ap, err := s.client.AsyncAutoPipeline()
	if err != nil {
		s.pipeGone.Store(true)
		s.logger.WarnContext(ctx, "onceflow: the Redis client gives no auto-pipeliner; replay reads go by themselves (Config.NoAutoPipeline says so without this line)", "err", err)
		return nil
	}
	s.pipe.Store(ap)
	return ap
}

// replayMatch reports whether the fields read (go-redis gives "" for a
// missing one, and no field of a record is empty but a response) are a
// record with the caller's fingerprint (kept raw) whose packed fields pass
// schema.ParseMeta (the scripts' rules), COMPLETED, with the caller's
// codec and policy and a sum, with a first response chunk, and returns
// the packed fields. An empty first chunk (an empty response, or none) is
// left to the script, which tells the two apart.
func replayMatch(v []string, req driver.ClaimRequest) ([schema.NumFields]string, bool) {
	var fp [32]byte
	if len(req.Fingerprint) != 2*len(fp) || v[rdFp] != string(appendRaw(fp[:0], string(req.Fingerprint))) || v[rdResp] == "" {
		return [schema.NumFields]string{}, false
	}
	meta, bad := schema.ParseMeta(v[rdMeta])
	if bad != "" || meta[schema.FState] != string(onceflow.StateCompleted) || meta[schema.FCodec] != req.Codec || meta[schema.FSum] == "" {
		return meta, false
	}
	if p, _ := schema.ParseInteger(meta[schema.FPolicy]); p != int64(req.Policy) {
		return meta, false
	}
	return meta, true
}

// joinReplayChunks joins a response's chunks as write_resp stored them:
// every chunk but the last schema.ChunkSize bytes, none present after a
// missing one. Anything else is not ok (the script names what is wrong).
func joinReplayChunks(first, rest []string) ([]byte, bool) {
	parts := [2][]string{first, rest}
	n, chunks, last, ended := 0, 0, 0, false
	for _, part := range parts {
		for _, c := range part {
			switch {
			case c == "":
				ended = true
			case ended:
				return nil, false // a chunk after a missing one: stray
			case chunks > 0 && last != schema.ChunkSize:
				return nil, false // a chunk after one shorter than a whole chunk
			default:
				n, chunks, last = n+len(c), chunks+1, len(c)
			}
		}
	}
	resp := make([]byte, 0, n)
	for _, part := range parts {
		for _, c := range part {
			if c == "" {
				return resp, true
			}
			resp = append(resp, c...)
		}
	}
	return resp, true
}
