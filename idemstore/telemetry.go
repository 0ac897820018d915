package idemstore

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow"

	"github.com/onceflow/onceflow/idemstore/driver"
)

// Metric names of an Executor (OpenTelemetry; the Prometheus exporter
// writes them with underscores, e.g. onceflow_executions_total).
const (
	// MetricExecutions counts Execute calls by operation code and outcome
	// (see Outcome).
	MetricExecutions = "onceflow.executions"
	// MetricTakeovers counts claims that took a record over, by the
	// state taken over from (EXECUTING: an expired lease whose effect may
	// have happened; CLAIMED, FAILED_RETRYABLE: nothing ran).
	MetricTakeovers = "onceflow.takeovers"
	// MetricRenewals counts lease renewals by result: renewed, failed (the
	// store did not answer; retried until the lease runs out) or refused.
	MetricRenewals = "onceflow.renewals"
	// MetricLostLeases counts actions cancelled because their lease was
	// lost (cause "lost": another attempt holds the record) or could not be
	// confirmed in time (cause "unconfirmed").
	MetricLostLeases = "onceflow.lost_leases"
	// MetricPhaseDuration is the latency of each executor phase, in
	// seconds: claim, start, reconcile, action, complete, fail, inspect,
	// renew, resolve.
	MetricPhaseDuration = "onceflow.phase.duration"
)

// Span attribute keys. None carries a raw key, principal, workflow ID or
// payload: a record is named by its operation code and HMAC digest.
const (
	AttrOperationCode = attribute.Key("onceflow.operation_code")
	AttrScopeDigest   = attribute.Key("onceflow.scope_digest")
	AttrOutcome       = attribute.Key("onceflow.outcome")
	AttrDisposition   = attribute.Key("onceflow.disposition")
	AttrAttempt       = attribute.Key("onceflow.attempt")
	AttrRev           = attribute.Key("onceflow.rev")
	AttrState         = attribute.Key("onceflow.state")
	AttrPhase         = attribute.Key("onceflow.phase")
	AttrTakeoverFrom  = attribute.Key("onceflow.takeover_from")
)

// Metric label keys: the Temporal SDK's vocabulary (snake case, no
// prefix: namespace, task_queue, workflow_type, activity_type), so one
// dashboard joins the executor's series with the SDK's. The spans keep
// the namespaced Attr* keys, as OpenTelemetry's conventions have span
// attributes.
const (
	// LabelOperationCode is every executor metric's operation code.
	LabelOperationCode = attribute.Key("operation_code")
	// LabelOutcome is MetricExecutions' Outcome.
	LabelOutcome = attribute.Key("outcome")
	// LabelPhase is MetricPhaseDuration's phase.
	LabelPhase = attribute.Key("phase")
	// LabelTakeoverFrom is MetricTakeovers' state taken over from.
	LabelTakeoverFrom = attribute.Key("takeover_from")
	// LabelResult is MetricRenewals' result: renewed, failed, refused.
	LabelResult = attribute.Key("result")
	// LabelCause is MetricLostLeases' cause: lost, unconfirmed.
	LabelCause = attribute.Key("cause")
)

// telemetry is an Executor's metric instruments; nil without a
// MeterProvider, so an unmeasured executor pays nothing.
type telemetry struct {
	executions metric.Int64Counter
	takeovers  metric.Int64Counter
	renewals   metric.Int64Counter
	lostLeases metric.Int64Counter
	phase      metric.Float64Histogram
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	if mp == nil {
		return nil, nil
	}
	m := mp.Meter(tracerName)
	var t telemetry
	var errs [5]error
	t.executions, errs[0] = m.Int64Counter(MetricExecutions, metric.WithDescription("Execute calls by operation code and outcome."))
	t.takeovers, errs[1] = m.Int64Counter(MetricTakeovers, metric.WithDescription("Claims that took a record over, by the state taken over from."))
	t.renewals, errs[2] = m.Int64Counter(MetricRenewals, metric.WithDescription("Lease renewals by result: renewed, failed, refused."))
	t.lostLeases, errs[3] = m.Int64Counter(MetricLostLeases, metric.WithDescription("Actions cancelled because their lease was lost or not confirmed in time."))
	t.phase, errs[4] = m.Float64Histogram(MetricPhaseDuration, metric.WithUnit("s"),
		metric.WithDescription("Latency of each executor phase."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return &t, nil
}

// OutcomeOf classifies an Execute's result: the one classification of
// the executor's results, which every adapter maps through a table of its
// own. The executor's verdicts come first (an action's error may wrap
// anything; the verdict on the record is what counts), then a corrupt
// record or reply, the caller's cancellation, and a store that did not
// answer. Anything else is OutcomeError: a bug, never silently "store
// unavailable".
func OutcomeOf(res Result, err error) onceflow.Outcome {
	if err == nil {
		switch res.Disposition {
		case Replayed:
			return onceflow.OutcomeReplayed
		case Reconciled:
			return onceflow.OutcomeReconciled
		}
		return onceflow.OutcomeRan
	}
	var (
		ip  *InProgressError
		ce  *ConflictError
		re  *RetryableError
		eu  *EffectUnknownError
		of  *OperationFailedError
		ve  *onceflow.ValidationError
		se  *onceflow.StoreError
		cor *onceflow.CorruptRecordError
		rr  *ResolveRefusedError
	)
	switch {
	case errors.As(err, &eu) && eu.RecoveryRequired:
		return onceflow.OutcomeRecoveryRequired
	case errors.As(err, &eu):
		return onceflow.OutcomeEffectUnknown
	case errors.As(err, &re) && re.NotStored:
		return onceflow.OutcomeNotStored
	case errors.As(err, &re):
		return onceflow.OutcomeRetryable
	case errors.As(err, &of):
		return onceflow.OutcomeFailed
	case errors.As(err, &ip):
		return onceflow.OutcomeInProgress
	case errors.As(err, &ce):
		switch {
		case errors.Is(err, ErrOwnerOperationConflict):
			return onceflow.OutcomeOwnerConflict
		case errors.Is(err, ErrCodecMismatch):
			return onceflow.OutcomeCodecMismatch
		}
		return onceflow.OutcomeFingerprintMismatch
	case errors.As(err, &rr):
		return onceflow.OutcomeResolveRefused
	case errors.As(err, &cor), errors.Is(err, onceflow.ErrUnexpectedReply):
		return onceflow.OutcomeCorrupt
	case errors.As(err, &ve):
		return onceflow.OutcomeInvalid
	case errors.As(err, &se), errors.Is(err, onceflow.ErrIndeterminate):
		return onceflow.OutcomeStoreUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return onceflow.OutcomeCanceled
	}
	return onceflow.OutcomeError
}

// phaseSpan is one executor phase being traced or measured.
type phaseSpan struct {
	e     *Executor
	ctx   context.Context
	code  onceflow.OperationCode
	name  string
	start time.Time
	span  trace.Span // nil when the context's span does not record
}

// phase starts one executor phase: a child span when the context's span
// records, and a latency sample when the executor measures. It returns
// nil when neither is on, so an untraced, unmeasured call builds nothing
// (callers check before they build end's attributes).
func (e *Executor) phase(ctx context.Context, code onceflow.OperationCode, name string) (context.Context, *phaseSpan) {
	parent := trace.SpanFromContext(ctx)
	recording := parent.IsRecording()
	if !recording && e.metrics == nil {
		return ctx, nil
	}
	p := &phaseSpan{e: e, code: code, name: name, start: time.Now()}
	if recording {
		ctx, p.span = parent.TracerProvider().Tracer(tracerName).Start(ctx, "onceflow."+name,
			trace.WithAttributes(AttrOperationCode.String(string(code))))
	}
	p.ctx = ctx
	return ctx, p
}

// end ends the phase with its error (nil when it went well) and extra
// span attributes.
func (p *phaseSpan) end(err error, attrs ...attribute.KeyValue) {
	if p.e.metrics != nil {
		p.e.metrics.phase.Record(context.WithoutCancel(p.ctx), time.Since(p.start).Seconds(), metric.WithAttributes(
			LabelOperationCode.String(string(p.code)), LabelPhase.String(p.name)))
	}
	if p.span == nil {
		return
	}
	p.span.SetAttributes(attrs...)
	if err != nil {
		p.span.RecordError(err)
		p.span.SetStatus(codes.Error, err.Error())
	}
	p.span.End()
}

func (e *Executor) countTakeover(ctx context.Context, code onceflow.OperationCode, from onceflow.State) {
	if e.metrics != nil {
		e.metrics.takeovers.Add(ctx, 1, metric.WithAttributes(LabelOperationCode.String(string(code)), LabelTakeoverFrom.String(string(from))))
	}
}

func (e *Executor) countRenewal(ctx context.Context, code onceflow.OperationCode, result string) {
	if e.metrics != nil {
		e.metrics.renewals.Add(ctx, 1, metric.WithAttributes(LabelOperationCode.String(string(code)), LabelResult.String(result)))
	}
}

func (e *Executor) countLostLease(ctx context.Context, code onceflow.OperationCode, cause error) {
	if e.metrics == nil {
		return
	}
	kind := "lost"
	if errors.Is(cause, ErrLeaseUnconfirmed) {
		kind = "unconfirmed"
	}
	e.metrics.lostLeases.Add(ctx, 1, metric.WithAttributes(LabelOperationCode.String(string(code)), LabelCause.String(kind)))
}

// outcomeAttrs are the span attributes of a store reply: the record's
// state, attempt and rev as the reply shows them.
func outcomeAttrs(out any) []attribute.KeyValue {
	var r onceflow.Record
	switch o := out.(type) {
	case driver.Acquired:
		r = o.Record
	case driver.TakenOver:
		return append(recordAttrs(o.Record), AttrTakeoverFrom.String(string(o.From)))
	case driver.ReplayedAcquire:
		r = o.Record
	case driver.CompletedReplay:
		r = o.Record
	case driver.InProgress:
		r = o.Record
	case driver.FingerprintMismatch:
		r = o.Record
	case driver.RecoveryRequired:
		r = o.Record
	case driver.OperationFailed:
		r = o.Record
	case driver.OwnerOperationConflict:
		r = o.Record
	case driver.CodecMismatch:
		r = o.Record
	case driver.Transitioned:
		r = o.Record
	case driver.AlreadyTransitioned:
		r = o.Record
	case driver.Refused:
		r = o.Record
	case driver.Renewed:
		r = o.Record
	default:
		return nil
	}
	return recordAttrs(r)
}

func recordAttrs(r onceflow.Record) []attribute.KeyValue {
	return []attribute.KeyValue{AttrState.String(string(r.State)), AttrAttempt.Int64(r.Attempt), AttrRev.Int64(r.Rev)}
}

// renewalResult is the LabelResult of a renewal.
func renewalResult(out driver.RenewOutcome, err error) string {
	switch {
	case err != nil:
		return "failed"
	case out == nil:
		return "failed"
	}
	if _, ok := out.(driver.Renewed); ok {
		return "renewed"
	}
	return "refused"
}
