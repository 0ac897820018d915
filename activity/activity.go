package activity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/internal/handshake"
	"github.com/onceflow/onceflow/internal/scope"
)

// scopeKind says which runs of an activity share one idempotency record:
// the options WorkflowScope and BusinessKey choose it.
type scopeKind int

const (
	// runScoped (the default) dedupes the retries of one activity in one
	// workflow run: namespace + workflow ID + run ID + activity ID.
	// Temporal's own recommendation, and safe across continue-as-new and
	// reset, which reuse activity IDs with a new meaning.
	runScoped scopeKind = iota
	// workflowScoped (WorkflowScope) dedupes across runs of one workflow
	// ID (workflow retries, cron): namespace + workflow ID + activity ID.
	workflowScoped
	// businessScoped (BusinessKey) dedupes on the business key across
	// workflows: the one to use for payments ("order-42/charge").
	businessScoped
)

// Config configures a Wrapper.
type Config struct {
	// Executor runs the idempotent actions. Required.
	Executor *idemstore.Executor
	// Digester digests scopes and derives owner tokens. Required.
	Digester *onceflow.Digester
	// Logger receives the wrapper's lines. Default: discard.
	Logger *slog.Logger
	// Client, when set, is the worker's Temporal client: the wrapper has
	// the server confirm an attempt's checkpoint (RecordActivityHeartbeat)
	// before the action starts, so a later attempt that finds no checkpoint
	// knows no earlier one reached the action. Without it the checkpoint is
	// an ordinary (batched) heartbeat, and every attempt after the first
	// that finds no record doubts (Reconcile first, else
	// onceflow.EffectUnknown). worker.New sets it.
	Client client.Client
}

// Wrapper turns activity functions into idempotent ones. Build one per
// worker and pass it to Register.
type Wrapper struct {
	exec     *idemstore.Executor
	digester *onceflow.Digester
	logger   *slog.Logger
	client   client.Client
	// resolvers encode a decided result (JSON) with the codec of the
	// wrapped activity of its operation code, for ResolveRecord.
	resolvers sync.Map // onceflow.OperationCode → resolver
	// activities are the activities Register registered, by name, for
	// the workflow side (WrappedActivity); resolveOn are the registries
	// that have ResolveRecord.
	activities sync.Map // string → handshake.Activity
	resolveOn  sync.Map // Registry → struct{}
	// bindings are the activities Register registered, by name, for
	// Settle.
	bindings sync.Map // string → *bound
	// mu guards running and idle: running counts the wrapped activities
	// that have not returned yet, and idle is closed when it falls to
	// zero, so Wait can wait for them without a goroutine of its own.
	mu      sync.Mutex
	running int
	idle    chan struct{}
}

// enter counts an activity that started; leave, one that returned.
func (w *Wrapper) enter() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running == 0 {
		w.idle = make(chan struct{})
	}
	w.running++
}

func (w *Wrapper) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running--; w.running == 0 {
		close(w.idle)
	}
}

// Wait waits until every wrapped activity that has started has returned,
// so its outcome (COMPLETED, FAILED_RETRYABLE, ABANDONED) is written, or
// until ctx is done. A worker that stops calls it after the Temporal
// worker stopped and before it closes Redis.
func (w *Wrapper) Wait(ctx context.Context) error {
	w.mu.Lock()
	if w.running == 0 {
		w.mu.Unlock()
		return nil
	}
	idle, n := w.idle, w.running
	w.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("onceflow: %d activities still recording their outcome: %w", n, context.Cause(ctx))
	}
}

// New validates cfg and returns a Wrapper.
func New(cfg Config) (*Wrapper, error) {
	if cfg.Executor == nil {
		return nil, errors.New("activity: Config.Executor is required")
	}
	if cfg.Digester == nil {
		return nil, errors.New("activity: Config.Digester is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Wrapper{exec: cfg.Executor, digester: cfg.Digester, logger: cfg.Logger, client: cfg.Client}, nil
}

// InProgressPolicy says what an attempt does when another attempt holds
// the operation (WhenInProgress): an earlier attempt of the same activity
// whose worker died (its lease has not run out yet), or another
// workflow's, with BusinessKey.
type InProgressPolicy int

const (
	// InProgressWait (the default) waits inside the activity,
	// heartbeating, until the other attempt finishes (its result is
	// replayed), dies (its lease runs out and this attempt takes over) or
	// the activity's own timeouts end the wait. The wait does not use up one of the retry policy's
	// MaximumAttempts: a retry after a worker died mid-action meets that
	// attempt's lease for up to the executor's Lease (30 s by default).
	// Should the activity's StartToCloseTimeout end the wait first, and
	// that was its last attempt, the workflow side settles the call
	// (docs/adopting.md#retry-policies).
	InProgressWait InProgressPolicy = iota
	// InProgressRetry fails the attempt with the retryable onceflow.InProgress,
	// NextRetryDelay set to the lease the other attempt has left: each
	// such attempt counts against MaximumAttempts.
	InProgressRetry
)

// Codec encodes activity results for storage and replay.
type Codec interface {
	// ID names the encoding, [a-z0-9.-]{1,32}, such as "json-v2". Change
	// it whenever old results can no longer be decoded.
	ID() string
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default Codec: encoding/json, ID "json-v2".
type JSONCodec struct{}

// ID returns "json-v2".
func (JSONCodec) ID() string { return "json-v2" }

// Marshal encodes v with encoding/json.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data with encoding/json.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// resolverOf is the resolver of an activity whose result a decision's
// JSON decodes into with decode, stored with codec.
func resolverOf(codec Codec, decode func(raw []byte) (any, error)) resolver {
	// A completed decision arrives as JSON (the workflow's result type);
	// it is stored under this activity's codec, so the next claim replays
	// it instead of refusing a codec it cannot read.
	return resolver{codec: codec.ID(), encode: func(raw []byte) ([]byte, error) {
		out, err := decode(raw)
		if err != nil {
			return nil, err
		}
		return codec.Marshal(out)
	}}
}

// heart is one attempt's heartbeat and checkpoint. Before the action
// starts (claiming, waiting on Reconcile) the heartbeat carries the
// previous attempt's checkpoint on, so it is not lost if this attempt dies
// too; from the start of the action, this attempt's own.
type heart struct {
	ctx    context.Context
	info   sdkactivity.Info
	client client.Client
	// prev is the previous attempt's checkpoint, if any; confirms says
	// whether the Temporal server confirms this attempt's before the
	// action starts.
	prev     *onceflow.Checkpoint
	confirms bool
	// mu makes reading the checkpoint and heartbeating it one step, so a
	// tick that read an older checkpoint cannot send it after the
	// action's confirmed one.
	mu sync.Mutex
	cp *onceflow.Checkpoint
	// sdkBeat: this attempt has recorded a heartbeat through the SDK
	// (activity.RecordHeartbeat), whose batch may hold details to send
	// later. Guarded by mu.
	sdkBeat bool
}

// newHeart reads the previous attempt's checkpoint from the heartbeat
// details Temporal kept.
func newHeart(ctx context.Context, w *Wrapper, info sdkactivity.Info) *heart {
	h := &heart{ctx: ctx, info: info, client: w.client, confirms: w.client != nil && !info.IsLocalActivity && len(info.TaskToken) > 0}
	if sdkactivity.HasHeartbeatDetails(ctx) {
		var cp onceflow.Checkpoint
		if err := sdkactivity.GetHeartbeatDetails(ctx, &cp); err == nil && cp.Phase != "" {
			h.prev = &cp
		}
	}
	return h
}

// heartbeat records a heartbeat with the checkpoint it carries.
func (h *heart) heartbeat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sdkBeat = true
	switch {
	case h.cp != nil:
		sdkactivity.RecordHeartbeat(h.ctx, *h.cp)
	case h.prev != nil:
		sdkactivity.RecordHeartbeat(h.ctx, *h.prev)
	default:
		sdkactivity.RecordHeartbeat(h.ctx)
	}
}

// checkpoint makes c the attempt's checkpoint and, where the worker can,
// has the Temporal server confirm it before returning.
//
// A confirmed checkpoint is one RPC, the client's: the SDK's first
// heartbeat of an attempt is an RPC of its own, synchronous and unconfirmed
// (activity.RecordHeartbeat returns no error), so it is sent too only when
// the SDK has heartbeated in this attempt already. Then its batch may hold
// an older checkpoint to send when its throttle interval ends, after the
// confirmed one; recording c there first makes c what it sends. Otherwise
// the SDK holds nothing, and every later heartbeat reads h.cp. When the
// server refuses the confirmed one (the activity was cancelled, paused or
// reset, or is gone), the SDK's heartbeat follows it, as it used to come
// first: the SDK hands the server's answer to the activity's context.
func (h *heart) checkpoint(ctx context.Context, c onceflow.Checkpoint) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cp = &c
	if !h.confirms || h.sdkBeat {
		sdkactivity.RecordHeartbeat(ctx, c) // what the SDK's batched heartbeat sends from now on
		h.sdkBeat = true
	}
	if !h.confirms {
		return nil
	}
	err := h.client.RecordActivityHeartbeat(ctx, h.info.TaskToken, c)
	if err != nil && !h.sdkBeat {
		sdkactivity.RecordHeartbeat(ctx, c)
		h.sdkBeat = true
	}
	return err
}

// latest is what this attempt knows of an effect so far, for the details
// of a retryable error: its own checkpoint once it reached the action,
// else the previous attempt's, and why an earlier attempt may have reached
// the action where no checkpoint says so.
func (h *heart) latest(reached *idemstore.ReachedAction) handshake.RetryDetails {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := handshake.RetryDetails{Checkpoint: h.prev}
	if h.cp != nil {
		cp := *h.cp
		d.Checkpoint = &cp
	}
	if reached != nil && reached.Fence == (onceflow.Fence{}) {
		d.EffectUnknown = reached.Reason
	}
	return d
}

// beat heartbeats every interval and sends each beat on ticks, for the
// executor to renew the lease on, until the function it returns is
// called; that function returns when the beating stopped.
func (h *heart) beat(interval time.Duration, ticks chan<- time.Time) (stop func()) {
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		onGrid(ctx, interval, func(now time.Time) {
			h.heartbeat()
			// Renew on the same beat, unless renewal has stopped (lease
			// lost): heartbeats must go on to deliver cancellation.
			select {
			case ticks <- now:
			default:
			}
		})
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// onGrid calls beat on every tick of the grid of interval on the wall
// clock, from the next one on, until ctx is done. Every activity with the
// same interval beats on the same grid, so their renewals fall due
// together and the store sends them as one call (redisstore batches
// concurrent renewals); the first beat comes within one interval.
func onGrid(ctx context.Context, interval time.Duration, beat func(time.Time)) {
	now := time.Now()
	first := time.NewTimer(now.Truncate(interval).Add(interval).Sub(now))
	defer first.Stop()
	select {
	case <-ctx.Done():
		return
	case now = <-first.C:
		beat(now)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			beat(now)
		}
	}
}

// settled: the store recorded that the attempt had no effect. When this
// attempt reached the action, say so in Temporal too, so the next attempt
// does not doubt it even if Redis loses the record. Best effort: if it
// fails, the next attempt doubts, which is safe.
func (h *heart) settled(ctx context.Context, log *slog.Logger) {
	h.mu.Lock()
	reached := h.cp
	h.mu.Unlock()
	if reached == nil {
		return
	}
	settled := *reached
	settled.Phase = onceflow.PhaseSettled
	if err := h.checkpoint(ctx, settled); err != nil {
		log.WarnContext(ctx, "onceflow: could not record the settled checkpoint; the next attempt will reconcile first", "err", err)
	}
}

// evidence is what Temporal says of the attempts before this one: the
// last checkpoint, and the attempt number. Heartbeat details alone are not
// enough where they are not confirmed (an attempt may have died before its
// checkpoint reached the server), so then any earlier attempt may have reached the action.
func evidence(info sdkactivity.Info, prev *onceflow.Checkpoint, confirmed bool) *idemstore.ReachedAction {
	switch {
	case prev != nil && prev.Phase == onceflow.PhaseExecuting:
		return &idemstore.ReachedAction{Fence: prev.Fence(), Reason: fmt.Sprintf(
			"activity attempt %d reached the action at fence %s and did not settle it (its heartbeat checkpoint)", prev.TemporalAttempt, prev.Fence())}
	case prev == nil && info.Attempt > 1 && !confirmed:
		return &idemstore.ReachedAction{Reason: fmt.Sprintf(
			"this is activity attempt %d, and an earlier attempt may have reached the action without its checkpoint reaching Temporal", info.Attempt)}
	}
	return nil
}

// resolver encodes a decided result for the store.
type resolver struct {
	codec  string
	encode func(json []byte) ([]byte, error)
}

// outcomeOf is the outcome of an Executor's error (every failure it
// returns is an *onceflow.Error).
func outcomeOf(err error) onceflow.Outcome {
	var e *onceflow.Error
	if errors.As(err, &e) {
		return e.Outcome
	}
	return onceflow.OutcomeError
}

// downstream is what an activity declares about its downstream, carried
// in an unknown effect's details so the workflow can decide it: its
// IdempotentDownstream, DownstreamKey and DownstreamRetention.
type downstream struct {
	idempotent bool
	key        string
	retention  time.Duration
	// actionFailed: the unknown effect followed the action's own error.
	actionFailed bool
}

// toTemporal maps an Execute error to an ApplicationError with a stable
// type, the outcome's TemporalType; the outcomes that
// carry more (the incident's details, the retry delay, the decision's
// reason) add it here.
func toTemporal(err error, ref onceflow.Ref, rawOp string, prev *onceflow.Checkpoint, rd handshake.RetryDetails, ds downstream) error {
	o := outcomeOf(err)
	opts := temporal.ApplicationErrorOptions{NonRetryable: !o.Retryable()}
	var (
		ip *onceflow.Error
		eu *onceflow.Error
		re *onceflow.Error
		of *onceflow.Error
	)
	switch o.TemporalType() {
	case onceflow.OutcomeEffectUnknown.TemporalType():
		errors.As(err, &eu)
		opts.Cause = eu.Err
		opts.Details = []any{onceflow.EffectUnknownDetails{
			RecordKey: ref.String(), OperationCode: string(ref.Code), ScopeDigest: ref.Digest.Hex, DigestVersion: ref.Digest.Version,
			Operation: rawOp, Attempt: eu.Attempt, Rev: eu.Rev, State: string(eu.State),
			Recorded: eu.Recorded, Reason: eu.Reason, Checkpoint: prev, IdempotentDownstream: ds.idempotent, DownstreamKey: ds.key,
			ReachedAt: eu.Since, DownstreamRetention: ds.retention, RetentionPassed: eu.RetentionPassed, ActionFailed: ds.actionFailed,
		}}
	case onceflow.OutcomeRetryable.TemporalType():
		errors.As(err, &re)
		opts.Cause = re.Err
	case onceflow.OutcomeFailed.TemporalType():
		errors.As(err, &of)
		opts.Details = []any{of.Reason}
	case onceflow.OutcomeInProgress.TemporalType():
		errors.As(err, &ip)
		opts.NextRetryDelay = max(ip.RetryAfter, 100*time.Millisecond)
	}
	if o.Retryable() && opts.Details == nil {
		// Should this be the last attempt the retry policy allows, the
		// workflow's settle takes what it knew of the earlier ones.
		opts.Details = []any{rd}
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), o.TemporalType(), opts)
}

// OperationKey returns the stable operation key inside a wrapped activity
// and its Reconcile, the same for every attempt ("<code>:d<version>:<digest>",
// no raw key): pass it to a downstream provider as its idempotency key.
// "" outside one. KeyForDownstream is the activity's DownstreamKey when it
// declares one.
func OperationKey(ctx context.Context) string {
	x, _ := idemstore.ExecutionFrom(ctx)
	return x.Key()
}

// EarlierEffectUnknown says why an earlier attempt may have had an
// effect, inside a wrapped activity that runs although it might have ("" when the record
// proved that nothing ran): ask the downstream before calling it again.
func EarlierEffectUnknown(ctx context.Context) string {
	x, _ := idemstore.ExecutionFrom(ctx)
	return x.EffectUnknown
}

// Fence returns the fencing token (epoch, attempt, rev) of the running attempt:
// it grows on every takeover, so a downstream store that keeps the highest
// token it saw can reject a stale writer.
func Fence(ctx context.Context) (onceflow.Fence, bool) {
	x, ok := idemstore.ExecutionFrom(ctx)
	return x.Fence, ok
}

// BusinessOperationKey returns the operation key (OperationKey) that an
// activity with this code and BusinessKey's key has in a
// Temporal namespace: what a reconcile activity, an HTTP handler or an
// operator's tool looks the operation's downstream effect up by, outside
// the wrapped activity.
func (w *Wrapper) BusinessOperationKey(namespace string, code onceflow.OperationCode, key string) string {
	return onceflow.Ref{Code: code, Digest: w.digester.Digest(scope.Business(namespace, key)...)}.String()
}

// catalog records a wrapped activity for WrappedActivity; a second
// activity under the same name is an error.
func (w *Wrapper) catalog(a handshake.Activity) error {
	if _, loaded := w.activities.LoadOrStore(a.Name, a); loaded {
		return fmt.Errorf("activity: an activity named %s is registered already; give this one another name with Name", a.Name)
	}
	return nil
}

// WrappedActivity returns the activity Register registered under name,
// for the workflow package's Interceptor (worker.Attach connects them).
func (w *Wrapper) WrappedActivity(name string) (handshake.Activity, bool) {
	a, ok := w.activities.Load(name)
	if !ok {
		return handshake.Activity{}, false
	}
	return a.(handshake.Activity), true
}

// registerOwn registers onceflow's own activities with r, once per
// registry.
func (w *Wrapper) registerOwn(r Registry) {
	if _, loaded := w.resolveOn.LoadOrStore(r, struct{}{}); loaded {
		return
	}
	r.RegisterActivityWithOptions(w.ResolveRecord, sdkactivity.RegisterOptions{Name: handshake.ResolveRecordActivity})
	r.RegisterActivityWithOptions(w.Settle, sdkactivity.RegisterOptions{Name: handshake.SettleActivity})
	r.RegisterActivityWithOptions(w.Reconcile, sdkactivity.RegisterOptions{Name: handshake.ReconcileActivity})
}

// RegisterResolve registers onceflow's own activities (ResolveRecord,
// Settle and Reconcile), which the workflow side's recovery calls, with r,
// unless Register did already: for a worker that runs the workflows but
// registers none of their activities through Register (worker.New calls
// it).
func (w *Wrapper) RegisterResolve(r Registry) { w.registerOwn(r) }
