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
)

// ScopeKind says which runs of an activity share one idempotency record.
type ScopeKind int

const (
	// RunScoped (the default) dedupes the retries of one activity in one
	// workflow run: namespace + workflow ID + run ID + activity ID.
	// Temporal's own recommendation, and safe across continue-as-new and
	// reset, which reuse activity IDs with a new meaning.
	RunScoped ScopeKind = iota
	// WorkflowScoped dedupes across runs of one workflow ID (workflow
	// retries, cron): namespace + workflow ID + activity ID. Pitfall: a
	// continue-as-new run that calls the same activity ID again gets the
	// first run's result.
	WorkflowScoped
	// BusinessScoped dedupes on Options.Key(input) across workflows: the
	// one to use for payments ("order-42/charge").
	BusinessScoped
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
	// TypeEffectUnknown). worker.New sets it.
	Client client.Client
}

// Wrapper turns activity functions into idempotent ones. Build one per
// worker and pass it to Wrap.
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
	activities sync.Map // string → onceflow.WrappedActivity
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

// Options configure one wrapped activity.
type Options[In, Out any] struct {
	// Code is the operation code of the use case, [a-z0-9-]{1,64}, such
	// as "charge-payment". Required.
	Code onceflow.OperationCode
	// Scope selects the dedupe key. Default RunScoped.
	Scope ScopeKind
	// Key returns the business key for BusinessScoped, such as
	// "order-42/charge". Required with BusinessScoped.
	Key func(In) string
	// Reconcile is consulted whenever an earlier attempt may have reached
	// the action and its effect is unsettled: a takeover from an attempt
	// that died in the middle of the action, and a claim that finds no
	// record (Redis lost it) or a FAILED_RETRYABLE one of another
	// incarnation while the previous attempt's checkpoint says it reached
	// the action. found reports that the effect happened (for instance the
	// provider knows the operation key), with its result. Without it, and
	// without IdempotentDownstream, such a claim fails with
	// TypeEffectUnknown and does not run the action.
	Reconcile func(ctx context.Context, in In, rec onceflow.Record) (out Out, found bool, err error)
	// IdempotentDownstream declares the action safe to re-run after such a
	// takeover (it passes OperationKey to a provider that deduplicates).
	// It travels in an unknown effect's details
	// (onceflow.EffectUnknownDetails.IdempotentDownstream), so the
	// workflow package's Execute retries by itself instead of opening an
	// incident for a person.
	IdempotentDownstream bool
	// Codec encodes the result for storage and replay. Default JSONCodec
	// ("json-v2"). A result stored under another codec ID is not replayed:
	// the activity fails with TypeCodecMismatch.
	Codec Codec
	// InProgress says what an attempt does when another attempt holds the
	// operation: an earlier attempt of the same activity whose worker died
	// (its lease has not run out yet), or another workflow's, with
	// BusinessScoped. Default InProgressWait.
	InProgress InProgressPolicy
	// DownstreamKey returns the reference the downstream system knows
	// the operation by, such as a transfer's reference ID. When set,
	// KeyForDownstream (and so AskFirst's lookup and call) and Reconcile's
	// context get it instead of the operation key, and an unknown
	// effect's details carry it for the operator.
	DownstreamKey func(In) string
	// DownstreamRetention is how long the downstream remembers the key it
	// deduplicates by: Stripe at least 24 hours, Braintree 30 days, Adyen
	// at least 31 days. A re-run after an unknown effect (a takeover with
	// IdempotentDownstream or a Reconcile that found nothing, the
	// workflow's automatic retry, an operator's retry, a late redelivery)
	// later than that after the first attempt may have reached the
	// downstream is refused: the downstream may have forgotten the key
	// and act again. The activity then ends with TypeEffectUnknown for a
	// decision, and the workflow refuses a retry decision unless it is
	// overridden with a reason (workflow.Resolution.OverrideRetention).
	// Zero (the default): no limit. See
	// docs/guards.md#the-downstreams-retention.
	DownstreamRetention time.Duration
	// RefuseReusedReference refuses an operation whose DownstreamKey (its
	// business reference: an order number, a transfer reference) arrived
	// under another operation key first, within DownstreamRetention
	// (DefaultReferenceWindow when none): the activity fails with the
	// non-retryable TypeReferenceReused and nothing runs. Without it such
	// a reuse is flagged only: a warning line, the executor's
	// onceflow.reference_reuses metric and an entry in the store's trail
	// of reuses. Needs DownstreamKey; see
	// docs/guards.md#the-business-reference.
	RefuseReusedReference bool
	// NoEffect classifies fn's errors: true means the attempt certainly
	// had no effect. Such an error is recorded as no effect and returned
	// to Temporal as it is, with its own type, message and retryability.
	// Whatever NoEffect says, these are treated so too: an error marked
	// with the NoEffect function, an ApplicationError marked
	// non-retryable, and an error whose type (the ApplicationError type,
	// or the Go type's name, as Temporal reports it) the activity's
	// RetryPolicy lists in NonRetryableErrorTypes. Temporal runs no
	// attempt after a non-retryable error, so nothing could run twice.
	// Any other error means the effect may have happened
	// (TypeEffectUnknown).
	NoEffect func(error) bool
}

// InProgressPolicy says what an attempt does when the operation is in
// progress elsewhere.
type InProgressPolicy int

const (
	// InProgressDefault is InProgressWait.
	InProgressDefault InProgressPolicy = iota
	// InProgressWait waits inside the activity, heartbeating, until the
	// other attempt finishes (its result is replayed), dies (its lease runs
	// out and this attempt takes over) or the activity's own timeouts end
	// the wait. The wait does not use up one of the retry policy's
	// MaximumAttempts: a retry after a worker died mid-action meets that
	// attempt's lease for up to the executor's Lease (30 s by default).
	// Should the activity's StartToCloseTimeout end the wait first, and
	// that was its last attempt, the workflow side settles the call
	// (docs/adopting.md#retry-policies).
	InProgressWait
	// InProgressRetry fails the attempt with the retryable TypeInProgress,
	// NextRetryDelay set to the lease the other attempt has left: each
	// such attempt counts against MaximumAttempts.
	InProgressRetry
)

// codec is the activity's Codec, JSONCodec by default.
func (o Options[In, Out]) codec() Codec {
	if o.Codec == nil {
		return JSONCodec{}
	}
	return o.Codec
}

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
func (JSONCodec) ID() string { return idemstore.DefaultCodec }

// Marshal encodes v with encoding/json.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data with encoding/json.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Wrap returns fn as an idempotent activity with the same signature:
// register the result with the Temporal worker as you would fn (give it a
// name with RegisterActivityWithOptions, since the wrapper is a closure).
// Register does this for any activity shape, with its options checked at
// registration; Wrap is for a program that registers activities itself.
//
// Every retry of the activity is one operation; the Temporal attempt is
// the retained attempt. fn runs at most once per scope whenever Redis can
// know; its result is stored as JSON and replayed to later attempts and,
// for WorkflowScoped and BusinessScoped, to other workflows. fn's error
// marks what happened: a business error that says nothing happened (see
// Options.NoEffect, and the NoEffect function) is returned to Temporal as
// it is; idemstore.RetryableNoEffect marks a retryable error with no
// effect; any other error means the effect may have happened and fails
// the workflow's activity with TypeEffectUnknown.
//
// The activity must be scheduled with a HeartbeatTimeout: the wrapper
// heartbeats and renews its lease on a ticker derived from it and from the
// lease, and the heartbeats deliver cancellation.
func Wrap[In, Out any](w *Wrapper, opts Options[In, Out], fn func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	b := typedBinding(opts, fn)
	w.resolvers.Store(opts.Code, resolverOf(b.codec, func(raw []byte) (any, error) {
		var out Out
		err := json.Unmarshal(raw, &out)
		return out, err
	}))
	return func(ctx context.Context, in In) (Out, error) {
		var out Out
		r := run(ctx, w, b, in, nil)
		if r.err != nil {
			return out, r.err
		}
		if err := b.codec.Unmarshal(r.res.Response, &out); err != nil {
			return out, temporal.NewNonRetryableApplicationError(
				"onceflow: the stored result does not decode into "+fmt.Sprintf("%T", out)+": "+err.Error(), onceflow.TypeCodecMismatch, err)
		}
		return out, nil
	}
}

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
func (h *heart) checkpoint(ctx context.Context, c onceflow.Checkpoint) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cp = &c
	sdkactivity.RecordHeartbeat(ctx, c) // what the SDK's batched heartbeat sends from now on
	if !h.confirms {
		return nil
	}
	return h.client.RecordActivityHeartbeat(ctx, h.info.TaskToken, c)
}

// latest is what this attempt knows of an effect so far, for the details
// of a retryable error: its own checkpoint once it reached the action,
// else the previous attempt's, and why an earlier attempt may have reached
// the action where no checkpoint says so.
func (h *heart) latest(reached *idemstore.ReachedAction) onceflow.RetryDetails {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := onceflow.RetryDetails{Checkpoint: h.prev}
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

// temporalError is how one outcome crosses the Temporal boundary: its
// stable ApplicationError type, and whether Temporal may retry it.
type temporalError struct {
	typ       string
	retryable bool
}

// temporalErrors maps every error outcome of idemstore.OutcomeOf.
var temporalErrors = map[onceflow.Outcome]temporalError{
	onceflow.OutcomeInProgress:          {onceflow.TypeInProgress, true},
	onceflow.OutcomeFingerprintMismatch: {onceflow.TypeFingerprintMismatch, false},
	onceflow.OutcomeOwnerConflict:       {onceflow.TypeOwnerOperationConflict, false},
	onceflow.OutcomeCodecMismatch:       {onceflow.TypeCodecMismatch, false},
	onceflow.OutcomeRetryable:           {onceflow.TypeRetryableNoEffect, true},
	onceflow.OutcomeNotStored:           {onceflow.TypeRetryableNoEffect, true},
	onceflow.OutcomeEffectUnknown:       {onceflow.TypeEffectUnknown, false},
	onceflow.OutcomeAwaitingDecision:    {onceflow.TypeEffectUnknown, false},
	onceflow.OutcomeFailed:              {onceflow.TypeOperationFailed, false},
	onceflow.OutcomeInvalid:             {onceflow.TypeInvalidInput, false},
	onceflow.OutcomeCorrupt:             {onceflow.TypeCorruptRecord, false},
	onceflow.OutcomeCanceled:            {onceflow.TypeCanceled, true},
	onceflow.OutcomeStoreUnavailable:    {onceflow.TypeStoreUnavailable, true},
	onceflow.OutcomeResolveRefused:      {onceflow.TypeResolveRefused, false},
	onceflow.OutcomeError:               {onceflow.TypeInternal, true},
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
// type, through idemstore.OutcomeOf and temporalErrors; the outcomes that
// carry more (the incident's details, the retry delay, the decision's
// reason) add it here.
func toTemporal(err error, ref onceflow.Ref, rawOp string, prev *onceflow.Checkpoint, rd onceflow.RetryDetails, ds downstream) error {
	t := temporalErrors[idemstore.OutcomeOf(idemstore.Result{}, err)]
	opts := temporal.ApplicationErrorOptions{NonRetryable: !t.retryable}
	var (
		ip *idemstore.InProgressError
		eu *idemstore.EffectUnknownError
		re *idemstore.RetryableError
		of *idemstore.OperationFailedError
	)
	switch t.typ {
	case onceflow.TypeEffectUnknown:
		errors.As(err, &eu)
		opts.Cause = eu.Err
		opts.Details = []any{onceflow.EffectUnknownDetails{
			RecordKey: ref.String(), OperationCode: string(ref.Code), ScopeDigest: ref.Digest.Hex, DigestVersion: ref.Digest.Version,
			Operation: rawOp, Attempt: eu.Attempt, Rev: eu.Rev, State: string(eu.State),
			Recorded: eu.Recorded, Reason: eu.Reason, Checkpoint: prev, IdempotentDownstream: ds.idempotent, DownstreamKey: ds.key,
			ReachedAt: eu.Since, DownstreamRetention: ds.retention, RetentionPassed: eu.RetentionPassed, ActionFailed: ds.actionFailed,
		}}
	case onceflow.TypeRetryableNoEffect:
		errors.As(err, &re)
		opts.Cause = re.Err
	case onceflow.TypeOperationFailed:
		errors.As(err, &of)
		opts.Details = []any{of.Reason}
	case onceflow.TypeInProgress:
		errors.As(err, &ip)
		opts.NextRetryDelay = max(ip.RetryAfter, 100*time.Millisecond)
	}
	if t.retryable && opts.Details == nil {
		// Should this be the last attempt the retry policy allows, the
		// workflow's settle takes what it knew of the earlier ones.
		opts.Details = []any{rd}
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), t.typ, opts)
}

// OperationKey returns the stable operation key inside a wrapped activity:
// pass it to a downstream provider as its idempotency key. "" outside one.
// KeyForDownstream is the activity's DownstreamKey when it declares one.
func OperationKey(ctx context.Context) string { return idemstore.OperationKey(ctx) }

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

// BusinessOperationKey returns the operation key (OperationKey) that a
// BusinessScoped activity with this code and business key has in a
// Temporal namespace: what a reconcile activity, an HTTP handler or an
// operator's tool looks the operation's downstream effect up by, outside
// the wrapped activity.
func (w *Wrapper) BusinessOperationKey(namespace string, code onceflow.OperationCode, key string) string {
	return onceflow.Ref{Code: code, Digest: w.digester.Digest(onceflow.BusinessScope(namespace, key)...)}.String()
}

// catalog records a wrapped activity for WrappedActivity; a second
// activity under the same name is an error.
func (w *Wrapper) catalog(a onceflow.WrappedActivity) error {
	if _, loaded := w.activities.LoadOrStore(a.Name, a); loaded {
		return fmt.Errorf("activity: an activity named %s is registered already; give this one another name with Name", a.Name)
	}
	return nil
}

// WrappedActivity returns the activity Register registered under name,
// for the workflow package's Interceptor (worker.Attach connects them).
func (w *Wrapper) WrappedActivity(name string) (onceflow.WrappedActivity, bool) {
	a, ok := w.activities.Load(name)
	if !ok {
		return onceflow.WrappedActivity{}, false
	}
	return a.(onceflow.WrappedActivity), true
}

// registerOwn registers onceflow's own activities with r, once per
// registry.
func (w *Wrapper) registerOwn(r Registry) {
	if _, loaded := w.resolveOn.LoadOrStore(r, struct{}{}); loaded {
		return
	}
	r.RegisterActivityWithOptions(w.ResolveRecord, sdkactivity.RegisterOptions{Name: onceflow.ResolveRecordActivity})
	r.RegisterActivityWithOptions(w.Settle, sdkactivity.RegisterOptions{Name: onceflow.SettleActivity})
	r.RegisterActivityWithOptions(w.Reconcile, sdkactivity.RegisterOptions{Name: onceflow.ReconcileActivity})
}

// RegisterResolve registers onceflow's own activities (ResolveRecord,
// Settle and Reconcile), which the workflow side's recovery calls, with r, unless
// Register did already. A worker that registers its activities with Wrap
// instead of Register calls it once.
func (w *Wrapper) RegisterResolve(r Registry) { w.registerOwn(r) }
