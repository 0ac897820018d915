// Package refmodel is a small pure-Go reference model of the idempotency
// state machine of docs/state-machine.md. Tests run random operation
// sequences against a real store and against this model and require the
// same outcomes. The model takes the store's clock as an argument, so a
// test can feed it the server time each reply reports.
package refmodel

import (
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

type rec struct {
	state                onceflow.State
	owner                onceflow.Owner
	attempt, rev         int64
	op                   onceflow.OperationID
	fp                   onceflow.Fingerprint
	codec                string
	policy               int
	leaseUntil           int64
	hasLease             bool // terminal states drop leaseUntil
	nonce                onceflow.Nonce
	reason               string
	uncertain            bool
	createdAt, updatedAt int64
	resp                 []byte
	hasResp              bool
}

// Model is the reference state machine. Keys never expire in it: use TTLs
// longer than the test.
type Model struct {
	recs map[onceflow.Ref]*rec
}

// New returns an empty model.
func New() *Model { return &Model{recs: map[onceflow.Ref]*rec{}} }

func (r *rec) snapshot(now time.Time, withResp bool) onceflow.Record {
	out := onceflow.Record{
		State: r.state, Owner: r.owner, Attempt: r.attempt, Rev: r.rev, Operation: r.op,
		Fingerprint: r.fp, Codec: r.codec, Policy: r.policy,
		Nonce: r.nonce, Reason: r.reason, EffectUnknown: r.uncertain,
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
func (r *rec) replay() onceflow.Record {
	return onceflow.Record{State: r.state, Attempt: r.attempt, Rev: r.rev, Codec: r.codec, Policy: r.policy,
		CreatedAt: time.UnixMilli(r.createdAt), Response: append([]byte{}, r.resp...)}
}

func own(ref onceflow.Ref, r *rec) driver.Ownership {
	return driver.Ownership{Ref: ref, Operation: r.op, Owner: r.owner, Attempt: r.attempt, Rev: r.rev}
}

// Claim models CLAIM (nonce "") and CLAIM+START.
func (m *Model) Claim(now time.Time, req driver.ClaimRequest, nonce onceflow.Nonce) driver.ClaimOutcome {
	nowMs := now.UnixMilli()
	target := onceflow.StateClaimed
	if nonce != "" {
		target = onceflow.StateExecuting
	}
	r := m.recs[req.Ref]
	if r == nil {
		r = &rec{
			state: target, owner: req.Owner, attempt: 1, rev: 1, op: req.Operation, fp: req.Fingerprint,
			codec: req.Codec, policy: req.Policy, leaseUntil: nowMs + req.Lease.Milliseconds(), hasLease: true,
			nonce: nonce, createdAt: nowMs, updatedAt: nowMs,
		}
		m.recs[req.Ref] = r
		return driver.Acquired{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
	}
	if r.fp != req.Fingerprint {
		return driver.FingerprintMismatch{Record: r.snapshot(now, false)}
	}
	if r.state == onceflow.StateCompleted {
		if r.codec != req.Codec || r.policy != req.Policy {
			return driver.CodecMismatch{Record: r.snapshot(now, false)}
		}
		return driver.CompletedReplay{Record: r.replay()}
	}
	if r.state == onceflow.StateAbandoned {
		return driver.AwaitingDecision{Record: r.snapshot(now, false)}
	}
	if r.state == onceflow.StateFailed {
		return driver.OperationFailed{Record: r.snapshot(now, false)}
	}
	expired := r.state == onceflow.StateFailedRetryable || r.leaseUntil <= nowMs
	same := r.owner == req.Owner
	if same {
		switch {
		case r.op != req.Operation:
			return driver.OwnerOperationConflict{Record: r.snapshot(now, false)}
		case r.state == onceflow.StateFailedRetryable:
			return driver.ReplayedAcquire{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
		case r.state == onceflow.StateExecuting && nonce != "" && r.nonce == nonce:
			// The invocation's own claim+start, re-sent: the lease is
			// refreshed.
			r.leaseUntil = max(r.leaseUntil, nowMs+req.Lease.Milliseconds())
			r.updatedAt = nowMs
			return driver.ReplayedAcquire{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
		case !expired:
			return driver.ReplayedAcquire{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
		}
	}
	if expired {
		from := r.state
		r.uncertain = from == onceflow.StateExecuting || r.uncertain
		if !same {
			r.attempt++
		}
		r.state, r.owner, r.rev, r.op = target, req.Owner, r.rev+1, req.Operation
		r.codec, r.policy, r.leaseUntil, r.hasLease, r.updatedAt = req.Codec, req.Policy, nowMs+req.Lease.Milliseconds(), true, nowMs
		r.reason, r.resp, r.hasResp, r.nonce = "", nil, false, nonce
		return driver.TakenOver{Ownership: own(req.Ref, r), Record: r.snapshot(now, false), From: from, EffectUnknown: r.uncertain}
	}
	return driver.InProgress{Record: r.snapshot(now, false)}
}

// Transition models TRANSITION. lease is the lease of a START.
func (m *Model) Transition(now time.Time, o driver.Ownership, target onceflow.State, sources string,
	nonce onceflow.Nonce, lease time.Duration, resp []byte, reason string,
) driver.TransitionOutcome {
	r := m.recs[o.Ref]
	if r == nil {
		return driver.Missing{}
	}
	refuse := func(why driver.Refusal) driver.TransitionOutcome {
		return driver.Refused{Reason: why, Record: r.snapshot(now, false)}
	}
	switch {
	case r.owner != o.Owner:
		return refuse(driver.RefusedNotOwner)
	case r.op != o.Operation:
		return refuse(driver.RefusedOperation)
	case r.state == target:
		return driver.AlreadyTransitioned{Record: r.snapshot(now, false)}
	case r.rev != o.Rev:
		return refuse(driver.RefusedStaleRev)
	case !strings.Contains(","+sources+",", ","+string(r.state)+","):
		return refuse(driver.RefusedState)
	case r.state == onceflow.StateExecuting && r.nonce != nonce:
		return refuse(driver.RefusedNonce)
	}
	nowMs := now.UnixMilli()
	r.state, r.rev, r.updatedAt = target, r.rev+1, nowMs
	if target == onceflow.StateExecuting {
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
	if target == onceflow.StateCompleted || target == onceflow.StateFailedRetryable {
		r.uncertain = false
	}
	return driver.Transitioned{Ownership: own(o.Ref, r), Record: r.snapshot(now, false)}
}

// Renew models RENEW.
func (m *Model) Renew(now time.Time, req driver.RenewRequest) driver.RenewOutcome {
	r := m.recs[req.Ref]
	if r == nil {
		return driver.Missing{}
	}
	var why driver.Refusal
	switch {
	case r.owner != req.Owner:
		why = driver.RefusedNotOwner
	case r.op != req.Operation:
		why = driver.RefusedOperation
	case r.state != onceflow.StateExecuting:
		why = driver.RefusedState
	case r.nonce != req.Nonce:
		why = driver.RefusedNonce
	}
	if why != "" {
		return driver.Refused{Reason: why, Record: r.snapshot(now, false)}
	}
	if l := now.UnixMilli() + req.Lease.Milliseconds(); l > r.leaseUntil {
		r.leaseUntil = l
	}
	return driver.Renewed{Record: onceflow.Record{State: r.state, Owner: r.owner, Attempt: r.attempt, Rev: r.rev,
		Operation: r.op, LeaseUntil: time.UnixMilli(r.leaseUntil), Nonce: r.nonce, ServerTime: now}}
}

// Release models RELEASE.
func (m *Model) Release(now time.Time, o driver.Ownership) driver.ReleaseOutcome {
	r := m.recs[o.Ref]
	if r == nil {
		return driver.Missing{}
	}
	var why driver.Refusal
	switch {
	case r.owner != o.Owner:
		why = driver.RefusedNotOwner
	case r.op != o.Operation:
		why = driver.RefusedOperation
	case r.state != onceflow.StateClaimed:
		why = driver.RefusedState
	case r.rev != o.Rev:
		why = driver.RefusedStaleRev
	}
	if why != "" {
		return driver.Refused{Reason: why, Record: r.snapshot(now, false)}
	}
	delete(m.recs, o.Ref)
	return driver.Released{}
}

// Inspect models INSPECT.
func (m *Model) Inspect(now time.Time, ref onceflow.Ref) driver.Observation {
	r := m.recs[ref]
	if r == nil {
		return driver.Observation{ServerTime: now}
	}
	return driver.Observation{Found: true, Record: r.snapshot(now, true), ServerTime: now}
}

// Resolve models RESOLVE.
func (m *Model) Resolve(now time.Time, req driver.ResolveRequest) driver.ResolveOutcome {
	r := m.recs[req.Ref]
	if r == nil {
		return driver.Missing{}
	}
	if r.state == req.Target && r.attempt == req.Attempt && r.rev == req.Rev+1 &&
		(req.Target != onceflow.StateCompleted || string(r.resp) == string(req.Response)) {
		return driver.AlreadyTransitioned{Record: r.snapshot(now, false)}
	}
	var why driver.Refusal
	switch {
	case r.attempt != req.Attempt:
		why = driver.RefusedAttempt
	case r.rev != req.Rev:
		why = driver.RefusedStaleRev
	case r.state != onceflow.StateAbandoned && !(r.state == onceflow.StateFailed && req.Target == onceflow.StateFailedRetryable):
		why = driver.RefusedState
	}
	if why != "" {
		return driver.Refused{Reason: why, Record: r.snapshot(now, false)}
	}
	r.state, r.rev, r.uncertain, r.reason, r.updatedAt = req.Target, r.rev+1, false, req.Reason, now.UnixMilli()
	r.hasLease = false
	if req.Target == onceflow.StateCompleted {
		resp := req.Response
		if resp == nil {
			resp = []byte{}
		}
		r.resp, r.hasResp, r.codec, r.policy = append([]byte{}, resp...), true, req.Codec, req.Policy
	}
	return driver.Transitioned{Ownership: own(req.Ref, r), Record: r.snapshot(now, false)}
}
