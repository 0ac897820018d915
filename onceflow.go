package onceflow

import (
	"strconv"
	"time"
)

// Checkpoint is what the wrapper heartbeats, so the next attempt and the
// workflow's history know what the last attempt that reached the action
// confirmed. Temporal keeps the last heartbeat's details across the
// attempts of an activity, so they are evidence that outlives the Redis
// record: an attempt that finds the record gone (or FAILED_RETRYABLE)
// while the checkpoint says PhaseExecuting does not run the action
// blindly (see the activity package's Reconcile option).
type Checkpoint struct {
	Owner   string `json:"owner"`
	Attempt int64  `json:"attempt"` // the record's claim attempt
	Rev     int64  `json:"rev"`
	// Epoch is the record's creation time (Fence.Epoch).
	Epoch int64 `json:"epoch,omitempty"`
	// Phase is PhaseExecuting or PhaseSettled.
	Phase string `json:"phase"`
	// TemporalAttempt is the activity attempt that wrote the checkpoint.
	TemporalAttempt int32 `json:"temporalAttempt"`
}

// Checkpoint phases.
const (
	// PhaseExecuting: the attempt reached the action. The wrapper has the
	// Temporal server confirm this checkpoint before the action starts.
	PhaseExecuting = "executing"
	// PhaseSettled: the attempt that reached the action ended with no
	// effect, recorded as FAILED_RETRYABLE.
	PhaseSettled = "settled"
)

// Fence is the fence the checkpointed attempt held.
func (c Checkpoint) Fence() Fence {
	return Fence{Epoch: c.Epoch, Attempt: c.Attempt, Rev: c.Rev}
}

// EffectUnknownDetails are the details of a onceflow.EffectUnknown error.
type EffectUnknownDetails struct {
	// RecordKey names the record ("<code>:d<version>:<digest>"); the
	// operator command and the resolve signal take it.
	RecordKey     string `json:"recordKey"`
	OperationCode string `json:"operationCode"`
	ScopeDigest   string `json:"scopeDigest"`
	DigestVersion int    `json:"digestVersion"`
	// Operation is the raw operation identity: namespace/workflow ID/run
	// ID/activity ID (Redis holds only a keyed digest of it).
	Operation string `json:"operation"`
	Attempt   int64  `json:"attempt"`
	Rev       int64  `json:"rev"`
	State     string `json:"state"`
	// Recorded is true when the store confirmed the record is ABANDONED.
	Recorded bool   `json:"recorded"`
	Reason   string `json:"reason"`
	// Checkpoint is the last checkpoint a previous attempt heartbeated, if
	// any.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// IdempotentDownstream is the activity's declaration (the activity
	// package's IdempotentDownstream option): running the action again
	// cannot repeat its effect. The workflow package's Execute then
	// retries by itself instead of waiting for a person.
	IdempotentDownstream bool `json:"idempotentDownstream,omitempty"`
	// DownstreamKey is the reference the downstream knows the operation
	// by (the activity package's DownstreamKey option, such as a
	// transfer's reference ID), when the activity declares one: what an
	// operator looks the effect up by.
	DownstreamKey string `json:"downstreamKey,omitempty"`
	// ReachedAt is the earliest time an attempt may have reached the
	// downstream, by the store's clock (the record's creation; see
	// docs/guards.md#the-downstreams-retention). Zero when unknown.
	ReachedAt time.Time `json:"reachedAt,omitzero"`
	// DownstreamRetention is how long the downstream remembers the
	// operation's key (the activity package's DownstreamRetention
	// option); zero when the activity declares none. A retry decision
	// later than ReachedAt plus DownstreamRetention is refused unless
	// overridden with a reason.
	DownstreamRetention time.Duration `json:"downstreamRetention,omitempty"`
	// RetentionPassed: the activity refused to run again because the
	// retention had passed.
	RetentionPassed bool `json:"retentionPassed,omitempty"`
	// ActionFailed: the action returned an error, the failure's cause
	// (the downstream's own words), which a Fail decision delivers to the
	// workflow. False when the effect became unknown otherwise (a dead
	// worker, a lost lease, a completion the store did not record).
	ActionFailed bool `json:"actionFailed,omitempty"`
}

// ReferenceReusedDetails are the details of a onceflow.ReferenceReused error:
// the business reference, which is the activity's own input (it stays in
// Temporal's history, as the input does, never in Redis), and the two
// operation keys it arrived with.
type ReferenceReusedDetails struct {
	OperationCode string `json:"operationCode"`
	// Reference is the activity's DownstreamKey.
	Reference string `json:"reference"`
	// Holder is the operation key that arrived first with it; Key this
	// operation's.
	Holder string `json:"holder"`
	Key    string `json:"key"`
}

// RetentionEnds is when the downstream's retention of the operation's key
// ends (ReachedAt plus DownstreamRetention); zero when either is unknown.
func (d EffectUnknownDetails) RetentionEnds() time.Time {
	if d.DownstreamRetention <= 0 || d.ReachedAt.IsZero() {
		return time.Time{}
	}
	return d.ReachedAt.Add(d.DownstreamRetention)
}

// Fence is a fencing token: (epoch, attempt, rev), ordered
// lexicographically.
//
// Attempt and Rev grow on every takeover and transition while the record
// lives. A store that loses the record (a restart without AOF, FLUSHALL,
// eviction) starts again at attempt 1, so Epoch, the record's creation
// time in the store's clock (milliseconds), comes first: the attempts of a
// record created after the loss carry a greater fence than a zombie of the
// lost one. The store's clock is the one the leases already trust; a
// failover to a server whose clock is behind, or to a replica that had
// not yet seen the record's last transitions, can give equal or inverted
// fences (README, "Fences across a loss of Redis").
type Fence struct {
	// Epoch is the record's creation time (Unix milliseconds, store
	// clock); 0 when unknown, which is older than every known epoch.
	Epoch   int64 `json:"epoch,omitempty"`
	Attempt int64 `json:"attempt"`
	Rev     int64 `json:"rev"`
}

// Less reports whether f is older than g.
func (f Fence) Less(g Fence) bool {
	if f.Epoch != g.Epoch {
		return f.Epoch < g.Epoch
	}
	return f.Attempt < g.Attempt || f.Attempt == g.Attempt && f.Rev < g.Rev
}

// String returns "<attempt>.<rev>", followed by "@<epoch>" when the epoch
// is known.
func (f Fence) String() string {
	s := strconv.FormatInt(f.Attempt, 10) + "." + strconv.FormatInt(f.Rev, 10)
	if f.Epoch != 0 {
		s += "@" + strconv.FormatInt(f.Epoch, 10)
	}
	return s
}
