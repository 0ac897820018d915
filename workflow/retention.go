package workflow

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
)

// metricRetentionRefusals counts retries of an unknown effect withheld
// because the downstream's retention of the operation's key had passed
// (onceflow.EffectUnknownDetails.DownstreamRetention), labelled "by":
// "automatic" (an automatic retry not taken: the incident waits for a
// person instead) or "operator" (a Retry decision without
// Resolution.OverrideRetention, refused).
const metricRetentionRefusals = "onceflow_recovery_retention_refusals"

// retentionEnds is when the downstream's retention of d's operation key
// ends: DownstreamRetention after the earliest time an attempt may have
// reached it, the earlier of d.ReachedAt (the record's creation, by
// Redis's clock) and scheduled (when the workflow scheduled the call's
// first attempt, by Temporal's). Zero when the activity declares none.
func retentionEnds(d onceflow.EffectUnknownDetails, scheduled time.Time) time.Time {
	if d.DownstreamRetention <= 0 {
		return time.Time{}
	}
	since := d.ReachedAt
	if since.IsZero() || !scheduled.IsZero() && scheduled.Before(since) {
		since = scheduled
	}
	if since.IsZero() {
		return time.Time{}
	}
	return since.Add(d.DownstreamRetention)
}

// pastRetention says why res, a Retry at now, is refused because the
// downstream's retention has passed, or "".
func (w *waiter) pastRetention(now time.Time, res Resolution) string {
	ends := w.info.RetentionEnds
	if res.Decision != Retry || strings.TrimSpace(res.OverrideRetention) != "" {
		return ""
	}
	if !w.info.RetentionPassed && (ends.IsZero() || !now.After(ends)) {
		return ""
	}
	return fmt.Sprintf("retry past the downstream's retention (it ended %s, %s ago): the downstream may have forgotten the "+
		"operation's key and act again. Check the downstream (by %s), then decide completed or fail; or retry with an "+
		"override reason (OverrideRetention, `worker resolve -override-retention`), which is kept with the decision",
		ends.UTC().Format(time.RFC3339), now.Sub(ends).Round(time.Second), downstreamName(w.info.Details))
}

// downstreamName is what the operator looks the operation up by.
func downstreamName(d onceflow.EffectUnknownDetails) string {
	if d.DownstreamKey != "" {
		return "reference " + d.DownstreamKey
	}
	return "key " + d.RecordKey
}

// noteRetentionRefusal counts and logs res if it is a Retry refused for
// the retention.
func (r *Recovery) noteRetentionRefusal(ctx workflow.Context, res Resolution) {
	w, ok := r.waiting[res.Incident()]
	if !ok {
		return
	}
	if why := w.pastRetention(workflow.Now(ctx), res); why != "" {
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"by": "operator"}).Counter(metricRetentionRefusals).Inc(1)
	}
}

// retryWithinRetention reports whether the automatic retry a may be
// taken: false past the downstream's retention, where the incident waits
// for a person instead (counted, logged).
func (r *Recovery) retryWithinRetention(ctx workflow.Context, c call, d onceflow.EffectUnknownDetails, a automatic) bool {
	ends := retentionEnds(d, c.scheduled)
	now := workflow.Now(ctx)
	if !d.RetentionPassed && (ends.IsZero() || !now.After(ends)) {
		return true
	}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"by": "automatic"}).Counter(metricRetentionRefusals).Inc(1)
	workflow.GetLogger(ctx).Warn("onceflow: no automatic retry past the downstream's retention; waiting for a person",
		"record", d.RecordKey, "basis", a.basis, "retention_ended", ends, "retention", d.DownstreamRetention)
	return false
}
