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

// The names of an Executor's metrics, span attributes and metric labels.
// docs/operations.md lists them with their kinds, units and labels (the
// table internal/doclink's TestOperationsListsEveryMetric and
// TestTelemetrySpansAndMetrics check them against); none is API.
const (
	metricExecutions        = "onceflow.executions"         // by outcome (onceflow.Outcome)
	metricTakeovers         = "onceflow.takeovers"          // by the state taken over from
	metricRenewals          = "onceflow.renewals"           // by result: renewed, failed, refused
	metricLostLeases        = "onceflow.lost_leases"        // by cause: lost, unconfirmed
	metricPhaseDuration     = "onceflow.phase.duration"     // seconds, by phase
	metricRetentionRefusals = "onceflow.retention_refusals" // see retention.go
	metricReferenceReuses   = "onceflow.reference_reuses"   // by action: flagged, refused (reference.go)
)

// Span attribute keys. None carries a raw key, principal, workflow ID or
// payload: a record is named by its operation code and HMAC digest.
const (
	attrOperationCode = attribute.Key("onceflow.operation_code")
	attrScopeDigest   = attribute.Key("onceflow.scope_digest")
	attrOutcome       = attribute.Key("onceflow.outcome")
	attrAttempt       = attribute.Key("onceflow.attempt")
	attrRev           = attribute.Key("onceflow.rev")
	attrState         = attribute.Key("onceflow.state")
	attrTakeoverFrom  = attribute.Key("onceflow.takeover_from")
	attrFound         = attribute.Key("onceflow.found")
	attrTarget        = attribute.Key("onceflow.target")
)

// Metric label keys: the Temporal SDK's vocabulary (snake case, no
// prefix: namespace, task_queue, workflow_type, activity_type), so one
// dashboard joins the executor's series with the SDK's. The spans keep
// the namespaced attr* keys, as OpenTelemetry's conventions have span
// attributes.
const (
	labelOperationCode = attribute.Key("operation_code") // every metric's
	labelOutcome       = attribute.Key("outcome")        // metricExecutions'
	labelPhase         = attribute.Key("phase")          // metricPhaseDuration's
	labelTakeoverFrom  = attribute.Key("takeover_from")  // metricTakeovers'
	labelResult        = attribute.Key("result")         // metricRenewals'
	labelCause         = attribute.Key("cause")          // metricLostLeases'
	labelAction        = attribute.Key("action")         // metricReferenceReuses'
)

// telemetry is an Executor's metric instruments; nil without a
// MeterProvider, so an unmeasured executor pays nothing.
type telemetry struct {
	executions metric.Int64Counter
	takeovers  metric.Int64Counter
	renewals   metric.Int64Counter
	lostLeases metric.Int64Counter
	phase      metric.Float64Histogram
	// retentionRefusals and referenceReuses: see retention.go and
	// reference.go.
	retentionRefusals metric.Int64Counter
	referenceReuses   metric.Int64Counter
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	if mp == nil {
		return nil, nil
	}
	m := mp.Meter(tracerName)
	var t telemetry
	var errs [7]error
	t.executions, errs[0] = m.Int64Counter(metricExecutions, metric.WithDescription("Execute calls by operation code and outcome."))
	t.takeovers, errs[1] = m.Int64Counter(metricTakeovers, metric.WithDescription("Claims that took a record over, by the state taken over from."))
	t.renewals, errs[2] = m.Int64Counter(metricRenewals, metric.WithDescription("Lease renewals by result: renewed, failed, refused."))
	t.lostLeases, errs[3] = m.Int64Counter(metricLostLeases, metric.WithDescription("Actions cancelled because their lease was lost or not confirmed in time."))
	t.phase, errs[4] = m.Float64Histogram(metricPhaseDuration, metric.WithUnit("s"),
		metric.WithDescription("Latency of each executor phase."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	t.retentionRefusals, errs[5] = m.Int64Counter(metricRetentionRefusals,
		metric.WithDescription("Re-runs after an unknown effect refused past the downstream's retention."))
	t.referenceReuses, errs[6] = m.Int64Counter(metricReferenceReuses,
		metric.WithDescription("Business references that arrived under a second operation key within their retention, by action."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return &t, nil
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
			trace.WithAttributes(attrOperationCode.String(string(code))))
	}
	p.ctx = ctx
	return ctx, p
}

// end ends the phase with its error (nil when it went well) and extra
// span attributes.
func (p *phaseSpan) end(err error, attrs ...attribute.KeyValue) {
	if p.e.metrics != nil {
		p.e.metrics.phase.Record(context.WithoutCancel(p.ctx), time.Since(p.start).Seconds(), metric.WithAttributes(
			labelOperationCode.String(string(p.code)), labelPhase.String(p.name)))
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

func (e *Executor) countLostLease(ctx context.Context, code onceflow.OperationCode, cause error) {
	if e.metrics == nil {
		return
	}
	kind := "lost"
	if errors.Is(cause, ErrLeaseUnconfirmed) {
		kind = "unconfirmed"
	}
	e.metrics.lostLeases.Add(ctx, 1, metric.WithAttributes(labelOperationCode.String(string(code)), labelCause.String(kind)))
}

// executeSpan is the telemetry of one Execute: its span, when it
// records, and its count by outcome, when the executor measures.
type executeSpan struct {
	e    *Executor
	ctx  context.Context
	code onceflow.OperationCode
	span trace.Span
}

// startExecute starts an Execute's span: always under the executor's
// TracerProvider, else only as the child of a recording span ctx carries.
func (e *Executor) startExecute(ctx context.Context, ref onceflow.Ref) (context.Context, executeSpan) {
	span := trace.SpanFromContext(ctx)
	switch {
	case e.tracer != nil:
		ctx, span = e.tracer.Start(ctx, "onceflow.execute")
	case span.IsRecording():
		ctx, span = span.TracerProvider().Tracer(tracerName).Start(ctx, "onceflow.execute")
	}
	if span.IsRecording() {
		span.SetAttributes(attrOperationCode.String(string(ref.Code)), attrScopeDigest.String(ref.Digest.String()))
	}
	return ctx, executeSpan{e: e, ctx: ctx, code: ref.Code, span: span}
}

// end counts the Execute by outcome and ends its span.
func (x executeSpan) end(res Result, err error) {
	recording := x.span.IsRecording()
	if !recording && x.e.metrics == nil {
		return
	}
	outcome := string(outcome(res, err))
	if x.e.metrics != nil {
		x.e.metrics.executions.Add(context.WithoutCancel(x.ctx), 1, metric.WithAttributes(
			labelOperationCode.String(string(x.code)), labelOutcome.String(outcome)))
	}
	if !recording {
		return
	}
	x.span.SetAttributes(attrOutcome.String(outcome))
	if err == nil {
		x.span.SetAttributes(attrAttempt.Int64(res.Fence.Attempt), attrRev.Int64(res.Fence.Rev))
	} else {
		x.span.RecordError(err)
		x.span.SetStatus(codes.Error, err.Error())
	}
	x.span.End()
}

// observed is the store port as the state machine calls it: every call
// is a phase (a child span when the context's span records, a latency
// sample when the executor measures), claims that took a record over and
// renewals are counted. The executor and the lease say nothing of
// telemetry; only the phases that are no store call (the action,
// reconcile) are started by hand.
type observed struct {
	driver.Store
	e *Executor
}

// Claim is the "claim" phase; a takeover is counted.
func (s observed) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimOutcome, error) {
	ctx, ph := s.e.phase(ctx, req.Ref.Code, "claim")
	out, err := s.Store.Claim(ctx, req)
	s.claimed(ctx, ph, req.Ref.Code, out, err)
	return out, err
}

// ClaimStart is the "claim" phase too.
func (s observed) ClaimStart(ctx context.Context, req driver.ClaimRequest) (driver.ClaimOutcome, error) {
	ctx, ph := s.e.phase(ctx, req.Ref.Code, "claim")
	out, err := s.Store.ClaimStart(ctx, req)
	s.claimed(ctx, ph, req.Ref.Code, out, err)
	return out, err
}

func (s observed) claimed(ctx context.Context, ph *phaseSpan, code onceflow.OperationCode, out driver.ClaimOutcome, err error) {
	if ph != nil {
		ph.end(err, outcomeAttrs(out)...)
	}
	if o, ok := out.(driver.TakenOver); ok && s.e.metrics != nil {
		s.e.metrics.takeovers.Add(ctx, 1, metric.WithAttributes(labelOperationCode.String(string(code)), labelTakeoverFrom.String(string(o.From))))
	}
}

// Start is the "start" phase.
func (s observed) Start(ctx context.Context, req driver.StartRequest) (driver.TransitionOutcome, error) {
	ctx, ph := s.e.phase(ctx, req.Ownership.Ref.Code, "start")
	out, err := s.Store.Start(ctx, req)
	if ph != nil {
		ph.end(err, outcomeAttrs(out)...)
	}
	return out, err
}

// Complete is the "complete" phase.
func (s observed) Complete(ctx context.Context, req driver.CompleteRequest) (driver.TransitionOutcome, error) {
	ctx, ph := s.e.phase(ctx, req.Ownership.Ref.Code, "complete")
	out, err := s.Store.Complete(ctx, req)
	if ph != nil {
		ph.end(err, outcomeAttrs(out)...)
	}
	return out, err
}

// Fail is the "fail" phase.
func (s observed) Fail(ctx context.Context, req driver.FailRequest) (driver.TransitionOutcome, error) {
	ctx, ph := s.e.phase(ctx, req.Ownership.Ref.Code, "fail")
	out, err := s.Store.Fail(ctx, req)
	if ph != nil {
		ph.end(err, append(outcomeAttrs(out), attrTarget.String(string(req.Target)))...)
	}
	return out, err
}

// Renew is the "renew" phase; every renewal is counted by result.
func (s observed) Renew(ctx context.Context, req driver.RenewRequest) (driver.RenewOutcome, error) {
	ctx, ph := s.e.phase(ctx, req.Ref.Code, "renew")
	out, err := s.Store.Renew(ctx, req)
	if ph != nil {
		ph.end(err, outcomeAttrs(out)...)
	}
	if s.e.metrics != nil {
		s.e.metrics.renewals.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(labelOperationCode.String(string(req.Ref.Code)), labelResult.String(renewalResult(out, err))))
	}
	return out, err
}

// Release is the "release" phase.
func (s observed) Release(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseOutcome, error) {
	ctx, ph := s.e.phase(ctx, req.Ownership.Ref.Code, "release")
	out, err := s.Store.Release(ctx, req)
	if ph != nil {
		ph.end(err)
	}
	return out, err
}

// Inspect is the "inspect" phase.
func (s observed) Inspect(ctx context.Context, ref onceflow.Ref) (driver.Observation, error) {
	ctx, ph := s.e.phase(ctx, ref.Code, "inspect")
	obs, err := s.Store.Inspect(ctx, ref)
	if ph != nil {
		attrs := []attribute.KeyValue{attrFound.Bool(obs.Found)}
		if obs.Found {
			attrs = append(attrs, recordAttrs(obs.Record)...)
		}
		ph.end(err, attrs...)
	}
	return obs, err
}

// Resolve is the "resolve" phase.
func (s observed) Resolve(ctx context.Context, req driver.ResolveRequest) (driver.ResolveOutcome, error) {
	ctx, ph := s.e.phase(ctx, req.Ref.Code, "resolve")
	out, err := s.Store.Resolve(ctx, req)
	if ph != nil {
		ph.end(err, outcomeAttrs(out)...)
	}
	return out, err
}

// outcomeAttrs are the span attributes of a store reply: the record's
// state, attempt and rev as the reply shows them.
func outcomeAttrs(out any) []attribute.KeyValue {
	var r onceflow.Record
	switch o := out.(type) {
	case driver.Acquired:
		r = o.Record
	case driver.TakenOver:
		return append(recordAttrs(o.Record), attrTakeoverFrom.String(string(o.From)))
	case driver.ReplayedAcquire:
		r = o.Record
	case driver.CompletedReplay:
		r = o.Record
	case driver.InProgress:
		r = o.Record
	case driver.FingerprintMismatch:
		r = o.Record
	case driver.AwaitingDecision:
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
	return []attribute.KeyValue{attrState.String(string(r.State)), attrAttempt.Int64(r.Attempt), attrRev.Int64(r.Rev)}
}

// renewalResult is the labelResult of a renewal.
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

// codeOption is the label set of a metric counted per operation code.
func codeOption(code onceflow.OperationCode) metric.AddOption {
	return metric.WithAttributes(labelOperationCode.String(string(code)))
}
