package idemstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// tracerName names the executor's tracer.
const tracerName = "github.com/onceflow/onceflow/idemstore"

// Executor defaults, from the seed design.
const (
	DefaultLease            = 30 * time.Second
	DefaultReplayTTL        = 24 * time.Hour
	DefaultFailureRetention = 24 * time.Hour
	DefaultCodec            = "json-v2"
	DefaultPolicyRevision   = 2
)

// ExecutorConfig configures an Executor. The zero value of every field but
// Store means its default.
type ExecutorConfig struct {
	// Store is the record store. Required.
	Store driver.Store
	// Lease is the processing lease: how long an owner may go without a
	// confirmed renewal before another may take over. Default 30s. It must
	// be at least 3 × RenewInterval and at most ReplayTTL.
	Lease time.Duration
	// ReplayTTL is how long a completed response is replayed. Default 24h.
	ReplayTTL time.Duration
	// FailureRetention is how long a failed or abandoned record is kept,
	// and how long an in-flight (CLAIMED or EXECUTING) record outlives its
	// lease: its time to live is always the lease left plus
	// FailureRetention, so the evidence of an attempt that died mid-action
	// outlives its lease whatever the settings. Default 24h; at least
	// Lease.
	FailureRetention time.Duration
	// Codec names the encoding of stored responses. A completed record
	// stored under another codec is not replayed (ErrCodecMismatch).
	// Default "json-v2".
	Codec string
	// PolicyRevision is the revision of the idempotency policy; like Codec,
	// a mismatch refuses replay. Default 2.
	PolicyRevision int
	// RenewInterval is how often the lease is renewed while the action
	// runs, unless the Request brings its own ticks. Default a third of
	// what the lease leaves before its deadline, (Lease - SafetyMargin) /
	// 3; at least two renewals must fit before the deadline.
	RenewInterval time.Duration
	// SafetyMargin is how long before the lease runs out the action's
	// context is cancelled when no renewal has confirmed it: the deadline
	// is measured on the local monotonic clock from when the confirming
	// request was sent, and fires whatever the store does. The margin must
	// cover the time the action takes to stop and the outcome to be
	// written, so it must be well above (at least twice) the store's
	// CommandTimeout when the store reports one (see driver.TimeBounded), and at
	// most Lease / 3. Default Lease / 10, raised to twice the store's
	// CommandTimeout when that is more.
	SafetyMargin time.Duration
	// Logger receives takeovers, abandonments and recoveries. Default:
	// discard.
	Logger *slog.Logger
	// TracerProvider traces each Execute. When it is set, every Execute
	// starts a span; when it is not, Execute starts one only as the child
	// of a recording span the context already carries (a Temporal
	// activity's or an HTTP request's), with that span's provider, so an
	// untraced call costs nothing. Each phase (claim, start, reconcile,
	// action, renew, complete, fail, inspect) is a child span of it.
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, receives the executor's metrics (see
	// MetricExecutions and the other Metric* names): executions by
	// outcome, takeovers, renewals, lost leases and phase latencies.
	// Default: none, and nothing is measured.
	MeterProvider metric.MeterProvider
}

func (c *ExecutorConfig) setDefaults() error {
	if c.Store == nil {
		return errors.New("idemstore: ExecutorConfig.Store is required")
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.ReplayTTL == 0 {
		c.ReplayTTL = DefaultReplayTTL
	}
	if c.FailureRetention == 0 {
		c.FailureRetention = DefaultFailureRetention
	}
	if c.Codec == "" {
		c.Codec = DefaultCodec
	}
	if c.PolicyRevision == 0 {
		c.PolicyRevision = DefaultPolicyRevision
	}
	var storeTimeout time.Duration
	if tb, ok := c.Store.(driver.TimeBounded); ok {
		storeTimeout = tb.CommandTimeout()
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = max(c.Lease/10, 2*storeTimeout)
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = (c.Lease - c.SafetyMargin) / 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Lease < time.Millisecond:
		return fmt.Errorf("idemstore: ExecutorConfig.Lease must be at least 1ms, got %v", c.Lease)
	case c.Lease > c.ReplayTTL:
		return fmt.Errorf("idemstore: ExecutorConfig.Lease (%v) is longer than ReplayTTL (%v): lower Lease or raise ReplayTTL", c.Lease, c.ReplayTTL)
	case c.FailureRetention < c.Lease:
		return fmt.Errorf("idemstore: ExecutorConfig.FailureRetention (%v) is shorter than Lease (%v): raise FailureRetention", c.FailureRetention, c.Lease)
	case c.SafetyMargin <= 0:
		return fmt.Errorf("idemstore: ExecutorConfig.SafetyMargin must be positive, got %v", c.SafetyMargin)
	case c.SafetyMargin > c.Lease/3:
		if storeTimeout > 0 && 2*storeTimeout > c.Lease/3 {
			return fmt.Errorf("idemstore: ExecutorConfig.Lease (%v) is too short for the store's CommandTimeout (%v): "+
				"the safety margin must be at least twice the command timeout and at most a third of the lease; raise Lease to at least %v or lower the store's CommandTimeout",
				c.Lease, storeTimeout, 6*storeTimeout)
		}
		return fmt.Errorf("idemstore: ExecutorConfig.SafetyMargin (%v) is more than a third of Lease (%v), which leaves too little time to renew: lower SafetyMargin or raise Lease", c.SafetyMargin, c.Lease)
	case storeTimeout > 0 && c.SafetyMargin < 2*storeTimeout:
		return fmt.Errorf("idemstore: ExecutorConfig.SafetyMargin (%v) is not well above the store's CommandTimeout (%v): "+
			"a store call may outlast the margin, so the outcome of a cancelled action could not be written before the lease runs out; raise SafetyMargin to at least %v or lower the store's CommandTimeout",
			c.SafetyMargin, storeTimeout, 2*storeTimeout)
	case c.RenewInterval <= 0:
		return fmt.Errorf("idemstore: ExecutorConfig.RenewInterval must be positive, got %v", c.RenewInterval)
	case c.Lease < 3*c.RenewInterval:
		return fmt.Errorf("idemstore: ExecutorConfig.Lease (%v) is shorter than 3 renew intervals (3 × %v): raise Lease or lower RenewInterval", c.Lease, c.RenewInterval)
	case 2*c.RenewInterval >= c.Lease-c.SafetyMargin:
		return fmt.Errorf("idemstore: ExecutorConfig.RenewInterval (%v) leaves fewer than two renewals before the lease's deadline (Lease %v less SafetyMargin %v): lower RenewInterval or raise Lease",
			c.RenewInterval, c.Lease, c.SafetyMargin)
	}
	return driver.ValidateCodec(c.Codec, c.PolicyRevision)
}

// Executor runs actions at most once per operation whenever the store can
// know, and makes the uncertainty visible when it cannot. It is safe for
// concurrent use.
type Executor struct {
	cfg ExecutorConfig
	// tracer is cfg.TracerProvider's; nil when none was given.
	tracer trace.Tracer
	// metrics is cfg.MeterProvider's instruments; nil when none was given.
	metrics *telemetry
	// background counts what an Execute that returned left running: a
	// renewal whose Store ignored its cancellation (lease.stop).
	background sync.WaitGroup
}

// Drain waits until nothing an Execute started is still running, or until
// ctx is done (then it returns ctx's error). Execute itself waits for the
// renewal it cancels when its action returns, but no longer than half the
// safety margin: a Store whose Renew ignores its context would otherwise
// hold the outcome back. Call Drain when shutting down, after the last
// Execute returned, so that such a renewal does not outlive its owner.
func (e *Executor) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		e.background.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("idemstore: Drain: renewals still running: %w", context.Cause(ctx))
	}
}

// NewExecutor validates cfg and returns an Executor.
func NewExecutor(cfg ExecutorConfig) (*Executor, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	e := &Executor{cfg: cfg}
	if cfg.TracerProvider != nil {
		e.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	m, err := newTelemetry(cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("idemstore: ExecutorConfig.MeterProvider: %w", err)
	}
	e.metrics = m
	return e, nil
}

// Config returns the executor's configuration with defaults filled in.
func (e *Executor) Config() ExecutorConfig { return e.cfg }

// Action is the side effect. It returns the response to store and replay,
// or an error: wrap it with RetryableNoEffect when the effect certainly did
// not happen, or EffectUnknown when it may have. An unmarked error, and a
// panic, count as EffectUnknown.
//
// The context is cancelled when the caller's is, and when the lease is
// lost (context.Cause is ErrLeaseLost or ErrLeaseUnconfirmed): stop then.
type Action func(ctx context.Context) ([]byte, error)

// ReconcileFunc asks the outside world whether the effect of a previous
// attempt happened, for instance by looking the operation key up at the
// payment provider. found with a response completes the operation with that
// response; not found lets the action run.
type ReconcileFunc func(ctx context.Context, rec onceflow.Record) (response []byte, found bool, err error)

// Request is one call of Execute.
type Request struct {
	Ref         onceflow.Ref
	Operation   onceflow.OperationID
	Fingerprint onceflow.Fingerprint
	// Owner is the retained attempt's owner token. Invocations with the
	// same owner are the same attempt: only the one whose start the store
	// confirmed runs the action. Default: a new random owner, that is a
	// new attempt.
	Owner onceflow.Owner
	// Reconcile is consulted when this attempt takes over a record whose
	// previous owner's lease expired in EXECUTING. Without it (and without
	// IdempotentDownstream) that takeover ends in ABANDONED and
	// ErrEffectUnknown, without running the action.
	Reconcile ReconcileFunc
	// IdempotentDownstream declares that the action's effect is itself
	// idempotent (it passes OperationKey to a provider that deduplicates),
	// so re-running after an uncertain takeover is safe.
	IdempotentDownstream bool
	// Doubt, when set, is evidence kept outside the store that an earlier
	// attempt may have reached the action (the Temporal binding sets it
	// from the previous attempt's checkpoint). A record is then not proof
	// that nothing ran: a claim that creates the record, or takes over one
	// the store calls safe (FAILED_RETRYABLE, an expired CLAIMED), is as
	// uncertain as a takeover of an expired EXECUTING record: Reconcile
	// first, a re-run only if IdempotentDownstream, and otherwise ABANDONED
	// and an *EffectUnknownError without running. See Doubt.
	Doubt *Doubt
	// BeforeStart, when set, selects the two-step path: CLAIM, then
	// BeforeStart, then START. If it fails the claim is released (nothing
	// ran) and Execute returns its error.
	BeforeStart func(ctx context.Context, o driver.Ownership) error
	// RenewTicks, when set, drives lease renewal instead of the executor's
	// own ticker (the Temporal binding ticks it from heartbeats).
	RenewTicks <-chan time.Time
	// Codec names the encoding of this operation's response when it is
	// not ExecutorConfig.Codec. A completed record stored under another
	// codec is not replayed (ErrCodecMismatch).
	Codec string
}

// Doubt is evidence, kept outside the store, that an earlier attempt of
// an operation may have reached its action. The store can lose a record
// (a restart without AOF, a failover to a replica that lacked it,
// FLUSHALL, eviction): a claim that then finds nothing would run the
// action again. Request.Doubt makes such a claim uncertain.
type Doubt struct {
	// Reason says what the evidence is; it is logged and becomes part of
	// the EffectUnknownError's reason.
	Reason string
	// Fence is the fence the earlier attempt held when it reached the
	// action, when known. A record of the same incarnation (equal
	// Fence.Epoch) that the store moved to FAILED_RETRYABLE at that
	// attempt or later settles the doubt: the store recorded that the
	// attempt had no effect, and that record is the one being taken over.
	Fence onceflow.Fence
}

// settledBy reports whether taking over r from state from settles the
// doubt.
func (d *Doubt) settledBy(r onceflow.Record, from onceflow.State) bool {
	return from == onceflow.StateFailedRetryable && d.Fence.Epoch != 0 && r.Fence().Epoch == d.Fence.Epoch && r.Attempt-1 >= d.Fence.Attempt
}

// Disposition says how Execute produced its response.
type Disposition string

const (
	// Ran: this invocation ran the action and recorded its response.
	Ran Disposition = "RAN"
	// Replayed: the operation had completed; the stored response is
	// returned and nothing ran.
	Replayed Disposition = "REPLAYED"
	// Reconciled: a previous attempt's effect was found by Reconcile; its
	// response was recorded and the action did not run.
	Reconciled Disposition = "RECONCILED"
)

// Result is a successful Execute.
type Result struct {
	Disposition Disposition
	Response    []byte
	// Fence is the fencing token of the attempt that produced the response.
	Fence onceflow.Fence
	// TookOver is the state this invocation took the record over from, if
	// it did.
	TookOver onceflow.State
}

// Execution describes the running action; the action's context carries it.
type Execution struct {
	Ref       onceflow.Ref
	Operation onceflow.OperationID
	Owner     onceflow.Owner
	Nonce     onceflow.Nonce
	// Fence is the running attempt's fencing token, with the record's
	// Epoch.
	Fence onceflow.Fence
	// Doubt says why an earlier attempt may have had an effect, when this
	// one runs although it might have: Reconcile found nothing, or the
	// downstream is idempotent. "" when the record proved that nothing
	// ran. An action that calls a downstream which does not deduplicate
	// asks it first when Doubt is set (see AskFirst).
	Doubt string
}

// Key is the stable operation key: the same for every attempt of the
// operation, so it can be the idempotency key of a downstream call. It
// names the record ("<code>:d<version>:<digest>"), so it holds no raw key.
func (x Execution) Key() string {
	if x.Ref == (onceflow.Ref{}) {
		return ""
	}
	return x.Ref.String()
}

type executionKey struct{}

// ExecutionFrom returns the execution an action's context carries.
func ExecutionFrom(ctx context.Context) (Execution, bool) {
	x, ok := ctx.Value(executionKey{}).(Execution)
	return x, ok
}

// OperationKey returns the stable operation key of the running action, or
// "" outside one.
func OperationKey(ctx context.Context) string {
	x, _ := ExecutionFrom(ctx)
	return x.Key()
}

// Validate checks the request's identity.
func (r Request) Validate() error {
	if err := driver.ValidateIdentity(r.Ref, r.Operation, r.Fingerprint); err != nil {
		return err
	}
	if r.Codec != "" {
		if err := driver.ValidateCodec(r.Codec, 1); err != nil {
			return err
		}
	}
	if r.Owner != "" {
		return r.Owner.Validate()
	}
	return nil
}

// Execute claims the operation, runs action if and only if this invocation
// confirmed the start, and records the outcome:
//
//   - a completed operation is replayed (Disposition Replayed);
//   - an operation running elsewhere gives an *InProgressError;
//   - a fingerprint, owner/operation or codec conflict a *ConflictError;
//   - a takeover of an expired EXECUTING record, and any claim that
//     req.Doubt leaves uncertain (a record created or safely taken over
//     although an earlier attempt may have reached the action), consults
//     req.Reconcile, runs only if req.IdempotentDownstream, and otherwise
//     abandons the record and returns an *EffectUnknownError without
//     running;
//   - the action's success is completed (Disposition Ran); a
//     RetryableNoEffect error gives a *RetryableError; any other error or
//     a panic an *EffectUnknownError;
//   - a store that cannot be reached gives its *StoreError.
//
// Every write whose reply is lost, or does not decode, is verified with
// Inspect; a success that could not be recorded is never reported as one.
func (e *Executor) Execute(ctx context.Context, req Request, action Action) (res Result, err error) {
	if err := req.Validate(); err != nil {
		return Result{}, err
	}
	var nonce onceflow.Nonce
	if req.Owner == "" {
		req.Owner, nonce = onceflow.NewOwnerAndNonce()
	} else {
		nonce = onceflow.NewNonce()
	}
	span := trace.SpanFromContext(ctx)
	switch {
	case e.tracer != nil:
		ctx, span = e.tracer.Start(ctx, "onceflow.execute")
	case span.IsRecording():
		ctx, span = span.TracerProvider().Tracer(tracerName).Start(ctx, "onceflow.execute")
	}
	if span.IsRecording() {
		span.SetAttributes(AttrOperationCode.String(string(req.Ref.Code)), AttrScopeDigest.String(req.Ref.Digest.String()))
	}
	defer func() {
		recording := span.IsRecording()
		if !recording && e.metrics == nil {
			return
		}
		outcome := string(OutcomeOf(res, err))
		if e.metrics != nil {
			e.metrics.executions.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(
				LabelOperationCode.String(string(req.Ref.Code)), LabelOutcome.String(outcome)))
		}
		if !recording {
			return
		}
		span.SetAttributes(AttrOutcome.String(outcome))
		if err == nil {
			span.SetAttributes(AttrDisposition.String(string(res.Disposition)), AttrAttempt.Int64(res.Fence.Attempt), AttrRev.Int64(res.Fence.Rev))
		} else {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	inv := invocation{e: e, req: req, nonce: nonce}
	return inv.execute(ctx, action)
}

// log writes one line about this invocation, naming its record.
func (v *invocation) log(ctx context.Context, level slog.Level, msg string, args ...any) {
	v.e.log(ctx, v.req.Ref, v.req.Operation, level, msg, args...)
}

// log writes one line about a record when the logger takes the level: the
// attributes are built only then.
func (e *Executor) log(ctx context.Context, ref onceflow.Ref, op onceflow.OperationID, level slog.Level, msg string, args ...any) {
	l := e.cfg.Logger
	if !l.Enabled(ctx, level) {
		return
	}
	l.With("ref", ref.String(), "op", string(op)).Log(ctx, level, msg, args...)
}

// invocation is one Execute call.
type invocation struct {
	e     *Executor
	req   Request
	nonce onceflow.Nonce
	// sent is when the request that last confirmed the lease was sent:
	// the lease a reply reports is measured from no later than that.
	sent time.Time
	// leaseEnd is the local time by which the lease confirmed at sent runs
	// out, at the earliest.
	leaseEnd time.Time
	// epoch is the record's Fence.Epoch, once it started.
	epoch int64
}

// fence is own's fencing token with the record's epoch.
func (v *invocation) fence(own driver.Ownership) onceflow.Fence {
	f := own.Fence()
	f.Epoch = v.epoch
	return f
}

func (v *invocation) store() driver.Store { return v.e.cfg.Store }

func (v *invocation) claimRequest() driver.ClaimRequest {
	c := v.e.cfg
	codec := c.Codec
	if v.req.Codec != "" {
		codec = v.req.Codec
	}
	return driver.ClaimRequest{
		Ref: v.req.Ref, Operation: v.req.Operation, Fingerprint: v.req.Fingerprint, Owner: v.req.Owner,
		Codec: codec, Policy: c.PolicyRevision, Lease: c.Lease, Retention: c.FailureRetention, Nonce: v.nonce,
	}
}

func (v *invocation) fused() bool { return v.req.BeforeStart == nil }

func (v *invocation) claim(ctx context.Context) (out driver.ClaimOutcome, err error) {
	ctx, ph := v.e.phase(ctx, v.req.Ref.Code, "claim")
	if ph != nil {
		defer func() { ph.end(err, outcomeAttrs(out)...) }()
	}
	v.sent = time.Now()
	if v.fused() {
		return v.store().ClaimStart(ctx, v.claimRequest())
	}
	return v.store().Claim(ctx, v.claimRequest())
}

func (v *invocation) execute(ctx context.Context, action Action) (Result, error) {
	out, err := v.claim(ctx)
	if errors.Is(err, onceflow.ErrIndeterminate) {
		out, err = v.reclaim(ctx, err)
	}
	if err != nil {
		return Result{}, err
	}
	return v.onClaim(ctx, out, action)
}

// reclaim learns what an indeterminate claim did. INSPECT showing the
// record as ours is not permission to run: onClaim still requires this
// invocation's nonce. Only when the record shows the claim cannot have
// applied is the claim sent again.
func (v *invocation) reclaim(ctx context.Context, claimErr error) (driver.ClaimOutcome, error) {
	obs, err := v.e.Inspect(ctx, v.req.Ref)
	if err != nil {
		return nil, errors.Join(claimErr, err)
	}
	if obs.Found {
		r := obs.Record
		mine := r.Owner == v.req.Owner && r.Operation == v.req.Operation
		if mine && (r.State == onceflow.StateClaimed || r.State == onceflow.StateExecuting || r.State == onceflow.StateFailedRetryable) {
			return driver.ReplayedAcquire{Ownership: ownership(v.req.Ref, r), Record: r}, nil
		}
		if live := r.State == onceflow.StateClaimed || r.State == onceflow.StateExecuting; live && r.LeaseRemaining() > 0 {
			if r.Owner == v.req.Owner {
				return driver.OwnerOperationConflict{Record: r}, nil
			}
			return driver.InProgress{Record: r}, nil
		}
	}
	// driver.Missing, a record the claim would have taken over had it run, or one
	// that moved on (COMPLETED, ABANDONED): sending the claim again is safe
	// and gives the script's own answer.
	return v.claim(ctx)
}

func ownership(ref onceflow.Ref, r onceflow.Record) driver.Ownership {
	return driver.Ownership{Ref: ref, Operation: r.Operation, Owner: r.Owner, Attempt: r.Attempt, Rev: r.Rev}
}

func (v *invocation) onClaim(ctx context.Context, out driver.ClaimOutcome, action Action) (Result, error) {
	ref := v.req.Ref
	switch o := out.(type) {
	case driver.Acquired:
		return v.acquired(ctx, o.Ownership, o.Record, "", action)
	case driver.TakenOver:
		v.e.countTakeover(ctx, ref.Code, o.From)
		v.log(ctx, slog.LevelInfo, "onceflow: took over", "from", o.From, "attempt", o.Record.Attempt, "effect_may_have_happened", o.EffectMayHaveHappened)
		return v.acquired(ctx, o.Ownership, o.Record, o.From, action)
	case driver.ReplayedAcquire:
		r := o.Record
		switch r.State {
		case onceflow.StateExecuting:
			if r.Nonce == v.nonce { // our own start whose reply was lost
				return v.started(ctx, o.Ownership, r, "", action)
			}
			// The same attempt is running in another invocation: evidence
			// of work in flight, not permission to run (seed flaw 1).
			return Result{}, &InProgressError{Ref: ref, RetryAfter: r.LeaseRemaining(), SameOwner: true}
		case onceflow.StateClaimed:
			return v.acquired(ctx, o.Ownership, r, "", action)
		case onceflow.StateFailedRetryable:
			return Result{}, &RetryableError{Ref: ref, Recorded: true, Err: fmt.Errorf("this attempt already failed with no effect: %s", r.Reason)}
		}
		return Result{}, fmt.Errorf("%w: replayed acquire in state %s", onceflow.ErrUnexpectedReply, r.State)
	case driver.CompletedReplay:
		v.log(ctx, slog.LevelDebug, "onceflow: replayed")
		return Result{Disposition: Replayed, Response: o.Record.Response, Fence: o.Record.Fence()}, nil
	case driver.InProgress:
		return Result{}, &InProgressError{Ref: ref, RetryAfter: o.Record.LeaseRemaining()}
	case driver.FingerprintMismatch:
		return Result{}, &ConflictError{Ref: ref, Kind: ErrFingerprintMismatch, Detail: "the key was used for another request; use a new key for a new request"}
	case driver.OwnerOperationConflict:
		return Result{}, &ConflictError{Ref: ref, Kind: ErrOwnerOperationConflict, Detail: fmt.Sprintf("the owner holds it for operation %q", o.Record.Operation)}
	case driver.CodecMismatch:
		return Result{}, &ConflictError{Ref: ref, Kind: ErrCodecMismatch, Detail: fmt.Sprintf(
			"stored with codec %q policy %d, this caller uses %q policy %d; deploy a reader for it or wait for the record to expire",
			o.Record.Codec, o.Record.Policy, v.claimRequest().Codec, v.e.cfg.PolicyRevision)}
	case driver.OperationFailed:
		return Result{}, &OperationFailedError{Ref: ref, Reason: o.Record.Reason}
	case driver.RecoveryRequired:
		r := o.Record
		return Result{}, &EffectUnknownError{Ref: ref, Operation: r.Operation, Attempt: r.Attempt, Rev: r.Rev, State: r.State,
			Recorded: true, RecoveryRequired: true, Reason: "the record is ABANDONED: " + r.Reason}
	}
	return Result{}, fmt.Errorf("%w: claim outcome %T", onceflow.ErrUnexpectedReply, out)
}

// acquired holds a claim (CLAIMED, or EXECUTING after the fused path) and
// brings it to a confirmed start.
func (v *invocation) acquired(ctx context.Context, own driver.Ownership, r onceflow.Record, from onceflow.State, action Action) (Result, error) {
	if r.State == onceflow.StateExecuting && r.Nonce == v.nonce {
		return v.started(ctx, own, r, from, action)
	}
	if v.req.BeforeStart != nil {
		if err := v.req.BeforeStart(ctx, own); err != nil {
			if _, rerr := v.store().Release(context.WithoutCancel(ctx), driver.ReleaseRequest{Ownership: own}); rerr != nil {
				v.log(ctx, slog.LevelWarn, "onceflow: release after a failed BeforeStart", "err", rerr)
			}
			return Result{}, fmt.Errorf("idemstore: before start (the claim was released, nothing ran): %w", err)
		}
	}
	sctx, ph := v.e.phase(ctx, own.Ref.Code, "start")
	own, r, err := v.start(sctx, own)
	if ph != nil {
		ph.end(err, recordAttrs(r)...)
	}
	if err != nil {
		return Result{}, err
	}
	return v.started(ctx, own, r, from, action)
}

// start confirms EXECUTING for this invocation's nonce.
func (v *invocation) start(ctx context.Context, own driver.Ownership) (driver.Ownership, onceflow.Record, error) {
	c := v.e.cfg
	req := driver.StartRequest{Ownership: own, Nonce: v.nonce, Lease: c.Lease, Retention: c.FailureRetention}
	for try := 0; ; try++ {
		v.sent = time.Now()
		out, err := v.store().Start(ctx, req)
		if err != nil {
			if !errors.Is(err, onceflow.ErrIndeterminate) || try > 0 {
				return driver.Ownership{}, onceflow.Record{}, err
			}
			obs, ierr := v.e.Inspect(ctx, v.req.Ref)
			if ierr != nil {
				return driver.Ownership{}, onceflow.Record{}, errors.Join(err, ierr)
			}
			r := obs.Record
			mine := obs.Found && r.Owner == own.Owner && r.Operation == own.Operation
			switch {
			case mine && r.State == onceflow.StateExecuting && r.Nonce == v.nonce:
				return ownership(own.Ref, r), r, nil
			case mine && r.State == onceflow.StateClaimed:
				continue // the start did not apply: send it again
			case obs.Found:
				return driver.Ownership{}, onceflow.Record{}, &InProgressError{Ref: own.Ref, RetryAfter: r.LeaseRemaining(), SameOwner: r.Owner == own.Owner}
			}
			return driver.Ownership{}, onceflow.Record{}, fmt.Errorf("idemstore: %s vanished before it started; retry: %w", own.Ref, err)
		}
		switch o := out.(type) {
		case driver.Transitioned:
			return o.Ownership, o.Record, nil
		case driver.AlreadyTransitioned:
			if o.Record.Nonce == v.nonce {
				return ownership(own.Ref, o.Record), o.Record, nil
			}
			return driver.Ownership{}, onceflow.Record{}, &InProgressError{Ref: own.Ref, RetryAfter: o.Record.LeaseRemaining(), SameOwner: true}
		case driver.Refused:
			return driver.Ownership{}, onceflow.Record{}, &InProgressError{Ref: own.Ref, RetryAfter: o.Record.LeaseRemaining(), SameOwner: o.Record.Owner == own.Owner}
		case driver.Missing:
			return driver.Ownership{}, onceflow.Record{}, fmt.Errorf("idemstore: %s vanished before it started; retry", own.Ref)
		}
		return driver.Ownership{}, onceflow.Record{}, fmt.Errorf("%w: start outcome %T", onceflow.ErrUnexpectedReply, out)
	}
}

// doubt says why the action may not simply run on record r, taken over
// from state from ("" for a claim that created it): the record itself says
// an earlier attempt's effect is unsettled, or the request brings evidence
// of one that r does not settle. "" when nothing may have run.
func (v *invocation) doubt(r onceflow.Record, from onceflow.State) string {
	switch {
	case r.Uncertain:
		return "taken over from an expired EXECUTING record"
	case v.req.Doubt == nil || v.req.Doubt.settledBy(r, from):
		return ""
	case from == "":
		return "the store had no record of the operation, but " + v.req.Doubt.Reason
	}
	return "taken over from " + string(from) + ", but " + v.req.Doubt.Reason
}

// started runs with EXECUTING confirmed for this invocation: r is the
// record as the request sent at v.sent confirmed it. A record that may carry
// an earlier attempt's effect is settled first.
func (v *invocation) started(ctx context.Context, own driver.Ownership, r onceflow.Record, from onceflow.State, action Action) (Result, error) {
	v.leaseEnd = v.sent.Add(r.LeaseRemaining())
	v.epoch = r.Fence().Epoch
	doubt := v.doubt(r, from)
	if err := v.runnable(ctx); err != nil {
		if doubt != "" {
			// An earlier attempt's effect is unsettled: leave the record
			// as it is, for the next takeover to settle.
			return Result{}, fmt.Errorf("idemstore: %s: %w", own.Ref, err)
		}
		// EXECUTING is ours and nothing happened, so the next attempt
		// may take over at once.
		return v.failRetryable(ctx, own, err)
	}
	x := Execution{Ref: own.Ref, Operation: own.Operation, Owner: own.Owner, Nonce: v.nonce, Fence: v.fence(own), Doubt: doubt}
	xctx := context.WithValue(ctx, executionKey{}, x)
	if doubt != "" {
		if !r.Uncertain {
			v.log(ctx, slog.LevelInfo, "onceflow: settling a doubt before the action", "doubt", doubt, "attempt", r.Attempt)
		}
		switch {
		case v.req.Reconcile != nil:
			rctx, ph := v.e.phase(xctx, own.Ref.Code, "reconcile")
			resp, found, err := v.reconcile(rctx, r)
			if ph != nil {
				ph.end(err, attribute.Bool("onceflow.found", found), AttrAttempt.Int64(r.Attempt))
			}
			if err != nil {
				return v.abandon(ctx, own, "reconcile failed ("+doubt+")", err)
			}
			if found {
				v.log(ctx, slog.LevelInfo, "onceflow: reconciled a previous attempt's effect", "attempt", r.Attempt)
				res, err := v.complete(ctx, own, resp)
				if err != nil {
					return Result{}, err
				}
				res.Disposition, res.TookOver = Reconciled, from
				return res, nil
			}
			v.log(ctx, slog.LevelInfo, "onceflow: reconcile found no effect; running", "attempt", r.Attempt)
		case v.req.IdempotentDownstream:
			v.log(ctx, slog.LevelInfo, "onceflow: re-running after an uncertain takeover: downstream is idempotent", "attempt", r.Attempt)
		default:
			return v.abandon(ctx, own, doubt+": the earlier attempt's effect may have happened, and there is no Reconcile hook", nil)
		}
		// Reconcile may have outlasted the lease: confirm it is still ours
		// before running, so two attempts never run side by side.
		if err := v.confirmLease(ctx, own); err != nil {
			return Result{}, err
		}
		if err := v.runnable(ctx); err != nil {
			return Result{}, fmt.Errorf("idemstore: %s: %w", own.Ref, err)
		}
	}
	resp, err := v.run(xctx, own, action)
	if err == nil {
		res, err := v.complete(ctx, own, resp)
		if err != nil {
			return Result{}, err
		}
		res.TookOver = from
		return res, nil
	}
	var noEffect *noEffectError
	if errors.As(err, &noEffect) {
		res, err := v.failRetryable(ctx, own, noEffect.err)
		var re *RetryableError
		if errors.As(err, &re) {
			re.NotStored = noEffect.notStored
		}
		return res, err
	}
	var unknown *effectUnknownError
	if errors.As(err, &unknown) {
		err = unknown.err
	}
	return v.abandon(ctx, own, "the action failed and its effect may have happened", err)
}

// runnable says whether the action may still start: the caller has not
// given up, and the lease has more than the safety margin left.
func (v *invocation) runnable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cancelled before the action ran: %w", context.Cause(ctx))
	}
	if left := time.Until(v.leaseEnd) - v.e.cfg.SafetyMargin; left <= 0 {
		return fmt.Errorf("%w: the lease had %v left, less than the safety margin, before the action ran", ErrLeaseUnconfirmed, left+v.e.cfg.SafetyMargin)
	}
	return nil
}

// renewRequest is the RENEW of this invocation's lease.
func (v *invocation) renewRequest(own driver.Ownership) driver.RenewRequest {
	c := v.e.cfg
	return driver.RenewRequest{Ref: own.Ref, Operation: own.Operation, Owner: own.Owner, Nonce: v.nonce, Lease: c.Lease, Retention: c.FailureRetention}
}

// confirmLease renews the lease once, synchronously, before the action
// runs, and refuses to go on unless the store confirms it. While the lease
// lasts, the renewal must come back before it ends; once it has run out
// (a slow Reconcile), the store still renews it if nobody took the record
// over, and refuses if somebody did.
func (v *invocation) confirmLease(ctx context.Context, own driver.Ownership) error {
	sent := time.Now()
	if sent.Before(v.leaseEnd) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, v.leaseEnd)
		defer cancel()
	}
	rctx, ph := v.e.phase(ctx, own.Ref.Code, "renew")
	out, err := v.store().Renew(rctx, v.renewRequest(own))
	if ph != nil {
		ph.end(err, outcomeAttrs(out)...)
	}
	v.e.countRenewal(ctx, own.Ref.Code, renewalResult(out, err))
	if err != nil {
		return fmt.Errorf("idemstore: confirm the lease of %s before running: %w", own.Ref, err)
	}
	switch o := out.(type) {
	case driver.Renewed:
		v.sent, v.leaseEnd = sent, sent.Add(o.Record.LeaseRemaining())
		return nil
	case driver.Refused:
		return &InProgressError{Ref: own.Ref, RetryAfter: o.Record.LeaseRemaining(), SameOwner: o.Record.Owner == own.Owner}
	}
	return fmt.Errorf("idemstore: %s vanished before it ran; retry", own.Ref)
}

func (v *invocation) reconcile(ctx context.Context, r onceflow.Record) (resp []byte, found bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reconcile panicked: %v", p)
		}
	}()
	return v.req.Reconcile(ctx, r)
}

// run calls the action under a kept lease (see lease). The action's
// context is cancelled with ErrLeaseLost or ErrLeaseUnconfirmed when the
// lease cannot be kept.
func (v *invocation) run(ctx context.Context, own driver.Ownership, action Action) (resp []byte, err error) {
	ctx, ph := v.e.phase(ctx, own.Ref.Code, "action")
	if ph != nil {
		defer func() { ph.end(err, AttrAttempt.Int64(own.Attempt), AttrRev.Int64(own.Rev)) }()
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l := v.keepLease(actx, cancel, own)
	defer func() {
		l.stop()
		if p := recover(); p != nil {
			v.log(ctx, slog.LevelError, "onceflow: action panicked", "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, EffectUnknown(fmt.Errorf("action panicked: %v", p))
		}
		if cause := context.Cause(actx); isLeaseError(cause) {
			if err != nil {
				err = fmt.Errorf("%w (the action was cancelled: %w)", err, cause)
			} else {
				// The action ignored the cancellation and returned a
				// result after the lease was gone: completing it will
				// tell whether it can still be recorded.
				v.log(ctx, slog.LevelWarn, "onceflow: the action finished after its lease was lost", "cause", cause)
			}
		}
	}()
	return action(actx)
}

func isLeaseError(err error) bool {
	return errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrLeaseUnconfirmed)
}

// writeCtx is the context for recording an outcome: the caller may have
// given up, but the outcome must still be written.
func writeCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// complete records the response. A lost reply, or one that does not
// decode, is verified with INSPECT; a success the store did not confirm is
// never reported.
func (v *invocation) complete(ctx context.Context, own driver.Ownership, resp []byte) (res Result, err error) {
	ctx, ph := v.e.phase(writeCtx(ctx), own.Ref.Code, "complete")
	if ph != nil {
		defer func() { ph.end(err, AttrAttempt.Int64(own.Attempt), AttrRev.Int64(res.Fence.Rev)) }()
	}
	req := driver.CompleteRequest{Ownership: own, Nonce: v.nonce, Response: resp, TTL: v.e.cfg.ReplayTTL}
	ok := Result{Disposition: Ran, Response: resp, Fence: v.fence(own)}
	recovery := func(reason string, err error) (Result, error) {
		v.log(ctx, slog.LevelError, "onceflow: the action succeeded but its result could not be recorded", "reason", reason, "err", err)
		return Result{}, &EffectUnknownError{Ref: own.Ref, Operation: own.Operation, Attempt: own.Attempt, Rev: own.Rev,
			State: onceflow.StateExecuting, RecoveryRequired: true, Reason: "the action succeeded but " + reason, Err: err}
	}
	for try := 0; try < 2; try++ {
		out, err := v.store().Complete(ctx, req)
		if err == nil {
			switch o := out.(type) {
			case driver.Transitioned:
				ok.Fence = v.fence(o.Ownership)
				return ok, nil
			case driver.AlreadyTransitioned:
				if o.Record.Nonce == v.nonce {
					ok.Fence = v.fence(ownership(own.Ref, o.Record))
					return ok, nil
				}
				return recovery("another invocation completed the record", nil)
			case driver.Refused:
				return recovery(fmt.Sprintf("complete was refused (%s; the lease was lost)", o.Reason), nil)
			case driver.Missing:
				return recovery("the record is gone", nil)
			}
			return recovery("the store answered unexpectedly", fmt.Errorf("%w: %T", onceflow.ErrUnexpectedReply, out))
		}
		if errors.Is(err, onceflow.ErrInvalidInput) {
			// The effect happened, but the store refuses its response (too
			// large): it will never be recorded, so say so now rather
			// than leave the record EXECUTING until its lease runs out.
			return v.abandon(ctx, own, "the action succeeded but its response cannot be stored", err)
		}
		// Only a refused request proves nothing was sent. A lost reply,
		// and a reply that does not decode (a *CorruptRecordError or
		// ErrUnexpectedReply), may follow a write that applied: INSPECT
		// tells.
		what := "complete was indeterminate"
		if !errors.Is(err, onceflow.ErrIndeterminate) {
			what = "complete's reply could not be read (" + err.Error() + ")"
		}
		obs, ierr := v.e.Inspect(ctx, own.Ref)
		if ierr != nil {
			return recovery(what+" and inspect failed", errors.Join(err, ierr))
		}
		r := obs.Record
		mine := obs.Found && r.Owner == own.Owner && r.Operation == own.Operation
		switch {
		case mine && r.State == onceflow.StateCompleted && bytes.Equal(r.Response, resp) && r.Nonce == v.nonce:
			ok.Fence = v.fence(ownership(own.Ref, r))
			return ok, nil
		case mine && r.State == onceflow.StateExecuting && r.Nonce == v.nonce:
			continue // not applied: complete again
		}
		return recovery(what+" and the record shows another outcome", err)
	}
	return recovery("complete stayed unconfirmed", nil)
}

// fail records FAILED_RETRYABLE or ABANDONED and verifies an indeterminate
// write, or one whose reply does not decode, with INSPECT before returning
// (seed flaw 6).
func (v *invocation) fail(ctx context.Context, own driver.Ownership, target onceflow.State, reason string) (recorded bool, rec onceflow.Record) {
	ctx, ph := v.e.phase(ctx, own.Ref.Code, "fail")
	if ph != nil {
		defer func() { ph.end(nil, AttrState.String(string(target)), attribute.Bool("onceflow.recorded", recorded)) }()
	}
	ctx = writeCtx(ctx)
	// The reason comes from an action's error text, a panic value or a
	// Doubt: sanitised, it is one the store accepts (no NUL, not too long).
	req := driver.FailRequest{Ownership: own, Nonce: v.nonce, Target: target, Reason: onceflow.SanitizeReason(reason), TTL: v.e.cfg.FailureRetention}
	for try := 0; try < 2; try++ {
		out, err := v.store().Fail(ctx, req)
		if err == nil {
			switch o := out.(type) {
			case driver.Transitioned:
				return true, o.Record
			case driver.AlreadyTransitioned:
				return true, o.Record
			case driver.Refused:
				return false, o.Record
			}
			return false, onceflow.Record{}
		}
		if errors.Is(err, onceflow.ErrInvalidInput) {
			v.log(ctx, slog.LevelError, "onceflow: the store refused to record the failure", "target", target, "err", err)
			return false, onceflow.Record{}
		}
		// A lost reply, or one that does not decode, may follow a write
		// that applied: INSPECT tells whether it was recorded.
		obs, ierr := v.e.Inspect(ctx, own.Ref)
		if ierr != nil {
			v.log(ctx, slog.LevelError, "onceflow: recording the failure is unconfirmed and inspect failed", "target", target, "err", errors.Join(err, ierr))
			return false, onceflow.Record{}
		}
		r := obs.Record
		mine := obs.Found && r.Owner == own.Owner && r.Operation == own.Operation
		switch {
		case mine && r.State == target:
			return true, r
		case mine && r.State == onceflow.StateExecuting && r.Nonce == v.nonce:
			continue // not applied: send it again
		}
		return false, r
	}
	return false, onceflow.Record{}
}

func (v *invocation) failRetryable(ctx context.Context, own driver.Ownership, cause error) (Result, error) {
	recorded, _ := v.fail(ctx, own, onceflow.StateFailedRetryable, cause.Error())
	return Result{}, &RetryableError{Ref: own.Ref, Recorded: recorded, Err: cause}
}

func (v *invocation) abandon(ctx context.Context, own driver.Ownership, reason string, cause error) (Result, error) {
	full := reason
	if cause != nil {
		full += ": " + cause.Error()
	}
	recorded, r := v.fail(ctx, own, onceflow.StateAbandoned, full)
	v.log(ctx, slog.LevelWarn, "onceflow: effect unknown; record abandoned", "recorded", recorded, "reason", full)
	attempt, rev, state := own.Attempt, own.Rev, onceflow.StateExecuting
	if recorded {
		attempt, rev, state = r.Attempt, r.Rev, r.State
	}
	return Result{}, &EffectUnknownError{Ref: own.Ref, Operation: own.Operation, Attempt: attempt, Rev: rev, State: state,
		Recorded: recorded, Reason: reason, Err: cause}
}

// AskFirst is the pattern for a downstream call that does not deduplicate
// by the operation key but can be asked by it (a payment provider's
// "retrieve by idempotency key"): inside an action, when the running
// attempt is in doubt (Execution.Doubt), lookup is asked first and its
// effect, if found, is the action's result; otherwise, and always when
// nothing may have run before, call makes the call. Both get the operation
// key. A lookup that fails is a RetryableNoEffect error: nothing was
// called.
//
// Reconcile, which the executor runs before the action whenever there is
// doubt, is the first place for such a lookup; AskFirst is for actions
// whose lookup needs what only the action knows, or as a second check.
func AskFirst[T any](ctx context.Context,
	lookup func(ctx context.Context, key string) (T, bool, error),
	call func(ctx context.Context, key string) (T, error),
) (T, error) {
	x, _ := ExecutionFrom(ctx)
	key := x.Key()
	if x.Doubt != "" {
		v, found, err := lookup(ctx, key)
		if err != nil {
			var zero T
			return zero, RetryableNoEffect(fmt.Errorf("ask the downstream before calling it again (%s): %w", x.Doubt, err))
		}
		if found {
			return v, nil
		}
	}
	return call(ctx, key)
}
