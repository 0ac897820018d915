package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
)

// automaticChange is the workflow.GetVersion change ID of automatic
// decisions: a history recorded before them replays as it ran (reconcile
// once, then wait for a person), and a run recorded since decides by
// itself where the answer is known.
const automaticChange = "onceflow.automatic-decisions"

// Actor is Resolution.By of a decision the workflow took by itself.
const Actor = "onceflow"

// ViaAutomatic is Decided.Via of a decision the workflow took by itself
// (a person's comes "signal" or "update").
const ViaAutomatic = "automatic"

// MaxAutomaticRetries bounds the automatic retries of one Execute call: an
// idempotent step whose every attempt ends with its effect unknown (a
// Redis that keeps failing the completion write) waits for a person after
// that many, instead of looping.
const MaxAutomaticRetries = 5

// Basis is why the workflow could decide an incident without a person.
type Basis string

// The bases of automatic decisions.
const (
	// BasisIdempotentDownstream: the activity declared its downstream
	// idempotent (EffectUnknownDetails.IdempotentDownstream), so running
	// it again cannot repeat the effect: retry.
	BasisIdempotentDownstream Basis = "idempotent_downstream"
	// BasisReconciled: Options.Reconcile found the effect: completed,
	// with its result.
	BasisReconciled Basis = "reconciled"
	// BasisSettledLookup: Options.Reconcile found no effect after
	// Options.Settle had passed, when its lookup is authoritative: retry.
	BasisSettledLookup Basis = "settled_lookup"
)

// metricDecidedAutomatically counts the incidents a workflow decided by
// itself, labelled "decision" (completed, retry) and "basis" (a Basis).
// They open no incident: metricRecoveriesOpened and PendingSearchAttribute
// count only those that wait for a person.
const metricDecidedAutomatically = "onceflow_recoveries_decided_automatically"

// automatic is an automatic decision about one incident, before it is
// recorded.
type automatic struct {
	res   Resolution
	basis Basis
}

// decidesAutomatically reports whether this run takes automatic decisions
// (every run whose history reaches an unknown effect since
// automaticChange).
func (r *Recovery) decidesAutomatically(ctx workflow.Context) bool {
	if r.automaticVersion == nil {
		v := workflow.GetVersion(ctx, automaticChange, workflow.DefaultVersion, 1)
		r.automaticVersion = &v
	}
	return *r.automaticVersion >= 1
}

// decide looks for a decision the workflow can take by itself about the
// unknown effect d, observed at observed: the reconcile activity's proof
// (the effect found; or, with Options.Settle, no effect found once the
// settle time has passed), or the activity's IdempotentDownstream. ok
// false: nothing proves the outcome, and a person must decide.
func decide(ctx workflow.Context, c call, d onceflow.EffectUnknownDetails, observed time.Time) (a automatic, ok bool, err error) {
	opts := c.opts
	base := Resolution{RecordKey: d.RecordKey, Attempt: d.Attempt, Rev: d.Rev, By: Actor}
	if opts.Reconcile != "" {
		rr, answered := reconcile(ctx, c, d)
		if answered && !rr.Found && opts.Settle > 0 && !d.IdempotentDownstream {
			// "Nothing there" proves nothing until the downstream's own
			// request timeout has passed: ask again then.
			if wait := observed.Add(opts.Settle).Sub(workflow.Now(ctx)); wait > 0 {
				if err := workflow.Sleep(ctx, wait); err != nil {
					return automatic{}, false, err
				}
			}
			rr, answered = reconcile(ctx, c, d)
			if answered && !rr.Found {
				res := base
				res.Decision = Retry
				res.Reason = fmt.Sprintf("%s found no effect %s or more after the attempt, past the downstream's settle time: nothing ran",
					opts.Reconcile, opts.Settle)
				res.Evidence = &Evidence{Summary: opts.Reconcile + " found no effect after the settle time (" + opts.Settle.String() + ")",
					Implies: Retry, Facts: rr.Facts}
				return automatic{res: res, basis: BasisSettledLookup}, true, nil
			}
		}
		if answered && rr.Found {
			res := base
			res.Decision, res.Result = Completed, rr.Result
			res.Reason = opts.Reconcile + " found the effect"
			res.Evidence = &Evidence{Summary: opts.Reconcile + " found the effect", Implies: Completed, Result: rr.Result, Facts: rr.Facts}
			return automatic{res: res, basis: BasisReconciled}, true, nil
		}
	}
	if d.IdempotentDownstream {
		res := base
		res.Decision = Retry
		res.Reason = "the activity declared its downstream idempotent: running it again cannot repeat the effect"
		res.Evidence = &Evidence{Summary: "IdempotentDownstream: the downstream deduplicates by the operation key", Implies: Retry,
			Facts: []string{"unknown because: " + d.Reason}}
		return automatic{res: res, basis: BasisIdempotentDownstream}, true, nil
	}
	return automatic{}, false, nil
}

// reconcile asks the reconcile activity. answered false: it failed, or the
// effect it found does not decode into the result type; neither proves
// anything.
func reconcile(ctx workflow.Context, c call, d onceflow.EffectUnknownDetails) (rr ReconcileResult, answered bool) {
	logger := workflow.GetLogger(ctx)
	if err := c.exec(ctx, c.opts.Reconcile, c.args...).Get(ctx, &rr); err != nil {
		logger.Warn("onceflow: reconcile activity failed; it proves nothing", "record", d.RecordKey, "error", err)
		return ReconcileResult{}, false
	}
	if rr.Found {
		if err := c.decodes(rr.Result); err != nil {
			logger.Warn("onceflow: the reconciled result does not decode; it proves nothing", "record", d.RecordKey, "error", err)
			return ReconcileResult{}, false
		}
	}
	return rr, true
}

// record records an automatic decision like a person's: a marker in the
// history (a side effect whose value is the decision, so `temporal
// workflow show` has it), a row of DecisionsQuery with actor Actor, the
// reason and the evidence, a log line and metricDecidedAutomatically. It
// opens no incident: nothing is listed in PendingQuery, nothing upserted.
func (r *Recovery) record(ctx workflow.Context, a automatic) Resolution {
	a.res.RequestedAt = workflow.Now(ctx)
	d := &Decided{Incident: a.res.Incident(), Resolution: a.res, Via: ViaAutomatic, AppliedAt: a.res.RequestedAt, Basis: a.basis}
	var recorded Decided
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return *d }).Get(&recorded); err == nil {
		d = &recorded
	}
	r.decided = append(r.decided, d)
	if _, ok := r.byIncident[d.Incident]; !ok {
		r.byIncident[d.Incident] = d
	}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"decision": string(d.Resolution.Decision), "basis": string(d.Basis)}).
		Counter(metricDecidedAutomatically).Inc(1)
	workflow.GetLogger(ctx).Info("onceflow: decided automatically", "incident", d.Incident.String(), "decision", d.Resolution.Decision,
		"basis", d.Basis, "reason", d.Resolution.Reason, "by", Actor)
	return d.Resolution
}

// decodes reports whether raw decodes into T.
func decodes[T any](raw json.RawMessage) error { _, err := decode[T](raw); return err }
