package redisstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// DefaultCommandTimeout is the default time one script call may take.
const DefaultCommandTimeout = 200 * time.Millisecond

// KeyLayoutVersion is the version of the record's layout, the "v2" in
// every record key. Version 2 keeps the owner, fingerprint and nonce as
// raw bytes under one-letter fields and the scope digest in the key as
// base64url; a record of version 1 (hex, long field names, the digest as
// hex) lives under another key, which a store of version 2 never reads:
// there is no migration (nothing was released with version 1).
const KeyLayoutVersion = 2

// Config configures a Store.
type Config struct {
	// Client is the Redis client: a *redis.Client on one server, one from
	// redis.NewFailoverClient (Sentinel), or a *redis.ClusterClient.
	// Required. The store does not close it. A *redis.Ring is refused
	// (ErrUnsupportedClient): it hashes keys to servers on the client, so
	// a change of its membership moves a record to a server that does not
	// hold it (TestRingIsRefused).
	//
	// Build it with ContextTimeoutEnabled: then go-redis itself stops
	// reading at the call's deadline. A client without it (go-redis'
	// default) would wait for its ReadTimeout, 3 s by default, whatever
	// the context says; the store does not let it: it runs each call of
	// such a client (or of a client whose options it cannot read) in a
	// goroutine of its own and stops waiting at the deadline, reporting
	// the call indeterminate, at the cost of that goroutine and a
	// connection that stays busy until go-redis gives up.
	Client redis.UniversalClient
	// Namespace prefixes every key: "<Namespace>:idem:v2:…". Default
	// "onceflow". It must not contain '{' or '}'.
	Namespace string
	// CommandTimeout bounds each script call. Default 200ms. It is the
	// call's context deadline: with ContextTimeoutEnabled, go-redis sets
	// every read and write of the call by it, and a wait for a connection
	// ends by it too (it ends as soon as the caller's context is done only
	// when that was before the wait began).
	CommandTimeout time.Duration
	// MaxResponseBytes is the largest response Complete and Resolve store.
	// Default 1 MiB (driver.DefaultMaxResponseBytes).
	MaxResponseBytes int
	// Logger receives debug lines (script reloads), and one info line if
	// the server turns out not to know EVALSHA_RO (see Store.Inspect).
	// Default: discard.
	Logger *slog.Logger
	// OmitShebang sends the scripts without their Redis 7 "#!lua" header,
	// for servers that do not understand it: Redis before 7 and miniredis
	// (which `cmd/worker -dev` falls back to). The scripts are otherwise
	// the same.
	OmitShebang bool
	// ReplayCache lets go-redis answer a replay's read from its
	// server-assisted client-side cache: Client must be a *redis.Client
	// built with Protocol 3 and a ClientSideCacheConfig (or
	// ClientSideCache), or New refuses the setting. A COMPLETED record does
	// not change until it expires, and a cached reply is replayed only when
	// it is a COMPLETED match whose response matches its checksum, so a
	// cache entry of a record that was not COMPLETED when cached is never
	// served; any doubt goes to Redis. A cached reply may outlive the
	// record by as long as its invalidation takes to arrive (go-redis
	// bounds it by the cache's MaxStaleness): it is still the true result
	// of the request. It needs NoAutoPipeline. Default false: the
	// store sends its replay read past any client-side cache the client
	// has.
	ReplayCache bool
	// NoAutoPipeline turns off what the store does by default: a replay
	// read of a claim that finds another of the store's replay reads in
	// flight goes through go-redis' deferred auto-pipeliner (the client's
	// AsyncAutoPipeline), which writes the reads of concurrent claims to
	// Redis as one pipeline: at 64 concurrent replays it more than doubles
	// their throughput and cuts the client's CPU per replay to about a
	// third (docs/performance.md). A claim or a transition (start,
	// complete, fail) that finds another in flight rides it too, when the
	// store bounds it by Redis' clock (bound.go): go-redis does not honour
	// the deadline of a command once queued, and a bounded script that
	// Redis runs after its caller stopped waiting (at CommandTimeout, or
	// the context's deadline) refuses itself, where an unbounded one
	// could take a lease nobody holds; an unbounded call (a Cluster, a
	// Ring, a client without ContextTimeoutEnabled, no trusted reading of
	// Redis' clock) goes by itself. A lone call goes to the client as it
	// would without it, so a single caller's latency does not change. The
	// auto-pipeliner is the client's, configured by its
	// Options.AutoPipelineOptions (go-redis' defaults otherwise), which
	// New checks when it can read them (a *redis.Client, a
	// *redis.ClusterClient); the store asks the client for it on the
	// first call that finds another in flight, so a store whose calls
	// never meet starts none of its goroutines, and from then on it lives
	// until the client is closed. Should the client then fail to give it,
	// the calls go by themselves, and the store logs it once. go-redis
	// marks it EXPERIMENTAL; this module requires the first go-redis
	// release that has it (v9.22.0), and its tests run on it and on
	// v9.23.0. On a Cluster the replays of 8 goroutines ran at half the
	// rate of direct reads in TestClusterReshardWhileOperationsRun:
	// measure there, and set NoAutoPipeline if it does not pay.
	// ReplayCache needs it set (go-redis never answers a pipelined read
	// from its cache). Default false: reads and bounded scripts are
	// auto-pipelined.
	NoAutoPipeline bool
	// Durability says what the store waits for after a write that matters
	// before it answers (durability.go): DurabilityNone (the default: the
	// primary's reply), DurabilityReplicas (WAIT) or DurabilityAOF
	// (WAITAOF, Redis 7.2+). A wait that falls short makes the call
	// Indeterminate, as a lost reply. Other than none it needs a
	// *redis.Client (one server or Sentinel) or a *redis.ClusterClient
	// (the wait runs on the primary of the record's slot, and a slot
	// that moved meanwhile makes the call Indeterminate too).
	Durability Durability
	// DurableReplicas is the number of replicas the wait asks for.
	// Default 1 (DurabilityAOF accepts 0: the primary's own fsync).
	DurableReplicas int
	// DurableTimeout bounds the wait; it must be less than
	// CommandTimeout. Default half of CommandTimeout.
	DurableTimeout time.Duration
}

func (c *Config) setDefaults() error {
	if c.Client == nil {
		return errors.New("redisstore: Config.Client is required: pass a redis.UniversalClient")
	}
	if err := checkClient(c.Client); err != nil {
		return err
	}
	if c.Namespace == "" {
		c.Namespace = "onceflow"
	}
	if strings.ContainsAny(c.Namespace, "{}") {
		return fmt.Errorf("redisstore: Config.Namespace %q must not contain '{' or '}' (they are the Cluster hash tag)", c.Namespace)
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.CommandTimeout < 0 {
		return fmt.Errorf("redisstore: Config.CommandTimeout must be positive, got %v", c.CommandTimeout)
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = driver.DefaultMaxResponseBytes
	}
	if c.MaxResponseBytes < 0 || c.MaxResponseBytes > 512<<20 {
		return fmt.Errorf("redisstore: Config.MaxResponseBytes must be 1 to 512 MiB, got %d", c.MaxResponseBytes)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ReplayCache && !clientCaches(c.Client) {
		return errors.New("redisstore: Config.ReplayCache needs a *redis.Client with a client-side cache (Protocol 3 and ClientSideCacheConfig)")
	}
	if c.ReplayCache && !c.NoAutoPipeline {
		return errors.New("redisstore: Config.ReplayCache and the auto-pipelined replay reads (on unless Config.NoAutoPipeline) exclude each other, " +
			"since go-redis never answers a pipelined read from its cache: set Config.NoAutoPipeline with Config.ReplayCache")
	}
	return c.setDurabilityDefaults()
}

// clientCaches reports whether go-redis may answer the client's reads from
// a client-side cache.
func clientCaches(c redis.UniversalClient) bool {
	rc, ok := c.(*redis.Client)
	if !ok {
		return false
	}
	o := rc.Options()
	return o.ClientSideCacheConfig != nil || o.ClientSideCache != nil
}

// Store is the Redis implementation of driver.Store. It is safe for
// concurrent use.
type Store struct {
	client  redis.UniversalClient
	ns      string
	timeout time.Duration
	maxResp int
	logger  *slog.Logger
	reloads atomic.Int64
	// plainReplays counts the replays served by the replay read, without
	// a script (replay.go).
	plainReplays atomic.Int64
	// pipelined counts the replay reads sent through the auto-pipeliner
	// (unless Config.NoAutoPipeline), for the tests.
	pipelined atomic.Int64
	// gate decides whether a claim sends the replay read first (replay.go).
	gate    replayGate
	scripts *scriptSet
	// guarded is set when the client does not bound its reads by the
	// context: each call then runs in a goroutine the store stops waiting
	// for at the deadline.
	guarded bool
	args    argCache
	// bypassCache is set when the client has a client-side cache the
	// store must not read replays from (Config.ReplayCache is off).
	bypassCache bool
	// cachedReads is set when the replay reads go through the client's
	// client-side cache (Config.ReplayCache, on a client that has one),
	// which caches only a key that is a string.
	cachedReads bool
	// pipeOn is set unless Config.NoAutoPipeline; pipe is then the
	// client's deferred auto-pipeliner once a read asked for it
	// (autoPipeliner, replay.go), pipeGone set if the client failed to
	// give it; pipeReads counts the replay reads in flight, which decides
	// whether a read rides it.
	pipeOn    bool
	pipe      atomic.Pointer[redis.AutoPipeliner]
	pipeMu    sync.Mutex
	pipeGone  atomic.Bool
	pipeReads atomic.Int64
	// pipeScripts counts the bounded script calls in flight, which
	// decides whether one rides the auto-pipeliner; pipelinedScripts
	// counts those that did, for the tests.
	pipeScripts      atomic.Int64
	pipelinedScripts atomic.Int64
	// clock estimates Redis' clock for the bounded calls (bound.go).
	clock *serverClock
	// noReadOnlyEval is set once a server answered that it does not know
	// EVALSHA_RO (see run).
	noReadOnlyEval atomic.Bool
	// durable is Config.Durability, resolved (durability.go).
	durable durability
	// deadlines closes the calls' Done channels (deadline.go).
	deadlines deadlines
	// calls holds the replay reads' *replayCall (replay.go).
	calls sync.Pool
	// scriptCalls holds the script calls' *scriptCall (script.go).
	scriptCalls sync.Pool
	// renewals gathers concurrent Renew calls into one (renew.go).
	renewals renewals
}

var _ driver.Store = (*Store)(nil)

// New returns a Store. It does not talk to Redis.
func New(cfg Config) (*Store, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	st := &Store{
		client:  cfg.Client,
		ns:      cfg.Namespace,
		timeout: cfg.CommandTimeout,
		maxResp: cfg.MaxResponseBytes,
		logger:  cfg.Logger,
		scripts: redis7Scripts,
		guarded: !contextTimeoutEnabled(cfg.Client),
		durable: durability{mode: cfg.Durability, replicas: cfg.DurableReplicas, timeout: cfg.DurableTimeout, channel: cfg.Namespace + durableChannel},
	}
	st.bypassCache = !cfg.ReplayCache && clientCaches(cfg.Client)
	st.cachedReads = cfg.ReplayCache && clientCaches(cfg.Client)
	st.calls.New = func() any { return new(replayCall) }
	st.scriptCalls.New = func() any { return new(scriptCall) }
	_, plain := cfg.Client.(*redis.Client)
	st.renewals.on = plain && !st.guarded && !st.durable.covers(opRenew)
	if cfg.OmitShebang {
		st.scripts = legacyScripts
	}
	st.clock = newServerClock(plain && !st.guarded, func(ctx context.Context) (time.Time, error) {
		return st.client.Time(withDeadline(ctx, st.timeout, &st.deadlines)).Result()
	})
	if !cfg.NoAutoPipeline {
		if err := checkAutoPipelineOptions(cfg.Client); err != nil {
			return nil, fmt.Errorf("redisstore: the client's auto-pipeliner, for the auto-pipelined replay reads (Config.NoAutoPipeline turns them off): %w", err)
		}
		st.pipeOn = true
	}
	return st, nil
}

// checkAutoPipelineOptions checks the options the client's auto-pipeliner
// will be made with, when the client says what they are (a *redis.Client,
// one of Sentinel's among them, or a *redis.ClusterClient), so that
// options it would refuse are refused at New rather than at the first
// concurrent replay read.
func checkAutoPipelineOptions(c redis.UniversalClient) error {
	var o *redis.AutoPipelineOptions
	switch c := c.(type) {
	case *redis.Client:
		o = c.Options().AutoPipelineOptions
	case *redis.ClusterClient:
		o = c.Options().AutoPipelineOptions
	}
	if o == nil {
		return nil
	}
	return o.Validate()
}

// contextTimeoutEnabled reports whether go-redis bounds the client's socket
// reads by the context's deadline. Unknown clients count as not.
func contextTimeoutEnabled(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// CommandTimeout is the longest one store call waits (Config.CommandTimeout).
// driver.NewExecutor checks the lease's safety margin against it.
func (s *Store) CommandTimeout() time.Duration { return s.timeout }

// Key returns the Redis key of a record:
// "<namespace>:idem:v2:d<digestVersion>:<operationCode>:{<scopeDigest>}",
// the scope digest's 32 bytes in unpadded base64url (43 characters, not
// its 64 hex). It holds no raw client key, principal or workflow ID.
func (s *Store) Key(ref onceflow.Ref) string {
	var b [128]byte
	return string(s.appendKey(b[:0], ref))
}

// appendKey appends Key(ref) to dst: a pooled call builds its key in a
// buffer of its own (scriptCall.key, replayCall.key), not in a string.
func (s *Store) appendKey(dst []byte, ref onceflow.Ref) []byte {
	dst = append(dst, s.ns...)
	dst = append(dst, ":idem:v"...)
	dst = strconv.AppendInt(dst, KeyLayoutVersion, 10)
	dst = append(dst, ":d"...)
	dst = strconv.AppendInt(dst, int64(ref.Digest.Version), 10)
	dst = append(dst, ':')
	dst = append(dst, ref.Code...)
	dst = append(dst, ":{"...)
	dst = appendDigest(dst, ref.Digest.Hex)
	return append(dst, '}')
}

// appendDigest appends a scope digest as the key holds it: the bytes of
// its hex in unpadded base64url (which holds neither '{' nor '}', the
// Cluster hash tag's braces). A digest that is not lowercase hex of whole
// bytes, which no validated request holds, is appended as it is.
func appendDigest(dst []byte, h string) []byte {
	if len(h)%2 != 0 || !isLowerHex(h) {
		return append(dst, h...)
	}
	var raw [64]byte
	b := raw[:0]
	if len(h)/2 > len(raw) {
		b = nil
	}
	b = appendRaw(b, h)
	return base64.RawURLEncoding.AppendEncode(dst, b)
}

// isLowerHex reports whether s holds only lowercase hex digits.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ScriptReloads counts the calls that found their script missing on the
// server (NOSCRIPT) and sent it whole.
func (s *Store) ScriptReloads() int64 { return s.reloads.Load() }

// Claim implements driver.Store.
func (s *Store) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimOutcome, error) {
	return s.claim(ctx, req, "")
}

// ClaimStart implements driver.Store.
func (s *Store) ClaimStart(ctx context.Context, req driver.ClaimRequest) (driver.ClaimOutcome, error) {
	if err := req.Nonce.Validate(); err != nil {
		return nil, err
	}
	return s.claim(ctx, req, req.Nonce)
}

func (s *Store) claim(ctx context.Context, req driver.ClaimRequest, nonce onceflow.Nonce) (driver.ClaimOutcome, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	op := opClaim
	if nonce != "" {
		op = opClaimStart
	}
	if s.gate.read() {
		rd, err := s.replay(ctx, op, req)
		if err != nil {
			return nil, err
		}
		s.gate.found(rd.ok)
		if rd.ok {
			s.plainReplays.Add(1)
			return driver.CompletedReplay{Record: rd.rec}, nil
		}
	}
	b := s.clock.bound(ctx, s.remaining(ctx))
	raw, err := s.sendClaim(ctx, op, req, nonce, b)
	if err == nil && b.ok() && isLate(raw) && ctx.Err() == nil && s.clock.disproves(b) {
		// A LATE reply that proves the reading of Redis' clock wrong:
		// nothing changed; once more, unbounded. (Any other LATE is
		// decoded as what it is: nothing changed.)
		raw, err = s.sendClaim(ctx, op, req, nonce, bound{})
	}
	if err != nil {
		return nil, err
	}
	return decodeClaim(op, req, nonce, raw)
}

// sendClaim sends claim.lua for req, bounded by b.
func (s *Store) sendClaim(ctx context.Context, op string, req driver.ClaimRequest, nonce onceflow.Nonce, b bound) (any, error) {
	c := s.newCall()
	c.bounded = b.ok()
	served, budget := c.bound(b)
	return s.call(ctx, c, op, req.Ref, s.scripts.claim,
		c.raw(string(req.Owner)), c.text(string(req.Operation)), c.raw(string(req.Fingerprint)), s.args.str(req.Codec), s.args.int(int64(req.Policy)),
		s.args.int(ms(req.Lease)), s.args.int(ms(req.Retention)), c.raw(string(nonce)), served, budget)
}

// Start implements driver.Store.
func (s *Store) Start(ctx context.Context, req driver.StartRequest) (driver.TransitionOutcome, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return s.transition(ctx, opStart, req.Ownership, onceflow.StateExecuting, "CLAIMED",
		req.Nonce, strconv.FormatInt(ms(req.Lease), 10), req.Retention, nil, "", nil)
}

// Complete implements driver.Store.
func (s *Store) Complete(ctx context.Context, req driver.CompleteRequest) (driver.TransitionOutcome, error) {
	if err := req.Validate(s.maxResp); err != nil {
		return nil, err
	}
	resp := req.Response
	if resp == nil {
		resp = []byte{}
	}
	return s.transition(ctx, opComplete, req.Ownership, onceflow.StateCompleted, "EXECUTING",
		req.Nonce, "", req.TTL, resp, "", &req.Started)
}

// Fail implements driver.Store.
func (s *Store) Fail(ctx context.Context, req driver.FailRequest) (driver.TransitionOutcome, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return s.transition(ctx, opFail, req.Ownership, req.Target, "CLAIMED,EXECUTING",
		req.Nonce, "", req.TTL, nil, req.Reason, nil)
}

// transition sends TRANSITION. With a lease (START), ttl is the retention
// after the lease; without, the key's TTL. A COMPLETE sends started, the
// record its start left (nil or zero: not known), for the script to
// compare the stored one with.
func (s *Store) transition(ctx context.Context, op string, o driver.Ownership, target onceflow.State,
	sources string, nonce onceflow.Nonce, lease string, ttl time.Duration, resp []byte, reason string, started *onceflow.Record,
) (driver.TransitionOutcome, error) {
	hasResp, sum := "0", ""
	if resp != nil {
		hasResp, sum = "1", checksum(resp)
	}
	b := s.clock.bound(ctx, s.remaining(ctx))
	raw, held, err := s.sendTransition(ctx, op, o, target, sources, nonce, lease, ttl, resp, hasResp, sum, reason, started, b)
	if err == nil && b.ok() && isLate(raw) && ctx.Err() == nil && s.clock.disproves(b) { // as for a claim
		raw, held, err = s.sendTransition(ctx, op, o, target, sources, nonce, lease, ttl, resp, hasResp, sum, reason, started, bound{})
	}
	if err != nil {
		return nil, err
	}
	if held {
		return decodeComplete(o, nonce, started, raw)
	}
	return decodeTransition(op, o.Ref, idents{owner: o.Owner, nonce: nonce}, raw)
}

// sendTransition sends transition.lua, bounded by b; held reports
// whether it sent started's m for the script to compare.
func (s *Store) sendTransition(ctx context.Context, op string, o driver.Ownership, target onceflow.State, sources string, nonce onceflow.Nonce,
	lease string, ttl time.Duration, resp []byte, hasResp, sum, reason string, started *onceflow.Record, b bound,
) (any, bool, error) {
	c := s.newCall()
	c.bounded = b.ok()
	var held, head, tail []byte // nil: compare nothing
	fp := ""
	if started != nil && resp != nil {
		if c.buf, held, head, tail = appendCompleteHeld(c.buf, started, o, nonce, sum); held != nil {
			fp = string(started.Fingerprint)
		}
	}
	served, budget := c.bound(b)
	raw, err := s.call(ctx, c, op, o.Ref, s.scripts.transition,
		c.raw(string(o.Owner)), c.text(string(o.Operation)), s.args.int(o.Rev), s.args.str(string(target)), s.args.str(sources), c.raw(string(nonce)),
		s.args.str(lease), s.args.int(ms(ttl)), s.args.str(hasResp), c.blob(resp), c.text(sum), c.text(reason),
		c.blob(held), c.raw(fp), c.blob(head), c.blob(tail), served, budget)
	return raw, held != nil, err
}

// Release implements driver.Store.
func (s *Store) Release(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseOutcome, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	o := req.Ownership
	raw, err := s.call(ctx, nil, opRelease, o.Ref, s.scripts.release, appendRaw(nil, string(o.Owner)), string(o.Operation), o.Rev)
	if err != nil {
		return nil, err
	}
	return decodeRelease(o.Ref, o.Owner, raw)
}

// Inspect implements driver.Store. It sends EVALSHA_RO (EVAL_RO when the
// server has not cached the script), so it answers on a read-only replica,
// while writes are paused (CLIENT PAUSE WRITE, as a failover does) and
// when Redis is out of memory, whether or not the script is cached. A
// server before Redis 7.0, or miniredis, does not know those commands: the
// first Inspect finds that out and the store uses EVALSHA from then on
// (then an uncached INSPECT waits out a write pause). A client that routes
// read-only commands to replicas (ClusterOptions.ReadOnly, RouteByLatency,
// RouteRandomly) may have INSPECT answered by one, which can lag its
// primary. An ACL user needs evalsha_ro and eval_ro (both in @scripting).
func (s *Store) Inspect(ctx context.Context, ref onceflow.Ref) (driver.Observation, error) {
	if err := ref.Validate(); err != nil {
		return driver.Observation{}, err
	}
	raw, err := s.call(ctx, nil, opInspect, ref, s.scripts.inspect)
	if err != nil {
		return driver.Observation{}, err
	}
	return decodeInspect(ref, raw)
}

// Resolve implements driver.Store.
func (s *Store) Resolve(ctx context.Context, req driver.ResolveRequest) (driver.ResolveOutcome, error) {
	if err := req.Validate(s.maxResp); err != nil {
		return nil, err
	}
	resp := req.Response
	if resp == nil {
		resp = []byte{}
	}
	raw, err := s.call(ctx, nil, opResolve, req.Ref, s.scripts.resolve,
		req.Attempt, req.Rev, string(req.Target), resp, checksum(resp), req.Codec, req.Policy, req.Reason, ms(req.TTL))
	if err != nil {
		return nil, err
	}
	return decodeResolve(req.Ref, raw)
}

// call runs a script under the command timeout and returns its raw reply,
// for the script's decoder. A transport error is classified: Indeterminate
// for a script that may write, Unavailable for INSPECT. c, when not nil,
// is a script call from s.newCall whose text and blob made arguments of
// args; call returns it to the pool when it may, and builds the key in it.
func (s *Store) call(ctx context.Context, c *scriptCall, op string, ref onceflow.Ref, sc script, args ...any) (any, error) {
	return s.callKey(ctx, c, op, ref, "", sc, args...)
}

// newCall is a pooled script call, for call and callKey.
func (s *Store) newCall() *scriptCall { return s.scriptCalls.Get().(*scriptCall) }

// callKey is call for a key already built ("": built here).
func (s *Store) callKey(ctx context.Context, c *scriptCall, op string, ref onceflow.Ref, key string, sc script, args ...any) (any, error) {
	durable := s.durable.covers(op)
	if key == "" && (s.guarded || durable) {
		key = s.Key(ref)
	}
	var v any
	var err error
	switch {
	case s.guarded:
		// c's strings stay with the call, which may outlive this one: c
		// is not returned to the pool.
		v, err = s.callGuarded(ctx, durable, sc, key, slices.Clone(args))
	case durable:
		v, err = s.runDurable(withDeadline(ctx, s.timeout, &s.deadlines), sc, key, args...)
	default:
		// Called directly, not through a function value: args stays the
		// caller's (on its stack), as runIn copies it into c, which this
		// call returns to the pool once go-redis has let go of it.
		if c == nil {
			c = s.newCall()
		}
		var k any = key
		if key == "" {
			k = c.key(s, ref)
		}
		if c.bounded && s.pipeOn {
			// A bounded call that finds another in flight rides the
			// auto-pipeliner, as a replay read does (replay.go).
			n := s.pipeScripts.Add(1)
			defer s.pipeScripts.Add(-1)
			if n > 1 {
				c.ap = s.autoPipeliner(ctx)
			}
		}
		v, err = s.runIn(c.ctx.bind(ctx, s.timeout, &s.deadlines), c, sc, k, args...)
		c.release(&s.scriptCalls)
	}
	if err != nil {
		return nil, classify(op, ref, err)
	}
	return v, nil
}

// callGuarded is callKey's call for a client that does not stop at the
// context's deadline: under a timer, in a goroutine of its own.
func (s *Store) callGuarded(ctx context.Context, durable bool, sc script, key string, args []any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return runGuarded(ctx, func(ctx context.Context) (any, error) {
		if durable {
			return s.runDurable(ctx, sc, key, args...)
		}
		return s.run(ctx, sc, key, args...)
	})
}

// replay sends the replay read (replay.go) under the command timeout. Its
// transport error is classified as the claim's would be: Indeterminate,
// although a read changes nothing, so that a caller handles a failed
// claim one way whichever command failed.
func (s *Store) replay(ctx context.Context, op string, req driver.ClaimRequest) (replayRead, error) {
	var rd replayRead
	var err error
	if s.guarded {
		rd, err = s.replayGuarded(ctx, s.Key(req.Ref), req)
	} else {
		c := s.calls.Get().(*replayCall)
		var key any
		if s.cachedReads {
			key = s.Key(req.Ref) // the cache caches a string key only
		} else {
			key = c.key(s, req.Ref)
		}
		rd, err = s.readReplay(c.ctx.bind(ctx, s.timeout, &s.deadlines), c, key, req)
		c.release(&s.calls)
	}
	if err != nil {
		return replayRead{}, classify(op, req.Ref, err)
	}
	return rd, nil
}

// replayGuarded is readReplay for a client that does not stop at the
// context's deadline (a function of its own, so that only this path pays
// for the closure's copy of the request).
func (s *Store) replayGuarded(ctx context.Context, key string, req driver.ClaimRequest) (replayRead, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, err := runGuarded(ctx, func(ctx context.Context) (any, error) { return s.readReplay(ctx, new(replayCall), key, req) })
	rd, _ := v.(replayRead)
	return rd, err
}

// classify turns a command's error into what it proves: a key that is no
// hash is a corrupt record; anything else is Indeterminate for a script
// that may write, Unavailable for INSPECT.
func classify(op string, ref onceflow.Ref, err error) error {
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Ref: ref, Field: "(key)", Reason: "is not a hash"}
	}
	o := onceflow.OutcomeIndeterminate
	if op == opInspect {
		o = onceflow.OutcomeStoreUnavailable
	}
	return &onceflow.Error{Outcome: o, Op: op, Ref: ref, Err: err}
}

// unexpectedReply is a reply no script gives: it is never guessed at.
func unexpectedReply(format string, args ...any) error {
	return &onceflow.Error{Outcome: onceflow.OutcomeCorrupt, Reason: "unexpected reply: " + fmt.Sprintf(format, args...)}
}

// runGuarded is run for a client that does not stop at the context's
// deadline: the call goes on in its own goroutine, and the store stops
// waiting for it at the deadline.
func runGuarded(ctx context.Context, call func(context.Context) (any, error)) (any, error) {
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("redisstore: no reply by the deadline (the client lacks ContextTimeoutEnabled): %w", context.Cause(ctx))
	}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// ErrEvictionPolicy: Redis is configured to evict keys when it runs out of
// memory. An evicted record is a lost guarantee: the next attempt of an
// operation whose record was evicted runs again.
var ErrEvictionPolicy = errors.New("redisstore: Redis may evict idempotency records")

// EvictionPolicyError reports a server whose maxmemory-policy is not
// noeviction. It matches ErrEvictionPolicy.
type EvictionPolicyError struct {
	Addr   string // the server, as the client names it
	Policy string // its maxmemory-policy
}

func (e *EvictionPolicyError) Error() string {
	return fmt.Sprintf("redisstore: Redis at %s has maxmemory-policy %q, so it may evict idempotency records and an evicted record is a lost guarantee; "+
		"set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)", e.Addr, e.Policy)
}

// Is reports whether target is ErrEvictionPolicy.
func (e *EvictionPolicyError) Is(target error) bool { return target == ErrEvictionPolicy }

// CheckEvictionPolicy reads maxmemory-policy from the server (from every
// master of a Cluster) and returns an *EvictionPolicyError unless it is
// noeviction. Other errors mean it could not be read (CONFIG may be
// disabled on managed services): check the setting by other means then.
func (s *Store) CheckEvictionPolicy(ctx context.Context) error {
	check := func(ctx context.Context, c redis.UniversalClient, addr string) error {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return fmt.Errorf("redisstore: read maxmemory-policy of %s: %w", addr, err)
		}
		policy, ok := v["maxmemory-policy"]
		if !ok {
			return fmt.Errorf("redisstore: read maxmemory-policy of %s: not in the reply", addr)
		}
		if policy != "noeviction" {
			return &EvictionPolicyError{Addr: addr, Policy: policy}
		}
		return nil
	}
	return s.forEachPrimary(ctx, check)
}

// forEachPrimary calls check with each server that takes the store's
// writes, named as the client names it: every primary of a Cluster (in
// parallel), else the one server.
func (s *Store) forEachPrimary(ctx context.Context, check func(ctx context.Context, c redis.UniversalClient, addr string) error) error {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return check(ctx, c, c.Options().Addr)
		})
	}
	addr := "the configured server"
	if c, ok := s.client.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	return check(ctx, s.client, addr)
}
