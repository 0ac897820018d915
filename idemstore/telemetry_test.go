package idemstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/redistest"
)

// telemetryEnv is an executor traced into memory and measured by a manual
// reader.
type telemetryEnv struct {
	env
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	// renewed receives when a renew span ended (and was exported).
	renewed <-chan struct{}
}

// spanEnded signals on ch when a span named name ends, without blocking.
type spanEnded struct {
	name string
	ch   chan struct{}
}

func (p spanEnded) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p spanEnded) Shutdown(context.Context) error                  { return nil }
func (p spanEnded) ForceFlush(context.Context) error                { return nil }
func (p spanEnded) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() == p.name {
		select {
		case p.ch <- struct{}{}:
		default:
		}
	}
}

func newTelemetryEnv(t *testing.T, cfg idemstore.ExecutorConfig) telemetryEnv {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	renewed := make(chan struct{}, 1)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSpanProcessor(spanEnded{name: "onceflow.renew", ch: renewed}))
	reader := sdkmetric.NewManualReader()
	cfg.TracerProvider = tp
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	return telemetryEnv{env: newEnv(t, cfg), spans: spans, reader: reader, renewed: renewed}
}

// tree returns the spans of the last trace as "parent>child" names, and
// every attribute of every span.
func (te telemetryEnv) tree(t *testing.T) (names []string, attrs []attribute.KeyValue) {
	t.Helper()
	got := te.spans.GetSpans()
	te.spans.Reset()
	byID := map[string]string{}
	for _, s := range got {
		byID[s.SpanContext.SpanID().String()] = s.Name
	}
	for _, s := range got {
		name := s.Name
		if p, ok := byID[s.Parent.SpanID().String()]; ok {
			name = p + ">" + s.Name
		}
		names = append(names, name)
		attrs = append(attrs, s.Attributes...)
	}
	slices.Sort(names)
	return slices.Compact(names), attrs
}

// counter sums a counter's points whose attributes include want.
func (te telemetryEnv) counter(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := te.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is %T", name, m.Data)
			}
			for _, p := range sum.DataPoints {
				if hasAll(p.Attributes, want) {
					n += p.Value
				}
			}
		}
	}
	return n
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func outcome(o string) attribute.KeyValue { return idemstore.LabelOutcome.String(o) }

// TestTelemetrySpansAndMetrics: a fresh run, a replay, a takeover with
// reconcile, a fingerprint mismatch and an abandonment each give their
// span tree and move their counter; no attribute carries the operation,
// owner or anything but codes, digests, states and numbers.
func TestTelemetrySpansAndMetrics(t *testing.T) {
	t.Parallel()
	te := newTelemetryEnv(t, idemstore.ExecutorConfig{Lease: 3 * time.Second, RenewInterval: 20 * time.Millisecond})
	var all []attribute.KeyValue
	check := func(want []string) {
		t.Helper()
		got, attrs := te.tree(t)
		all = append(all, attrs...)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("span %q missing from %q", w, got)
			}
		}
	}

	f := storetest.NewFixture()
	var runs atomic.Int32
	slow := func(ctx context.Context) ([]byte, error) {
		runs.Add(1)
		select {
		case <-te.renewed: // a renewal's span ended under the action's
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return []byte("ch_1"), nil
	}
	if _, err := te.exec.Execute(t.Context(), request(f), slow); err != nil {
		t.Fatal(err)
	}
	check([]string{"onceflow.execute", "onceflow.execute>onceflow.claim", "onceflow.execute>onceflow.action",
		"onceflow.action>onceflow.renew", "onceflow.execute>onceflow.complete"})
	if _, err := te.exec.Execute(t.Context(), request(f), slow); err != nil {
		t.Fatal(err)
	}
	check([]string{"onceflow.execute", "onceflow.execute>onceflow.claim"})

	other := request(f)
	other.Fingerprint = onceflow.FingerprintOf([]byte("another request"))
	if _, err := te.exec.Execute(t.Context(), other, slow); !errors.Is(err, idemstore.ErrFingerprintMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	te.tree(t)

	g := storetest.NewFixture()
	te.expiredExecuting(t, g)
	req := request(g)
	req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) { return []byte("ch_found"), true, nil }
	if res, err := te.exec.Execute(t.Context(), req, slow); err != nil || res.Disposition != idemstore.Reconciled {
		t.Fatalf("takeover: %+v, %v", res, err)
	}
	check([]string{"onceflow.execute>onceflow.claim", "onceflow.execute>onceflow.reconcile", "onceflow.execute>onceflow.complete"})

	h := storetest.NewFixture()
	te.expiredExecuting(t, h)
	if _, err := te.exec.Execute(t.Context(), request(h), slow); !errors.Is(err, idemstore.ErrEffectUnknown) {
		t.Fatalf("abandon: %v", err)
	}
	check([]string{"onceflow.execute>onceflow.fail"})

	if _, err := te.exec.Execute(t.Context(), request(h), slow); !errors.Is(err, idemstore.ErrAwaitingDecision) {
		t.Fatalf("after the abandonment: %v", err)
	}
	busy := storetest.NewFixture()
	if _, err := te.store.ClaimStart(t.Context(), busy.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())); err != nil {
		t.Fatal(err)
	}
	var ip *idemstore.InProgressError
	if _, err := te.exec.Execute(t.Context(), request(busy), slow); !errors.As(err, &ip) {
		t.Fatalf("in progress: %v", err)
	}
	te.tree(t)

	for _, c := range []struct {
		outcome onceflow.Outcome
		want    int64
	}{{onceflow.OutcomeRan, 1}, {onceflow.OutcomeReplayed, 1}, {onceflow.OutcomeFingerprintMismatch, 1},
		{onceflow.OutcomeReconciled, 1}, {onceflow.OutcomeEffectUnknown, 1}, {onceflow.OutcomeAwaitingDecision, 1},
		{onceflow.OutcomeInProgress, 1}} {
		if n := te.counter(t, idemstore.MetricExecutions, outcome(string(c.outcome))); n != c.want {
			t.Errorf("%s %s = %d, want %d", idemstore.MetricExecutions, c.outcome, n, c.want)
		}
	}
	if n := te.counter(t, idemstore.MetricTakeovers, idemstore.LabelTakeoverFrom.String("EXECUTING")); n != 2 {
		t.Errorf("takeovers from EXECUTING = %d, want 2", n)
	}
	if n := te.counter(t, idemstore.MetricRenewals, idemstore.LabelResult.String("renewed")); n < 1 {
		t.Errorf("renewals = %d, want some", n)
	}
	if runs.Load() != 1 {
		t.Errorf("%d runs", runs.Load())
	}

	secret := []string{string(f.Operation), string(g.Operation), string(h.Operation), "ch_1", "ch_found"}
	for _, kv := range all {
		v := kv.Value.String()
		for _, s := range secret {
			if strings.Contains(v, s) {
				t.Errorf("attribute %s = %q carries %q", kv.Key, v, s)
			}
		}
	}
}

// TestTelemetryLostLease: an action whose renewal is refused (another
// attempt took the record over) is counted as a lost lease.
func TestTelemetryLostLease(t *testing.T) {
	t.Parallel()
	te := newTelemetryEnv(t, idemstore.ExecutorConfig{Lease: 600 * time.Millisecond, RenewInterval: 20 * time.Millisecond})
	rdb := redistest.Client(t)
	f := storetest.NewFixture()
	_, err := te.exec.Execute(t.Context(), request(f), func(ctx context.Context) ([]byte, error) {
		// Another owner takes the record: delete it, so the next renewal
		// finds it gone and the lease is lost.
		if err := rdb.Del(context.Background(), te.store.Key(f.Ref)).Err(); err != nil {
			t.Error(err)
		}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	if !errors.Is(err, idemstore.ErrLeaseLost) {
		t.Fatalf("err = %v, want it to carry ErrLeaseLost", err)
	}
	if n := te.counter(t, idemstore.MetricLostLeases, idemstore.LabelCause.String("lost")); n != 1 {
		t.Fatalf("lost leases = %d, want 1", n)
	}
}

// TestOutcomeOf classifies every result and error of Execute.
func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	ref := storetest.NewFixture().Ref
	for _, c := range []struct {
		res  idemstore.Result
		err  error
		want onceflow.Outcome
	}{
		{idemstore.Result{Disposition: idemstore.Ran}, nil, onceflow.OutcomeRan},
		{idemstore.Result{Disposition: idemstore.Replayed}, nil, onceflow.OutcomeReplayed},
		{idemstore.Result{Disposition: idemstore.Reconciled}, nil, onceflow.OutcomeReconciled},
		{err: &idemstore.InProgressError{Ref: ref}, want: onceflow.OutcomeInProgress},
		{err: &idemstore.ConflictError{Ref: ref, Kind: idemstore.ErrFingerprintMismatch}, want: onceflow.OutcomeFingerprintMismatch},
		{err: &idemstore.ConflictError{Ref: ref, Kind: idemstore.ErrCodecMismatch}, want: onceflow.OutcomeCodecMismatch},
		{err: &idemstore.ConflictError{Ref: ref, Kind: idemstore.ErrOwnerOperationConflict}, want: onceflow.OutcomeOwnerConflict},
		{err: fmt.Errorf("claim: %w", onceflow.ErrUnexpectedReply), want: onceflow.OutcomeCorrupt},
		{err: &onceflow.ValidationError{Field: "Ref"}, want: onceflow.OutcomeInvalid},
		{err: &onceflow.StoreError{Op: "claim", Ref: ref, Err: context.DeadlineExceeded}, want: onceflow.OutcomeStoreUnavailable},
		{err: fmt.Errorf("waiting: %w", context.Canceled), want: onceflow.OutcomeCanceled},
		// The verdict on the record counts, whatever the action's error wraps.
		{err: &idemstore.RetryableError{Ref: ref, Err: &onceflow.StoreError{Op: "downstream"}}, want: onceflow.OutcomeRetryable},
		{err: &idemstore.RetryableError{Ref: ref, Err: errors.New("x")}, want: onceflow.OutcomeRetryable},
		{err: &idemstore.RetryableError{Ref: ref, NotStored: true, Err: errors.New("status 202 is not stored")}, want: onceflow.OutcomeNotStored},
		{err: &idemstore.EffectUnknownError{Ref: ref}, want: onceflow.OutcomeEffectUnknown},
		{err: &idemstore.EffectUnknownError{Ref: ref, AwaitingDecision: true}, want: onceflow.OutcomeAwaitingDecision},
		{err: &idemstore.OperationFailedError{Ref: ref}, want: onceflow.OutcomeFailed},
		{err: &onceflow.CorruptRecordError{Ref: ref, Field: "state"}, want: onceflow.OutcomeCorrupt},
		{err: &onceflow.StoreError{Op: "claim", Ref: ref, Err: errors.New("refused")}, want: onceflow.OutcomeStoreUnavailable},
		{err: errors.New("anything else"), want: onceflow.OutcomeError},
	} {
		if got := idemstore.OutcomeOf(c.res, c.err); got != c.want {
			t.Errorf("OutcomeOf(%+v, %v) = %s, want %s", c.res, c.err, got, c.want)
		}
	}
}

// TestNotStoredIsCountedAsSuch: an answer the caller does not keep (an
// HTTP 202 through idemhttp) releases the record like a retryable
// failure, so the next request runs the action again, and is counted as
// not_stored, not as retryable: a normal 202 is no failure.
func TestNotStoredIsCountedAsSuch(t *testing.T) {
	t.Parallel()
	te := newTelemetryEnv(t, idemstore.ExecutorConfig{})
	f := storetest.NewFixture()
	var runs atomic.Int32
	accepted := func(context.Context) ([]byte, error) {
		runs.Add(1)
		return nil, idemstore.NotStored(errors.New("status 202 is not stored"))
	}
	for range 2 {
		_, err := te.exec.Execute(t.Context(), request(f), accepted)
		var re *idemstore.RetryableError
		if !errors.As(err, &re) || !re.NotStored || !errors.Is(err, idemstore.ErrRetryable) {
			t.Fatalf("err = %v, want a *RetryableError with NotStored", err)
		}
		if o := idemstore.OutcomeOf(idemstore.Result{}, err); o != onceflow.OutcomeNotStored {
			t.Fatalf("OutcomeOf = %s, want %s", o, onceflow.OutcomeNotStored)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("%d runs, want 2: a response not stored leaves the key to the next request", runs.Load())
	}
	if n := te.counter(t, idemstore.MetricExecutions, outcome(string(onceflow.OutcomeNotStored))); n != 2 {
		t.Errorf("%s not_stored = %d, want 2", idemstore.MetricExecutions, n)
	}
	if n := te.counter(t, idemstore.MetricExecutions, outcome(string(onceflow.OutcomeRetryable))); n != 0 {
		t.Errorf("%s retryable = %d, want 0", idemstore.MetricExecutions, n)
	}
}
