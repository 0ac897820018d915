package workflow

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/handshake"
)

// Names on the wire. They are stable: operators' tools depend on them.
const (
	// ResolveUpdate is the Update that carries a Resolution: validated
	// before it is accepted, and answered with a DecisionReply, so the
	// operator learns at once whether it was applied.
	ResolveUpdate = "onceflow.decide"
	// ResolveSignal carries a Resolution too, fire and forget: a refused
	// one is logged, counted and listed by RefusalsQuery.
	ResolveSignal = "onceflow.resolve"
	// PendingQuery answers the []PendingRecovery a workflow waits on.
	PendingQuery = "onceflow.pendingRecoveries"
	// RefusalsQuery answers the RefusalsReport: the decisions the
	// workflow refused.
	RefusalsQuery = "onceflow.refusedDecisions"
	// DecisionsQuery answers the []Decided of this run: every decision
	// applied, with its audit (request ID, who, when, why, the evidence
	// shown), oldest first.
	DecisionsQuery = "onceflow.decisions"
	// EvidenceUpdate asks the downstream now about a pending incident (an
	// Incident), through the activity's own Reconcile
	// ("onceflow.Reconcile", on the activity's task queue), and
	// answers the Evidence; PendingQuery then shows it with the incident
	// (PendingRecovery.Evidence). Refused for an incident not pending, or
	// of an activity that declares no Reconcile.
	EvidenceUpdate = "onceflow.askDownstream"
	// TypeRecoveryFailed is the error type Execute returns when the
	// operator decided the operation failed. Non-retryable.
	TypeRecoveryFailed = "onceflow.RecoveryFailed"
	// TypeDecisionRefused is the error type of a refused Update: the
	// decision named no pending incident, one already decided, an unknown
	// decision, a result that does not decode, a request ID already used
	// for another decision, or a decision that contradicts the evidence it
	// carries without being confirmed with a reason.
	TypeDecisionRefused = "onceflow.DecisionRefused"
)

// Decision is what an operator (or a program) decided about an operation
// whose effect was unknown.
type Decision string

// The decisions.
const (
	// Completed: the effect happened; Resolution.Result is its result.
	Completed Decision = "completed"
	// Retry: the effect did not happen; run the activity again.
	Retry Decision = "retry"
	// Fail: give up; Execute returns a TypeRecoveryFailed error, and the
	// record is FAILED, so later attempts with the same scope fail at once
	// (onceflow.OutcomeFailed.TemporalType()) until it is reopened.
	Fail Decision = "fail"
)

// Incident names one unknown effect: the record, and its attempt and
// revision when the effect became unknown. A decision applies to one
// incident only; PendingQuery lists them.
type Incident struct {
	RecordKey string `json:"recordKey"`
	Attempt   int64  `json:"attempt"`
	Rev       int64  `json:"rev"`
}

// String returns "<record key>@<attempt>.<rev>".
func (i Incident) String() string { return fmt.Sprintf("%s@%d.%d", i.RecordKey, i.Attempt, i.Rev) }

// Resolution is a decision about one incident, the payload of
// ResolveUpdate and ResolveSignal.
type Resolution struct {
	// RecordKey, Attempt and Rev name the incident, as PendingQuery lists
	// it (EffectUnknownDetails.RecordKey, .Attempt and .Rev).
	RecordKey string   `json:"recordKey"`
	Attempt   int64    `json:"attempt"`
	Rev       int64    `json:"rev"`
	Decision  Decision `json:"decision"`
	// Result is the activity's result as JSON, for Completed. It must
	// decode into the activity's result type.
	Result json.RawMessage `json:"result,omitempty"`
	// Reason is why the decision was taken; required with Confirmed.
	Reason string `json:"reason,omitempty"`

	// RequestID identifies the request: the same request sent again (a
	// resend, a double click, a delayed delivery) is answered with the
	// decision it made, never applied twice; a decision about an incident
	// already decided under another request ID is refused. Empty (a
	// decision from a tool older than request IDs): the incident is still
	// decided once, but a repeat is refused instead of answered.
	// operator.Resolve fills it in when it is empty.
	RequestID string `json:"requestId,omitempty"`
	// By is who decided: the console's principal, the CLI's user.
	By string `json:"by,omitempty"`
	// RequestedAt is when the request was made, by the requester's clock
	// (the workflow records when it applied it: Decided.AppliedAt).
	RequestedAt time.Time `json:"requestedAt,omitzero"`
	// Evidence is what the operator was shown about the operation when
	// deciding, kept with the decision in the history.
	Evidence *Evidence `json:"evidence,omitempty"`
	// Confirmed: the operator confirmed a decision that contradicts
	// Evidence.Implies. Without it, and without a Reason, such a decision
	// is refused.
	Confirmed bool `json:"confirmed,omitempty"`
	// OverrideRetention is why a Retry is applied although the
	// downstream's retention of the operation's key has passed
	// (PendingRecovery.RetentionEnds): the downstream may have forgotten
	// the first attempt and act again. Without it such a Retry is
	// refused. It stays with the decision (DecisionsQuery), as the audit.
	OverrideRetention string `json:"overrideRetention,omitempty"`
}

// Evidence is what a downstream says about an incident's operation (for a
// charge: the gateway's calls under the operation key, the ledger's
// payment rows), as an operator is shown it beside the decision.
// operator.EvidenceSource is the hook that supplies it.
type Evidence struct {
	// Summary is one or two sentences for the operator.
	Summary string `json:"summary"`
	// Implies is the decision the evidence points to ("" when it points
	// to none): Completed when the effect is there, Retry when it is
	// proven absent.
	Implies Decision `json:"implies,omitempty"`
	// Result is the completed result the evidence implies, as JSON
	// decoding into the activity's result type: the form's pre-filled
	// value for Completed.
	Result json.RawMessage `json:"result,omitempty"`
	// Facts are the downstream's rows, one line each, as shown.
	Facts []string `json:"facts,omitempty"`
}

// Contradicts reports whether the resolution's decision is not the one its
// evidence implies. Such a decision is applied only when Confirmed and
// given a Reason.
func (r Resolution) Contradicts() bool {
	return r.Evidence != nil && r.Evidence.Implies != "" && r.Evidence.Implies != r.Decision
}

// Incident returns the incident the resolution names.
func (r Resolution) Incident() Incident {
	return Incident{RecordKey: r.RecordKey, Attempt: r.Attempt, Rev: r.Rev}
}

// DecisionReply is the answer to an accepted ResolveUpdate.
type DecisionReply struct {
	// Applied is the incident the decision was applied to.
	Applied  Incident `json:"applied"`
	Decision Decision `json:"decision"`
	// RequestID is the request that decided it.
	RequestID string `json:"requestId,omitempty"`
	// Repeated: this request had been applied already (a resend); the
	// answer is the decision it made then, and nothing was applied again.
	Repeated bool `json:"repeated,omitempty"`
}

// Decided is one decision a workflow applied, with its audit: the
// resolution as it came (request ID, who, when, why, the evidence shown),
// how it came, and when the workflow applied it. DecisionsQuery lists
// them.
type Decided struct {
	Incident   Incident   `json:"incident"`
	Resolution Resolution `json:"resolution"`
	// Via is "signal" or "update", or ViaAutomatic for a decision the
	// workflow took by itself (Resolution.By is then Actor).
	Via       string    `json:"via"`
	AppliedAt time.Time `json:"appliedAt"`
	// Basis is why an automatic decision could be taken without a
	// person; empty for a person's.
	Basis Basis `json:"basis,omitempty"`
	// Repeats counts the later deliveries of the same request, answered
	// with this decision and not applied again.
	Repeats int `json:"repeats,omitempty"`
}

// PendingRecovery is one incident a workflow waits on a decision for.
type PendingRecovery struct {
	Incident Incident `json:"incident"`
	// RecordKey is Incident.RecordKey, kept for scripts that read it.
	RecordKey string                        `json:"recordKey"`
	Activity  string                        `json:"activity"`
	Details   onceflow.EffectUnknownDetails `json:"details"`
	Since     time.Time                     `json:"since"`
	// ResultType is the Go type a Completed result must decode into.
	ResultType string `json:"resultType"`
	// RetentionEnds is when the downstream's retention of the operation's
	// key ends (the activity's DownstreamRetention after the first attempt
	// may have reached it); zero when the activity declares none. A Retry
	// after it needs Resolution.OverrideRetention.
	RetentionEnds time.Time `json:"retentionEnds,omitzero"`
	// RetentionPassed: the activity itself refused to run again past the
	// retention.
	RetentionPassed bool `json:"retentionPassed,omitempty"`
	// NoResult: the activity returns only an error, so a Completed
	// decision needs no Result (ResultType is then "").
	NoResult bool `json:"noResult,omitempty"`
	// Reconcile: the activity declares a Reconcile, which EvidenceUpdate
	// asks.
	Reconcile bool `json:"reconcile,omitempty"`
	// Evidence is what the activity's Reconcile said when last asked
	// (EvidenceUpdate), at EvidenceAt; nil until then.
	Evidence   *Evidence `json:"evidence,omitempty"`
	EvidenceAt time.Time `json:"evidenceAt,omitzero"`
	// ActionError is what the action returned when its effect became
	// unknown (the downstream's own words); nil when it returned nothing
	// (its worker died, its lease was lost). A Fail decision delivers it
	// to the workflow (UnknownEffectError).
	ActionError *ActionError `json:"actionError,omitempty"`
}

// Refusal is a decision the workflow refused.
type Refusal struct {
	Resolution Resolution `json:"resolution"`
	Why        string     `json:"why"`
	At         time.Time  `json:"at"`
	// Via is "signal" or "update".
	Via string `json:"via"`
}

// RefusalsReport answers RefusalsQuery.
type RefusalsReport struct {
	// Count is every refusal of this run.
	Count int `json:"count"`
	// Recent are the last refusals, oldest first.
	Recent []Refusal `json:"recent"`
}

// recentRefusals is how many refusals RefusalsQuery keeps.
const recentRefusals = 20

// ReconcileResult is what a reconcile activity returns: whether the effect
// happened, and its result as JSON.
type ReconcileResult struct {
	Found  bool            `json:"found"`
	Result json.RawMessage `json:"result,omitempty"`
	// Facts are what the downstream showed (its rows under the operation
	// key, one line each): the evidence kept with the decision the
	// workflow takes from them.
	Facts []string `json:"facts,omitempty"`
}

// Recovery holds a workflow's pending recoveries, answers PendingQuery and
// RefusalsQuery, and takes decisions by ResolveUpdate and ResolveSignal.
// Create one per workflow run, before the first Execute. Any number of
// Execute calls may wait on it at once (from workflow.Go): each incident
// gets its own decision, in whatever order they arrive.
type Recovery struct {
	waiting  map[Incident]*waiter
	order    []Incident // listing order, deterministic
	refusals RefusalsReport
	// decided are the decisions applied in this run, oldest first;
	// byIncident and byRequest index them. An incident is decided once,
	// a request ID decides one incident.
	decided    []*Decided
	byIncident map[Incident]*Decided
	byRequest  map[string]*Decided
	// upsertPending and pendingVersion: see notePending (pending.go).
	upsertPending  bool
	pendingVersion *workflow.Version
	// automaticVersion: see decidesAutomatically (decide.go).
	automaticVersion *workflow.Version
	// settleVersion: see settles (settle.go).
	settleVersion *workflow.Version
}

type waiter struct {
	info     PendingRecovery
	waiters  int
	decision *Resolution
	decodes  func(json.RawMessage) error
	// ask asks the activity's Reconcile about the incident; nil when it
	// declares none.
	ask func(ctx workflow.Context) (Evidence, error)
}

// NewRecovery registers PendingQuery, RefusalsQuery and ResolveUpdate, and
// starts listening on ResolveSignal. Under the Interceptor, which made the
// workflow's Recovery at its start, it returns that one.
func NewRecovery(ctx workflow.Context) (*Recovery, error) {
	if r, ok := ctx.Value(recoveryKey{}).(*Recovery); ok && r != nil {
		return r, nil
	}
	r := &Recovery{waiting: map[Incident]*waiter{}, byIncident: map[Incident]*Decided{}, byRequest: map[string]*Decided{}}
	if err := workflow.SetQueryHandler(ctx, PendingQuery, func() ([]PendingRecovery, error) {
		out := make([]PendingRecovery, 0, len(r.order))
		for _, inc := range r.order {
			out = append(out, r.waiting[inc].info)
		}
		return out, nil
	}); err != nil {
		return nil, fmt.Errorf("onceflow: register the %s query: %w", PendingQuery, err)
	}
	if err := workflow.SetQueryHandler(ctx, RefusalsQuery, func() (RefusalsReport, error) {
		return r.refusals, nil
	}); err != nil {
		return nil, fmt.Errorf("onceflow: register the %s query: %w", RefusalsQuery, err)
	}
	if err := workflow.SetQueryHandler(ctx, DecisionsQuery, func() ([]Decided, error) {
		out := make([]Decided, len(r.decided))
		for i, d := range r.decided {
			out[i] = *d
		}
		return out, nil
	}); err != nil {
		return nil, fmt.Errorf("onceflow: register the %s query: %w", DecisionsQuery, err)
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, ResolveUpdate,
		func(ctx workflow.Context, res Resolution) (DecisionReply, error) {
			d, repeated, err := r.apply(ctx, res, "update")
			if err != nil {
				// Accepted by the validator but overtaken since.
				r.refuse(ctx, res, "update", err)
				return DecisionReply{}, err
			}
			return DecisionReply{Applied: d.Incident, Decision: d.Resolution.Decision, RequestID: d.Resolution.RequestID, Repeated: repeated}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, res Resolution) error {
			if _, err := r.check(workflow.Now(ctx), res); err != nil {
				r.noteRetentionRefusal(ctx, res)
				workflow.GetLogger(ctx).Warn("onceflow: decision refused", "incident", res.Incident().String(), "decision", res.Decision, "why", err.Error())
				return err
			}
			return nil
		}})
	if err != nil {
		return nil, fmt.Errorf("onceflow: register the %s update: %w", ResolveUpdate, err)
	}
	err = workflow.SetUpdateHandlerWithOptions(ctx, EvidenceUpdate,
		func(ctx workflow.Context, inc Incident) (Evidence, error) {
			w, ok := r.waiting[inc]
			if !ok || w.ask == nil {
				return Evidence{}, refused("incident %s is no longer pending", inc)
			}
			ev, err := w.ask(ctx)
			if err != nil {
				return Evidence{}, err
			}
			w.info.Evidence, w.info.EvidenceAt = &ev, workflow.Now(ctx)
			return ev, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, inc Incident) error {
			switch w, ok := r.waiting[inc]; {
			case !ok:
				return refused("no such pending incident %s", inc)
			case w.ask == nil:
				return refused("activity %s declares no Reconcile: nothing can ask its downstream, and the decision is yours alone", w.info.Activity)
			}
			return nil
		}})
	if err != nil {
		return nil, fmt.Errorf("onceflow: register the %s update: %w", EvidenceUpdate, err)
	}
	signals := workflow.GetSignalChannel(ctx, ResolveSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var res Resolution
			if !signals.Receive(ctx, &res) {
				return
			}
			if _, _, err := r.apply(ctx, res, "signal"); err != nil {
				r.refuse(ctx, res, "signal", err)
			}
		}
	})
	return r, nil
}

// refused builds the error a refused decision is answered with.
func refused(format string, args ...any) error {
	return temporal.NewApplicationError("refused: "+fmt.Sprintf(format, args...), TypeDecisionRefused)
}

// check says why res cannot be applied, or nil. It changes nothing. A
// repeat of a request already applied (the same request ID, incident and
// decision) is no error: check returns the decision it made.
func (r *Recovery) check(now time.Time, res Resolution) (repeat *Decided, err error) {
	switch res.Decision {
	case Completed, Retry, Fail:
	default:
		return nil, refused("unknown decision %q: want completed, retry or fail", res.Decision)
	}
	inc := res.Incident()
	if res.RequestID != "" {
		if d, ok := r.byRequest[res.RequestID]; ok {
			if d.Incident == inc && d.Resolution.Decision == res.Decision {
				return d, nil
			}
			return nil, refused("request %s already decided %s for %s; a new decision needs a new request ID", res.RequestID, d.Resolution.Decision, d.Incident)
		}
	}
	if d, ok := r.byIncident[inc]; ok {
		return nil, refused("incident %s is already decided (%s%s); a repeated or delayed request never changes a decision",
			inc, d.Resolution.Decision, describe(d.Resolution))
	}
	w, ok := r.waiting[inc]
	if !ok {
		pending := make([]string, len(r.order))
		for i, p := range r.order {
			pending[i] = p.String()
		}
		return nil, refused("no such pending incident %s; pending: [%s] (name the record key, attempt and rev the pending list shows)",
			inc, strings.Join(pending, " "))
	}
	if res.Decision == Completed && !w.info.NoResult {
		if len(res.Result) == 0 {
			return nil, refused("completed needs the activity's result, as JSON decoding into %s", w.info.ResultType)
		}
		if err := w.decodes(res.Result); err != nil {
			return nil, refused("result does not decode into %s: %v", w.info.ResultType, err)
		}
	}
	if why := w.pastRetention(now, res); why != "" {
		return nil, refused("%s", why)
	}
	if res.Contradicts() && (!res.Confirmed || strings.TrimSpace(res.Reason) == "") {
		return nil, refused("%s contradicts the evidence, which implies %s (%s): confirm it, with a reason, to apply it anyway",
			res.Decision, res.Evidence.Implies, res.Evidence.Summary)
	}
	return nil, nil
}

// describe says who decided, by which request, and why, for a refusal.
func describe(res Resolution) string {
	var b strings.Builder
	if res.RequestID != "" {
		b.WriteString(" by request " + res.RequestID)
	}
	if res.By != "" {
		b.WriteString(" from " + res.By)
	}
	if res.Reason != "" {
		b.WriteString(": " + res.Reason)
	}
	return b.String()
}

// apply records res for its incident, unless check refuses it. A repeat
// of a request already applied changes no decision: apply returns the
// decision it made, and repeated true.
func (r *Recovery) apply(ctx workflow.Context, res Resolution, via string) (d *Decided, repeated bool, err error) {
	repeat, err := r.check(workflow.Now(ctx), res)
	switch {
	case err != nil:
		return nil, false, err
	case repeat != nil:
		repeat.Repeats++
		workflow.GetLogger(ctx).Info("onceflow: decision repeated; answered, not applied again", "incident", repeat.Incident.String(),
			"decision", repeat.Resolution.Decision, "request", res.RequestID, "via", via)
		return repeat, true, nil
	}
	inc := res.Incident()
	r.waiting[inc].decision = &res
	d = &Decided{Incident: inc, Resolution: res, Via: via, AppliedAt: workflow.Now(ctx)}
	r.decided = append(r.decided, d)
	r.byIncident[inc] = d
	if res.RequestID != "" {
		r.byRequest[res.RequestID] = d
	}
	workflow.GetLogger(ctx).Info("onceflow: decision applied", "incident", inc.String(), "decision", res.Decision, "reason", res.Reason,
		"request", res.RequestID, "by", res.By, "via", via)
	if ends := r.waiting[inc].info.RetentionEnds; res.Decision == Retry && res.OverrideRetention != "" && !ends.IsZero() && ends.Before(d.AppliedAt) {
		workflow.GetLogger(ctx).Warn("onceflow: retry past the downstream's retention, overridden", "incident", inc.String(),
			"retention_ended", ends, "override", res.OverrideRetention, "by", res.By)
	}
	return d, false, nil
}

// Metrics the workflows emit through the Temporal SDK's metrics handler
// (worker.Config.MeterProvider exports them); docs/operations.md lists
// them with their labels.
const (
	// metricRecoveriesOpened counts incidents that began waiting for a
	// decision, as they happen (the SDK emits no metric while it replays a
	// history, so opened minus closed is not the pending figure after a
	// restart: PendingSearchAttribute is).
	metricRecoveriesOpened = "onceflow_recoveries_opened"
	// metricRecoveriesClosed counts incidents that stopped waiting: a
	// decision applied, or the workflow's context done.
	metricRecoveriesClosed = "onceflow_recoveries_closed"
	// metricDecisionsRefused counts decisions refused (stale, duplicate,
	// unknown incident, a result that does not decode).
	metricDecisionsRefused = "onceflow_recovery_decisions_refused"
)

// refuse makes a refusal visible: logged, counted, listed.
func (r *Recovery) refuse(ctx workflow.Context, res Resolution, via string, err error) {
	r.noteRetentionRefusal(ctx, res)
	workflow.GetLogger(ctx).Warn("onceflow: decision refused", "incident", res.Incident().String(), "decision", res.Decision, "via", via, "why", err.Error())
	workflow.GetMetricsHandler(ctx).Counter(metricDecisionsRefused).Inc(1)
	r.refusals.Count++
	r.refusals.Recent = append(r.refusals.Recent, Refusal{Resolution: res, Why: err.Error(), At: workflow.Now(ctx), Via: via})
	if n := len(r.refusals.Recent); n > recentRefusals {
		r.refusals.Recent = slices.Clone(r.refusals.Recent[n-recentRefusals:])
	}
}

// Options configure Execute.
type Options struct {
	// Activity are the options of the idempotent activity (it needs a
	// HeartbeatTimeout) and of the reconcile and resolve activities.
	Activity workflow.ActivityOptions
	// Reconcile optionally names an activity that takes the same arguments
	// and returns a ReconcileResult. It is asked before waiting for a
	// decision: an effect it finds completes the operation by itself.
	Reconcile string
	// Settle declares Reconcile's lookup authoritative once this long has
	// passed since the attempt (the downstream's own request timeout: a
	// request sent by then has landed or never will). Execute then asks
	// Reconcile again after the settle time, and "nothing there" proves
	// no effect: it retries by itself. Zero (the default): "nothing
	// there" proves nothing, and the incident waits for a person. The
	// time is measured from when the workflow learned that the effect was
	// unknown, which is after the attempt's last request was sent.
	Settle time.Duration
}

// Execute runs an idempotent activity and, when it fails with
// onceflow.EffectUnknown, recovers from the workflow's own history. Where the
// answer is known it decides by itself, like a person would and recorded
// like a person's decision (DecisionsQuery, Via ViaAutomatic, By Actor):
// completed with the result opts.Reconcile finds; retry when the activity
// declared its downstream idempotent, or when opts.Reconcile finds nothing
// after opts.Settle. Otherwise it lists the incident in PendingQuery and
// waits for a decision about exactly that incident (ResolveUpdate or
// ResolveSignal). Completed returns the given result (and records it in
// Redis, so later replays get it); Retry makes the record FAILED_RETRYABLE
// and runs the activity again; Fail records the failure (the record becomes
// FAILED, so later attempts fail at once) and returns a TypeRecoveryFailed
// error. Every decision is a history event, so once taken it survives the
// loss of the Redis record. A decision that names another incident, one
// already decided, or a result that does not decode into T is refused, and
// the incident stays pending.
//
// Results travel as JSON; the resolve activity stores a completed one with
// the codec of the activity (the activity package's WithCodec), so it replays.
func Execute[T any](ctx workflow.Context, r *Recovery, opts Options, activity string, args ...any) (T, error) {
	var zero T
	ctx = workflow.WithActivityOptions(ctx, opts.Activity)
	// Execute recovers by itself: the Interceptor, if any, lets its calls
	// through.
	ctx = workflow.WithValue(ctx, ownRecoveryKey{}, true)
	c := call{
		opts: opts, activity: activity, args: args, exec: executeActivity, scheduled: workflow.Now(ctx),
		decodes: decodes[T], resultType: typeName[T](), settles: true,
	}
	done, decided, err := r.execute(ctx, c, nil)
	if err != nil {
		return zero, err
	}
	if done != nil {
		var out T
		err := done.Get(ctx, &out)
		return out, err
	}
	return decode[T](decided) // checked when the decision was taken
}

// ownRecoveryKey marks the context of Execute's calls, which the
// Interceptor lets through.
type ownRecoveryKey struct{}

// executeActivity is workflow.ExecuteActivity by name.
func executeActivity(ctx workflow.Context, activity string, args ...any) workflow.Future {
	return workflow.ExecuteActivity(ctx, activity, args...)
}

// call is one activity call that execute sees to its end.
type call struct {
	opts     Options
	activity string
	args     []any
	// exec schedules the activity (workflow.ExecuteActivity, or the next
	// outbound interceptor's).
	exec func(ctx workflow.Context, activity string, args ...any) workflow.Future
	// decodes checks that a result decodes into the activity's result
	// type, named resultType.
	decodes    func(json.RawMessage) error
	resultType string
	// scheduled is when the call's first attempt was scheduled: no
	// attempt reached the downstream before it (see retentionEnds).
	scheduled time.Time
	// settles: the activity is one Register registered (it has
	// "onceflow.Settle" beside it), so a failure its retry policy
	// gave up on is settled before the call returns it.
	settles bool
	// noResult: the activity returns only an error.
	noResult bool
	// reconciles: the activity declares a Reconcile, for EvidenceUpdate.
	reconciles bool
}

// execute runs the activity (or, when first is not nil, waits on that
// attempt of it) and recovers from an unknown effect: it returns the
// future of the attempt that succeeded or failed otherwise (done), or the
// result a decision completed it with (decided), or the error that ends
// the call (a Fail decision, a cancelled wait).
func (r *Recovery) execute(ctx workflow.Context, c call, first workflow.Future) (done workflow.Future, decided json.RawMessage, err error) {
	reconciled := false
	retried := 0 // automatic retries of this call
	// unsettled says why an earlier attempt's effect is still unknown: it
	// was retried only because its downstream is idempotent, which proves
	// nothing happened no more than a later failure does.
	unsettled := ""
	for {
		f := first
		if f == nil {
			f = c.exec(ctx, c.activity, c.args...)
		}
		first = nil
		failure := f.Get(ctx, nil)
		if failure == nil {
			return f, nil, nil
		}
		d, ok := rawEffectUnknown(failure)
		if !ok {
			e, ended := retriesEnded(failure, workflow.GetActivityOptions(ctx).RetryPolicy)
			if !ended || !c.settles || !r.settles(ctx) {
				return f, nil, nil
			}
			result, unknown, serr := settle(ctx, c, e, unsettled)
			switch {
			case serr != nil && ctx.Err() != nil:
				return f, nil, nil
			case serr != nil:
				// Nothing says whether an attempt acted: a person decides.
				workflow.GetLogger(ctx).Error("onceflow: could not settle the call whose retries ended", "activity", c.activity, "error", serr)
				unknown = &onceflow.EffectUnknownDetails{RecordKey: "unsettled/" + e.activityID, Reason: fmt.Sprintf(
					"the call's retries ended with %q, and %s could not settle its record: %v", failure.Error(), handshake.SettleActivity, serr)}
			case result != nil:
				return nil, result, nil
			case unknown == nil:
				return f, nil, nil // nothing may have happened: the call's failure stands
			}
			d = *unknown
		}
		var (
			res     Resolution
			decided bool
			basis   Basis
		)
		if r.decidesAutomatically(ctx) {
			if retried < MaxAutomaticRetries {
				a, ok, err := decide(ctx, c, d, workflow.Now(ctx))
				if err != nil {
					return nil, nil, err
				}
				if ok && a.res.Decision == Retry {
					ok = r.retryWithinRetention(ctx, c, d, a)
				}
				if ok {
					res, decided, basis = r.record(ctx, a), true, a.basis
					if res.Decision == Retry {
						retried++
					}
				}
			} else {
				workflow.GetLogger(ctx).Warn("onceflow: retried automatically too often; waiting for a person", "record", d.RecordKey, "retries", retried)
			}
		} else if c.opts.Reconcile != "" && !reconciled {
			// Histories from before automaticChange: reconcile once,
			// then wait for a person.
			reconciled = true
			var rr ReconcileResult
			logger := workflow.GetLogger(ctx)
			if rerr := c.exec(ctx, c.opts.Reconcile, c.args...).Get(ctx, &rr); rerr != nil {
				logger.Warn("onceflow: reconcile activity failed; waiting for a decision", "record", d.RecordKey, "error", rerr)
			} else if rr.Found {
				if derr := c.decodes(rr.Result); derr == nil {
					return complete(ctx, d, rr.Result, "reconciled by "+c.opts.Reconcile)
				} else {
					logger.Warn("onceflow: the reconciled result does not decode; waiting for a decision", "record", d.RecordKey, "error", derr)
				}
			}
		}
		if !decided {
			var err error
			if res, err = r.wait(ctx, d, c, failure); err != nil {
				return nil, nil, err
			}
		}
		switch res.Decision {
		case Completed:
			if err := c.decodes(res.Result); err != nil { // checked when the decision was taken
				return nil, nil, err
			}
			return complete(ctx, d, res.Result, res.Reason)
		case Retry:
			if err := resolveRecord(ctx, d, handshake.ResolveRecordInput{Details: d, Target: "FAILED_RETRYABLE", Reason: res.Reason}); err != nil {
				return nil, nil, err
			}
			unsettled = ""
			if basis == BasisIdempotentDownstream {
				unsettled = fmt.Sprintf("incident %s (activity %s) may have had its effect: it was retried because its downstream is idempotent",
					res.Incident(), c.activity)
			}
			continue
		default:
			reason := "failed by decision"
			if res.Reason != "" {
				reason += ": " + res.Reason
			}
			if rerr := resolveRecord(ctx, d, handshake.ResolveRecordInput{Details: d, Target: "FAILED", Reason: reason}); rerr != nil {
				workflow.GetLogger(ctx).Warn("onceflow: could not record the failure in Redis; later attempts will find the record ABANDONED", "record", d.RecordKey, "error", rerr)
			}
			return nil, nil, failedByDecision(failure, d, res)
		}
	}
}

func decode[T any](raw json.RawMessage) (T, error) {
	var out T
	err := json.Unmarshal(raw, &out)
	return out, err
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// complete records a completed decision in the store and returns its
// result.
func complete(ctx workflow.Context, d onceflow.EffectUnknownDetails, result json.RawMessage, reason string) (workflow.Future, json.RawMessage, error) {
	if len(result) == 0 {
		result = json.RawMessage("null") // an activity that returns only an error
	}
	in := handshake.ResolveRecordInput{Details: d, Target: "COMPLETED", Response: result, Reason: reason}
	if err := resolveRecord(ctx, d, in); err != nil {
		return nil, nil, err
	}
	return nil, result, nil
}

// resolveRecord settles the Redis record. When the store could not confirm
// the abandonment (Details.Recorded false) there is nothing safe to CAS
// against; the decision still stands in history.
func resolveRecord(ctx workflow.Context, d onceflow.EffectUnknownDetails, in handshake.ResolveRecordInput) error {
	if !d.Recorded {
		workflow.GetLogger(ctx).Warn("onceflow: the record was never confirmed ABANDONED; leaving Redis as it is", "record", d.RecordKey)
		return nil
	}
	return workflow.ExecuteActivity(ctx, handshake.ResolveRecordActivity, in).Get(ctx, nil)
}

// wait lists the incident as pending and blocks until a decision for it is
// applied, or ctx is done.
func (r *Recovery) wait(ctx workflow.Context, d onceflow.EffectUnknownDetails, c call, cause error) (Resolution, error) {
	activity, decodes, resultType := c.activity, c.decodes, c.resultType
	inc := Incident{RecordKey: d.RecordKey, Attempt: d.Attempt, Rev: d.Rev}
	w, ok := r.waiting[inc]
	if !ok {
		w = &waiter{decodes: decodes, info: PendingRecovery{
			Incident: inc, RecordKey: d.RecordKey, Activity: activity, Details: d, Since: workflow.Now(ctx), ResultType: resultType,
			RetentionEnds: retentionEnds(d, c.scheduled), RetentionPassed: d.RetentionPassed,
			NoResult: c.noResult, ActionError: actionErrorOf(cause, d), Reconcile: c.reconciles,
		}}
		if c.reconciles {
			w.ask = asker(ctx, c, d)
		}
		r.waiting[inc] = w
		r.order = append(r.order, inc)
		workflow.GetMetricsHandler(ctx).Counter(metricRecoveriesOpened).Inc(1)
		r.notePending(ctx)
	}
	w.waiters++
	defer func() {
		if w.waiters--; w.waiters == 0 {
			delete(r.waiting, inc)
			r.order = slices.DeleteFunc(r.order, func(i Incident) bool { return i == inc })
			workflow.GetMetricsHandler(ctx).Counter(metricRecoveriesClosed).Inc(1)
			r.notePending(ctx)
		}
	}()
	workflow.GetLogger(ctx).Warn("onceflow: effect unknown; waiting for a decision ("+ResolveUpdate+" or "+ResolveSignal+")",
		"incident", inc.String(), "activity", activity)
	if err := workflow.Await(ctx, func() bool { return w.decision != nil }); err != nil {
		return Resolution{}, err
	}
	return *w.decision, nil
}
