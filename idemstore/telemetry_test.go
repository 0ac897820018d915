package idemstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/doclink"
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

func outcome(o string) attribute.KeyValue { return attribute.String("outcome", o) }

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
	if _, err := te.exec.Execute(t.Context(), other, slow); !errors.Is(err, onceflow.OutcomeFingerprintMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	te.tree(t)

	g := storetest.NewFixture()
	te.expiredExecuting(t, g)
	req := request(g)
	req.Reconcile = func(context.Context, onceflow.Record) ([]byte, bool, error) { return []byte("ch_found"), true, nil }
	if res, err := te.exec.Execute(t.Context(), req, slow); err != nil || res.Outcome != onceflow.OutcomeReconciled {
		t.Fatalf("takeover: %+v, %v", res, err)
	}
	check([]string{"onceflow.execute>onceflow.claim", "onceflow.execute>onceflow.reconcile", "onceflow.execute>onceflow.complete"})

	h := storetest.NewFixture()
	te.expiredExecuting(t, h)
	if _, err := te.exec.Execute(t.Context(), request(h), slow); !errors.Is(err, onceflow.OutcomeEffectUnknown) {
		t.Fatalf("abandon: %v", err)
	}
	check([]string{"onceflow.execute>onceflow.fail"})

	if _, err := te.exec.Execute(t.Context(), request(h), slow); !errors.Is(err, onceflow.OutcomeAwaitingDecision) {
		t.Fatalf("after the abandonment: %v", err)
	}
	busy := storetest.NewFixture()
	if _, err := te.store.ClaimStart(t.Context(), busy.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())); err != nil {
		t.Fatal(err)
	}
	var ip *onceflow.Error
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
		if n := te.counter(t, "onceflow.executions", outcome(string(c.outcome))); n != c.want {
			t.Errorf("onceflow.executions %s = %d, want %d", c.outcome, n, c.want)
		}
	}
	if n := te.counter(t, "onceflow.takeovers", attribute.String("takeover_from", "EXECUTING")); n != 2 {
		t.Errorf("takeovers from EXECUTING = %d, want 2", n)
	}
	if n := te.counter(t, "onceflow.renewals", attribute.String("result", "renewed")); n < 1 {
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
	te.checkDocumented(t, all)
}

// checkDocumented checks what the executor emitted so far against
// docs/operations.md's tables, the one list of the names (the package
// exports none): every metric is a row from idemstore with the kind, unit
// and labels it was emitted with, every span attribute a row of the
// attribute table.
func (te telemetryEnv) checkDocumented(t *testing.T, spanAttrs []attribute.KeyValue) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ kind, unit, from, labels string }
	metrics, attrs := map[string]row{}, map[string]bool{}
	for _, tb := range doclink.Tables(string(doc)) {
		switch {
		case tb.Column("metric") == 0 && tb.Column("Prometheus") >= 0:
			k, u, f, l := tb.Column("kind"), tb.Column("unit"), tb.Column("from"), tb.Column("labels")
			for _, r := range tb.Rows {
				if len(r) != len(tb.Header) {
					t.Fatalf("docs/operations.md:%d: a row of %d cells: %q", tb.Line, len(r), r)
				}
				metrics[strings.Trim(r[0], "`")] = row{kind: r[k], unit: strings.Trim(strings.TrimPrefix(r[u], "—"), "`"),
					from: strings.Trim(r[f], "`"), labels: strings.ReplaceAll(strings.TrimPrefix(r[l], "—"), "`", "")}
			}
		case tb.Column("attribute") == 0:
			for _, r := range tb.Rows {
				attrs[strings.Trim(r[0], "`")] = true
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := te.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen++
			want, ok := metrics[m.Name]
			if !ok || want.from != "idemstore" {
				t.Errorf("%s is not in docs/operations.md's metrics table as idemstore's", m.Name)
				continue
			}
			var kind string
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				kind = "counter"
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				kind = "histogram"
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			default:
				kind = fmt.Sprintf("%T", m.Data)
			}
			if kind != want.kind || m.Unit != want.unit {
				t.Errorf("%s is a %s in %q; docs/operations.md says a %s in %q", m.Name, kind, m.Unit, want.kind, want.unit)
			}
			for _, set := range sets {
				var keys []string
				for _, kv := range set.ToSlice() {
					keys = append(keys, string(kv.Key))
				}
				documented := strings.Split(want.labels, ", ")
				slices.Sort(documented) // as an attribute.Set is
				if got := strings.Join(keys, ", "); got != strings.Join(documented, ", ") {
					t.Errorf("%s is labelled %q; docs/operations.md says %q", m.Name, got, want.labels)
				}
			}
		}
	}
	if seen < 4 {
		t.Errorf("only %d metrics emitted", seen)
	}
	for _, kv := range spanAttrs {
		if !attrs[string(kv.Key)] {
			t.Errorf("span attribute %s is not in docs/operations.md's attribute table", kv.Key)
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
	if n := te.counter(t, "onceflow.lost_leases", attribute.String("cause", "lost")); n != 1 {
		t.Fatalf("lost leases = %d, want 1", n)
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
		var re *onceflow.Error
		if !errors.As(err, &re) || re.Outcome != onceflow.OutcomeNotStored || !errors.Is(err, onceflow.OutcomeRetryable) {
			t.Fatalf("err = %v, want a *onceflow.Error of OutcomeNotStored, matching OutcomeRetryable", err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("%d runs, want 2: a response not stored leaves the key to the next request", runs.Load())
	}
	if n := te.counter(t, "onceflow.executions", outcome(string(onceflow.OutcomeNotStored))); n != 2 {
		t.Errorf("onceflow.executions not_stored = %d, want 2", n)
	}
	if n := te.counter(t, "onceflow.executions", outcome(string(onceflow.OutcomeRetryable))); n != 0 {
		t.Errorf("onceflow.executions retryable = %d, want 0", n)
	}
}
