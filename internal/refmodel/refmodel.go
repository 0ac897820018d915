// Package refmodel is a small pure-Go reference model of the idempotency
// state machine of docs/state-machine.md. Tests run random operation
// sequences against a real store and against this model and require the
// same outcomes. The model takes the store's clock as an argument, so a
// test can feed it the server time each reply reports.
package refmodel

import (
	"strings"
	"time"

	"github.com/onceflow/onceflow/idemstore"
)

type rec struct {
	state                idemstore.State
	owner                idemstore.Owner
	attempt, rev         int64
	op                   idemstore.OperationID
	fp                   idemstore.Fingerprint
	codec                string
	policy               int
	leaseUntil           int64
	hasLease             bool // terminal states drop leaseUntil
	nonce                idemstore.Nonce
	reason               string
	uncertain            bool
	createdAt, updatedAt int64
	resp                 []byte
	hasResp              bool
}

// Model is the reference state machine. Keys never expire in it: use TTLs
// longer than the test.
type Model struct {
	recs map[idemstore.Ref]*rec
}

// New returns an empty model.
func New() *Model { return &Model{recs: map[idemstore.Ref]*rec{}} }

func (r *rec) snapshot(now time.Time, withResp bool) idemstore.Record {
	out := idemstore.Record{
		State: r.state, Owner: r.owner, Attempt: r.attempt, Rev: r.rev, Operation: r.op,
		Fingerprint: r.fp, Codec: r.codec, Policy: r.policy,
		Nonce: r.nonce, Reason: r.reason, Uncertain: r.uncertain,
		CreatedAt: time.UnixMilli(r.createdAt), UpdatedAt: time.UnixMilli(r.updatedAt), ServerTime: now,
	}
	if r.hasLease {
		out.LeaseUntil = time.UnixMilli(r.leaseUntil)
	}
	if withResp && r.hasResp {
		out.Response = append([]byte{}, r.resp...)
	}
	return out
}

// replay is what a replay reports: the fields a replay reads, and the
// response; not the clock.
func (r *rec) replay() idemstore.Record {
	return idemstore.Record{State: r.state, Attempt: r.attempt, Rev: r.rev, Codec: r.codec, Policy: r.policy,
		Response: append([]byte{}, r.resp...)}
}

func own(ref idemstore.Ref, r *rec) idemstore.Ownership {
	return idemstore.Ownership{Ref: ref, Operation: r.op, Owner: r.owner, Attempt: r.attempt, Rev: r.rev}
}

// Claim models CLAIM (nonce "") and CLAIM+START.
func (m *Model) Claim(now time.Time, req idemstore.ClaimRequest, nonce idemstore.Nonce) idemstore.ClaimOutcome {
	nowMs := now.UnixMilli()
	target := idemstore.StateClaimed
	if nonce != "" {
		target = idemstore.StateExecuting
	}
	r := m.recs[req.Ref]
	if r == nil {
		r = &rec{
			state: target, owner: req.Owner, attempt: 1, rev: 1, op: req.Operation, fp: req.Fingerprint,
			codec: req.Codec, policy: req.Policy, leaseUntil: nowMs + req.Lease.Milliseconds(), hasLease: true,
			nonce: nonce, createdAt: nowMs, updatedAt: nowMs,
		}
		m.recs[req.Ref] = r
		return idemstore.Acquired{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
	}
	if r.fp != req.Fingerprint {
		return idemstore.FingerprintMismatch{Record: r.snapshot(now, false)}
	}
	if r.state == idemstore.StateCompleted {
		if r.codec != req.Codec || r.policy != req.Policy {
			return idemstore.CodecMismatch{Record: r.snapshot(now, false)}
		}
		return idemstore.CompletedReplay{Record: r.replay()}
	}
	if r.state == idemstore.StateAbandoned {
		return idemstore.RecoveryRequired{Record: r.snapshot(now, false)}
	}
	if r.state == idemstore.StateFailed {
		return idemstore.OperationFailed{Record: r.snapshot(now, false)}
	}
	expired := r.state == idemstore.StateFailedRetryable || r.leaseUntil <= nowMs
	same := r.owner == req.Owner
	if same {
		switch {
		case r.op != req.Operation:
			return idemstore.OwnerOperationConflict{Record: r.snapshot(now, false)}
		case r.state == idemstore.StateFailedRetryable:
			return idemstore.ReplayedAcquire{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
		case r.state == idemstore.StateExecuting && nonce != "" && r.nonce == nonce:
			// The invocation's own claim+start, re-sent: the lease is
			// refreshed.
			r.leaseUntil = max(r.leaseUntil, nowMs+req.Lease.Milliseconds())
			r.updatedAt = nowMs
			return idemstore.ReplayedAcquire{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
		case !expired:
			return idemstore.ReplayedAcquire{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
		}
	}
	if expired {
		from := r.state
		r.uncertain = from == idemstore.StateExecuting || r.uncertain
		if !same {
			r.attempt++
		}
		r.state, r.owner, r.rev, r.op = target, req.Owner, r.rev+1, req.Operation
		r.codec, r.policy, r.leaseUntil, r.hasLease, r.updatedAt = req.Codec, req.Policy, nowMs+req.Lease.Milliseconds(), true, nowMs
		r.reason, r.resp, r.hasResp, r.nonce = "", nil, false, nonce
		return idemstore.TakenOver{Ownership: own(req.Ref, r), Record: r.snapshot(now, false), From: from, EffectMayHaveHappened: r.uncertain}
	}
	return idemstore.InProgress{Record: r.snapshot(now, false)}
}

// Transition models TRANSITION. lease is the lease of a START.
func (m *Model) Transition(now time.Time, o idemstore.Ownership, target idemstore.State, sources string,
	nonce idemstore.Nonce, lease time.Duration, resp []byte, reason string,
) idemstore.TransitionOutcome {
	r := m.recs[o.Ref]
	if r == nil {
		return idemstore.Missing{}
	}
	refuse := func(why idemstore.Refusal) idemstore.TransitionOutcome {
		return idemstore.Refused{Reason: why, Record: r.snapshot(now, false)}
	}
	switch {
	case r.owner != o.Owner:
		return refuse(idemstore.RefusedNotOwner)
	case r.op != o.Operation:
		return refuse(idemstore.RefusedOperation)
	case r.state == target:
		return idemstore.AlreadyTransitioned{Record: r.snapshot(now, false)}
	case r.rev != o.Rev:
		return refuse(idemstore.RefusedStaleRev)
	case !strings.Contains(","+sources+",", ","+string(r.state)+","):
		return refuse(idemstore.RefusedState)
	case r.state == idemstore.StateExecuting && r.nonce != nonce:
		return refuse(idemstore.RefusedNonce)
	}
	nowMs := now.UnixMilli()
	r.state, r.rev, r.updatedAt = target, r.rev+1, nowMs
	if target == idemstore.StateExecuting {
		r.nonce = nonce
		r.leaseUntil, r.hasLease = nowMs+lease.Milliseconds(), true
	} else {
		r.hasLease = false
	}
	if resp != nil {
		r.resp, r.hasResp = append([]byte{}, resp...), true
	}
	if reason != "" {
		r.reason = reason
	}
	if target == idemstore.StateCompleted || target == idemstore.StateFailedRetryable {
		r.uncertain = false
	}
	return idemstore.Transitioned{Ownership: own(o.Ref, r), Record: r.snapshot(now, false)}
}

// Renew models RENEW.
func (m *Model) Renew(now time.Time, req idemstore.RenewRequest) idemstore.RenewOutcome {
	r := m.recs[req.Ref]
	if r == nil {
		return idemstore.Missing{}
	}
	var why idemstore.Refusal
	switch {
	case r.owner != req.Owner:
		why = idemstore.RefusedNotOwner
	case r.op != req.Operation:
		why = idemstore.RefusedOperation
	case r.state != idemstore.StateExecuting:
		why = idemstore.RefusedState
	case r.nonce != req.Nonce:
		why = idemstore.RefusedNonce
	}
	if why != "" {
		return idemstore.Refused{Reason: why, Record: r.snapshot(now, false)}
	}
	if l := now.UnixMilli() + req.Lease.Milliseconds(); l > r.leaseUntil {
		r.leaseUntil = l
	}
	return idemstore.Renewed{Record: idemstore.Record{State: r.state, Owner: r.owner, Attempt: r.attempt, Rev: r.rev,
		Operation: r.op, LeaseUntil: time.UnixMilli(r.leaseUntil), Nonce: r.nonce, ServerTime: now}}
}

// Release models RELEASE.
func (m *Model) Release(now time.Time, o idemstore.Ownership) idemstore.ReleaseOutcome {
	r := m.recs[o.Ref]
	if r == nil {
		return idemstore.Missing{}
	}
	var why idemstore.Refusal
	switch {
	case r.owner != o.Owner:
		why = idemstore.RefusedNotOwner
	case r.op != o.Operation:
		why = idemstore.RefusedOperation
	case r.state != idemstore.StateClaimed:
		why = idemstore.RefusedState
	case r.rev != o.Rev:
		why = idemstore.RefusedStaleRev
	}
	if why != "" {
		return idemstore.Refused{Reason: why, Record: r.snapshot(now, false)}
	}
	delete(m.recs, o.Ref)
	return idemstore.Released{}
}

// Inspect models INSPECT.
func (m *Model) Inspect(now time.Time, ref idemstore.Ref) idemstore.Observation {
	r := m.recs[ref]
	if r == nil {
		return idemstore.Observation{ServerTime: now}
	}
	return idemstore.Observation{Found: true, Record: r.snapshot(now, true), ServerTime: now}
}

// Resolve models RESOLVE.
func (m *Model) Resolve(now time.Time, req idemstore.ResolveRequest) idemstore.ResolveOutcome {
	r := m.recs[req.Ref]
	if r == nil {
		return idemstore.Missing{}
	}
	if r.state == req.Target && r.attempt == req.Attempt && r.rev == req.Rev+1 &&
		(req.Target != idemstore.StateCompleted || string(r.resp) == string(req.Response)) {
		return idemstore.AlreadyTransitioned{Record: r.snapshot(now, false)}
	}
	var why idemstore.Refusal
	switch {
	case r.attempt != req.Attempt:
		why = idemstore.RefusedAttempt
	case r.rev != req.Rev:
		why = idemstore.RefusedStaleRev
	case r.state != idemstore.StateAbandoned && !(r.state == idemstore.StateFailed && req.Target == idemstore.StateFailedRetryable):
		why = idemstore.RefusedState
	}
	if why != "" {
		return idemstore.Refused{Reason: why, Record: r.snapshot(now, false)}
	}
	r.state, r.rev, r.uncertain, r.reason, r.updatedAt = req.Target, r.rev+1, false, req.Reason, now.UnixMilli()
	r.hasLease = false
	if req.Target == idemstore.StateCompleted {
		resp := req.Response
		if resp == nil {
			resp = []byte{}
		}
		r.resp, r.hasResp, r.codec, r.policy = append([]byte{}, resp...), true, req.Codec, req.Policy
	}
	return idemstore.Transitioned{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
}
