package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
)

// The scripts Redis runs, generated from the sources in lua/ (the script
// bodies, record.lua's helpers) and the record schema (internal/schema)
// by go generate; the store sends exactly these bytes.
//
//go:generate go run ./internal/gen
var (
	//go:embed lua/gen/claim.lua
	claimLua string
	//go:embed lua/gen/transition.lua
	transitionLua string
	//go:embed lua/gen/renew.lua
	renewLua string
	//go:embed lua/gen/release.lua
	releaseLua string
	//go:embed lua/gen/inspect.lua
	inspectLua string
	//go:embed lua/gen/resolve.lua
	resolveLua string
)

// script is one generated Lua script.
type script struct {
	name string
	// readOnly is set for a script whose shebang declares it no-writes
	// (inspect): the store runs it with EVALSHA_RO / EVAL_RO.
	readOnly bool
	// hash and src are the script's SHA-1 and its source as interface
	// values, boxed once: run hands them to go-redis on every call.
	hash, src any
	*redis.Script
}

// The command names and the key count of a script call, as interface
// values boxed once (converting a string to an interface allocates). They
// are never written.
var (
	cmdEvalSha   any = "evalsha"
	cmdEval      any = "eval"
	cmdEvalShaRO any = "evalsha_ro"
	cmdEvalRO    any = "eval_ro"
	oneKey       any = 1
)

// scriptSet is every script, built one way.
type scriptSet struct {
	claim, transition, renew, release, inspect, resolve script
}

func (ss *scriptSet) all() []script {
	return []script{ss.claim, ss.transition, ss.renew, ss.release, ss.inspect, ss.resolve}
}

// newScriptSet builds the scripts, with or without their shebang lines.
func newScriptSet(shebang bool) *scriptSet {
	mk := func(name, src string) script {
		first, _, _ := strings.Cut(src, "\n")
		readOnly := strings.HasPrefix(first, "#!lua") && strings.Contains(first, "no-writes")
		if !shebang {
			src = withoutShebang(src)
		}
		return newScript(name, src, readOnly)
	}
	return &scriptSet{
		claim:      mk("claim", claimLua),
		transition: mk("transition", transitionLua),
		renew:      mk("renew", renewLua),
		release:    mk("release", releaseLua),
		inspect:    mk("inspect", inspectLua),
		resolve:    mk("resolve", resolveLua),
	}
}

// newScript builds one script from its source.
func newScript(name, src string, readOnly bool) script {
	sc := redis.NewScript(src)
	return script{name: name, readOnly: readOnly, hash: sc.Hash(), src: src, Script: sc}
}

// withoutShebang turns a script's Redis 7 "#!lua…" first line (with its
// flags) into a comment, for servers that do not know it: Redis before 7
// and miniredis. The line numbers stay those of the file.
func withoutShebang(src string) string {
	if strings.HasPrefix(src, "#!") {
		return "-- " + src
	}
	return src
}

var (
	redis7Scripts = newScriptSet(true)
	legacyScripts = newScriptSet(false)
)

// LoadScripts loads every script into the server's script cache (on every
// shard of a Cluster), and takes the first reading of Redis' clock for the
// bounded calls (bound.go). It is optional: a call that finds its script
// missing loads it then, and the first bounded call reads the clock. Call
// it at startup to surface a misconfigured server early.
func (s *Store) LoadScripts(ctx context.Context) error {
	for _, sc := range s.scripts.all() {
		if err := sc.Load(ctx, s.client).Err(); err != nil {
			return fmt.Errorf("redisstore: load script %s: %w", sc.name, err)
		}
	}
	if s.clock.on && s.clock.refreshing.CompareAndSwap(false, true) {
		s.clock.refresh(ctx)
		s.clock.refreshing.Store(false)
	}
	return nil
}

// run calls EVALSHA and, when the server does not know the script (restart,
// failover, SCRIPT FLUSH), sends it whole with EVAL once. NOSCRIPT proves the
// script did not run, so the retry cannot apply anything twice.
//
// A read-only script (inspect) goes by EVALSHA_RO and EVAL_RO (Redis 7.0+)
// instead: Redis judges an EVALSHA whose script it has not cached by the
// command's own flags, which say it may write, so under CLIENT PAUSE WRITE
// (a failover pauses writes) an EVALSHA of an uncached script would wait
// for the pause to end however the script's shebang is flagged; the _RO
// commands are read-only by their flags. A server that does not know them
// (Redis before 7.0, miniredis) answers "unknown command", which proves
// nothing ran: the store then remembers that, logs it once, and sends
// EVALSHA / EVAL from then on.
//
// The command is built here, once, as go-redis' Script would build it
// (the name, the script, one key, the arguments; the key's position set
// for a Cluster's routing): with the name and the script boxed once, it
// costs one allocation for the arguments and one for the key.
func (s *Store) run(ctx context.Context, sc script, key string, args ...any) (any, error) {
	return s.runIn(ctx, nil, sc, key, args...)
}

// scriptCall holds what a script call would otherwise allocate: its
// bounded context, its arguments and its command. The store keeps them in
// a sync.Pool (Store.scriptCalls) for the calls that return only once
// go-redis has let go of them (callKey's calls bounded by the context's
// deadline, not runGuarded's, nor the durable ones, which wait on more).
// release clears every reference before it goes back.
type scriptCall struct {
	ctx  deadlineCtx
	args [scriptCallArgs]any
	cmd  redis.Cmd
	// The strings and bytes of the arguments made by text and blob, and
	// the bytes a call packs its arguments into (the raw owner, nonce and
	// fingerprint, COMPLETE's held; it keeps its capacity from call to
	// call).
	strs   [scriptCallTexts]string
	nstrs  int
	blobs  [scriptCallBlobs][]byte
	nblobs int
	buf    []byte
	// keyBuf holds the key (key), and keeps its capacity from call to call.
	keyBuf []byte
	// bounded is set for a call bounded by Redis' clock (bound.go), which
	// may ride the auto-pipeliner; ap is the auto-pipeliner it rides, and
	// lent is set when the auto-pipeliner may still hold the call (its
	// caller stopped waiting at the deadline): it is never pooled again.
	bounded bool
	ap      *redis.AutoPipeliner
	lent    bool
}

// key builds ref's key in c and returns it as an argument (see blob).
func (c *scriptCall) key(s *Store, ref onceflow.Ref) any {
	c.keyBuf = s.appendKey(c.keyBuf[:0], ref)
	return c.blob(c.keyBuf)
}

// scriptCallArgs is the most arguments a pooled script call holds: the
// command, the script, the key count and the key, and TRANSITION's
// eighteen arguments; a longer call allocates its own.
const scriptCallArgs = 22

// scriptCallBlobs is the most byte slices a pooled script call holds for
// its arguments (blob, raw, bound): TRANSITION's key, owner, nonce,
// response, the held m, its fingerprint, the head and tail of the m it
// writes, and its bound's two numbers.
const scriptCallBlobs = 10

// scriptCallTexts is the most strings a pooled script call holds for its
// arguments (text).
const scriptCallTexts = 6

// text returns v as an argument that refers to c's copy of it, when c has
// room (and is not nil), and as v itself otherwise.
func (c *scriptCall) text(v string) any {
	if c == nil || c.nstrs == len(c.strs) {
		return v
	}
	p := &c.strs[c.nstrs]
	*p = v
	c.nstrs++
	return text{p}
}

// blob returns b as an argument that refers to c's copy of the slice,
// when c has room (and is not nil), and as b itself otherwise.
func (c *scriptCall) blob(b []byte) any {
	if c == nil || c.nblobs == len(c.blobs) {
		return b
	}
	p := &c.blobs[c.nblobs]
	*p = b
	c.nblobs++
	return blob{p}
}

// bound returns b's two arguments (bound.go), in c's buf: the decimal
// served and budget, or two "" when b is unbounded.
func (c *scriptCall) bound(b bound) (served, budget any) {
	if !b.ok() {
		return "", ""
	}
	n := len(c.buf)
	c.buf = strconv.AppendInt(c.buf, b.served, 10)
	m := len(c.buf)
	c.buf = strconv.AppendInt(c.buf, b.budget, 10)
	return c.blob(c.buf[n:m:m]), c.blob(c.buf[m:len(c.buf):len(c.buf)])
}

// raw returns, as an argument, the bytes the hex h encodes (appendRaw),
// in c's buf when c is not nil.
func (c *scriptCall) raw(h string) any {
	if c == nil {
		return appendRaw(nil, h)
	}
	n := len(c.buf)
	c.buf = appendRaw(c.buf, h)
	return c.blob(c.buf[n:len(c.buf):len(c.buf)])
}

// release clears c and puts it back into pool, unless the
// auto-pipeliner may still hold it.
func (c *scriptCall) release(pool *sync.Pool) {
	if c.lent {
		return
	}
	c.bounded, c.ap = false, nil
	c.ctx = deadlineCtx{}
	clear(c.args[:])
	c.cmd = redis.Cmd{}
	clear(c.strs[:])
	clear(c.blobs[:])
	c.nstrs, c.nblobs, c.buf, c.keyBuf = 0, 0, c.buf[:0], c.keyBuf[:0]
	pool.Put(c)
}

// runIn is run with its arguments and command in c (nil: allocated).
func (s *Store) runIn(ctx context.Context, c *scriptCall, sc script, key any, args ...any) (any, error) {
	var cmd []any
	if c != nil && 4+len(args) <= len(c.args) {
		cmd = c.args[:4+len(args)]
	} else {
		cmd = make([]any, 4+len(args))
	}
	cmd[2], cmd[3] = oneKey, key
	copy(cmd[4:], args)
	if sc.readOnly && !s.noReadOnlyEval.Load() {
		v, err := s.send(ctx, c, sc, cmd, cmdEvalShaRO, cmdEvalRO)
		if err == nil || !redis.HasErrorPrefix(err, "unknown command") {
			return v, err
		}
		if s.noReadOnlyEval.CompareAndSwap(false, true) {
			s.logger.InfoContext(ctx, "onceflow: the Redis server does not know EVALSHA_RO (Redis before 7.0?); read-only scripts run with EVALSHA, which waits while writes are paused",
				"script", sc.name, "err", err)
		}
	}
	return s.send(ctx, c, sc, cmd, cmdEvalSha, cmdEval)
}

// runKeys is run for a script of several keys (renew.lua's batch): the
// keys, then the arguments. Its keys must share a slot, so the store
// sends such a call only on a *redis.Client.
func (s *Store) runKeys(ctx context.Context, sc script, keys []string, args []any) (any, error) {
	cmd := make([]any, 3, 3+len(keys)+len(args))
	cmd[2] = len(keys)
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)
	return s.send(ctx, nil, sc, cmd, cmdEvalSha, cmdEval)
}

// send sends cmd (its name and script left for it to set) by its hash
// with byHash, and, when the server does not have it, whole with whole.
func (s *Store) send(ctx context.Context, c *scriptCall, sc script, cmd []any, byHash, whole any) (any, error) {
	cmd[0], cmd[1] = byHash, sc.hash
	v, err := s.process(ctx, c, cmd)
	if isNoScript(err) {
		s.reloads.Add(1)
		s.logger.DebugContext(ctx, "onceflow: script not cached on the server; sending it whole", "script", sc.name)
		cmd[0], cmd[1] = whole, sc.src
		v, err = s.process(ctx, c, cmd)
	}
	return v, err
}

// process sends one script call whose key is its fourth argument, in c's
// command (nil: a new one).
func (s *Store) process(ctx context.Context, c *scriptCall, args []any) (any, error) {
	var cmd *redis.Cmd
	if c != nil {
		c.cmd = *redis.NewCmd(ctx, args...)
		cmd = &c.cmd
	} else {
		cmd = redis.NewCmd(ctx, args...)
	}
	cmd.SetFirstKeyPos(3)
	if c != nil && c.ap != nil {
		return s.processPipelined(ctx, c, cmd)
	}
	_ = s.client.Process(ctx, cmd)
	return cmd.Result()
}

// processPipelined sends a bounded script call through the
// auto-pipeliner and waits for it until ctx is done. The auto-pipeliner
// runs a queued command whatever its context says; the script's bound
// makes one that reaches Redis after the deadline refuse itself, so the
// call the store stopped waiting for took effect by then or never. c is
// then lent, never pooled again.
func (s *Store) processPipelined(ctx context.Context, c *scriptCall, cmd *redis.Cmd) (any, error) {
	s.pipelinedScripts.Add(1)
	f := c.ap.Submit(ctx, cmd)
	if err := f.WaitContext(ctx); err != nil {
		if ctx.Err() != nil {
			c.lent = true
			return nil, fmt.Errorf("redisstore: no reply to the auto-pipelined script by the deadline (a bounded call: it took effect by then or never): %w", context.Cause(ctx))
		}
		return nil, err
	}
	return cmd.Result()
}

// lateCode is the head of a LATE reply (bound.go).
var lateCode = strconv.FormatInt(int64(schema.Late), 10) + "\x00"

// isLate reports whether raw is a LATE reply: a bounded call that Redis
// ran after its bound, which changed nothing.
func isLate(raw any) bool {
	v, ok := raw.(string)
	return ok && strings.HasPrefix(v, lateCode)
}

// isNoScript reports whether err is the server's NOSCRIPT (go-redis may
// hand it over as redis.ErrNoScript).
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
