package redisstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/idemstore/driver"
)

// Renewals of one store are sent together: RENEW takes several leases
// (renew.lua), each fenced on its own, and a script call costs Redis more
// to enter than one lease costs it to renew. Renew calls that arrive while
// one is in flight wait for it and then go as one call of up to
// maxRenewBatch leases; the executor ticks every lease of a process on the
// same grid (idemstore's lease), so the leases of a busy worker are
// renewed in a few calls per RenewInterval. A lone renewal goes at once,
// as before: nothing waits for company.
//
// Only a *redis.Client that bounds its calls by the context
// (ContextTimeoutEnabled) batches: a Cluster's keys of one call must share
// a slot, a client the store must guard runs every call under a timer of
// its own, and a durable renewal waits for its own write.
const maxRenewBatch = 64

// renewals gathers the Renew calls waiting for the one in flight. Its
// leader is a caller: the first that finds none in flight sends the
// waiting calls (its own among them) and, when its own is done, hands the
// lead to the first that still waits. Each caller is woken once, when its
// call is done or the lead is handed to it; no goroutine of its own runs.
type renewals struct {
	on      bool // batching is possible with this client (New)
	mu      sync.Mutex
	queue   []*pendingRenew // waiting, not sent
	leading bool            // a caller leads
}

// pendingRenew is one Renew call, waiting or sent.
type pendingRenew struct {
	ctx context.Context
	req driver.RenewRequest
	key string
	// started is m of req.Started, "" when renew.lua is not to compare
	// the record with it (startedMeta).
	started string
	ready   chan struct{} // one signal: done, or the lead handed over
	// Under renewals.mu:
	sent   bool // taken into a call
	done   bool // out and err are set
	leader bool // it leads (or was handed the lead)
	out    driver.RenewOutcome
	err    error
}

// Renew implements driver.Store.
func (s *Store) Renew(ctx context.Context, req driver.RenewRequest) (driver.RenewOutcome, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if !s.renewals.on {
		return s.renewOne(ctx, req, s.Key(req.Ref), startedMeta(req))
	}
	p := &pendingRenew{ctx: ctx, req: req, key: s.Key(req.Ref), started: startedMeta(req), ready: make(chan struct{}, 1)}
	r := &s.renewals
	r.mu.Lock()
	r.queue = append(r.queue, p)
	if !r.leading {
		r.leading, p.leader = true, true
	}
	for {
		if p.done {
			r.mu.Unlock()
			return p.out, p.err
		}
		if p.leader {
			r.mu.Unlock()
			s.lead(p)
			r.mu.Lock()
			continue
		}
		r.mu.Unlock()
		select {
		case <-p.ready:
			r.mu.Lock()
		case <-ctx.Done():
			r.mu.Lock()
			if p.done || p.sent {
				// Done, or in the call in flight, whose leader sets out
				// and err: the caller need not wait for it.
				if !p.done {
					r.mu.Unlock()
					return nil, classify(opRenew, req.Ref, context.Cause(ctx))
				}
				continue
			}
			if i := slices.Index(r.queue, p); i >= 0 {
				r.queue = slices.Delete(r.queue, i, i+1)
			}
			if p.leader {
				r.handOffLocked()
			}
			r.mu.Unlock()
			return nil, classify(opRenew, req.Ref, context.Cause(ctx))
		}
	}
}

// lead sends the waiting calls, maxRenewBatch a call, until p's is done,
// then hands the lead on.
func (s *Store) lead(p *pendingRenew) {
	r := &s.renewals
	for {
		r.mu.Lock()
		if p.done {
			r.handOffLocked()
			r.mu.Unlock()
			return
		}
		n := min(len(r.queue), maxRenewBatch)
		batch := slices.Clone(r.queue[:n])
		for _, q := range batch {
			q.sent = true
		}
		rest := copy(r.queue, r.queue[n:])
		clear(r.queue[rest:])
		r.queue = r.queue[:rest]
		r.mu.Unlock()

		s.renewBatch(batch)

		r.mu.Lock()
		for _, q := range batch {
			q.done = true
			if q != p {
				q.ready <- struct{}{}
			}
		}
		r.mu.Unlock()
	}
}

// handOffLocked hands the lead to the first waiting call, if any.
func (r *renewals) handOffLocked() {
	if len(r.queue) == 0 {
		r.leading = false
		return
	}
	q := r.queue[0]
	q.leader = true
	q.ready <- struct{}{}
}

// renewBatch sends the renewals of batch and sets each one's outcome. One
// renewal goes as before, under its caller's context. Several go in one
// call under the earliest of their deadlines (every renewal's context has
// one: the lease), and a caller's cancellation leaves the others' call
// alone. An error reply from the server to the whole call (a key that is
// not a hash, WRONGTYPE, or any other error a lease's record may cause,
// after the leases before it were renewed, which renewing again does not
// change) does not fail the others: each is then sent on its own, so that
// the error stays the one lease's.
func (s *Store) renewBatch(batch []*pendingRenew) {
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = classify(opRenew, p.req.Ref, context.Cause(p.ctx))
			continue
		}
		live = append(live, p)
	}
	switch {
	case len(live) == 0:
		return
	case len(live) == 1:
		p := live[0]
		p.out, p.err = s.renewOne(p.ctx, p.req, p.key, p.started)
		return
	}
	deadline := time.Now().Add(s.timeout)
	keys := make([]string, len(live))
	args := make([]any, 0, 7*len(live))
	for i, p := range live {
		if d, ok := p.ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		keys[i] = p.key
		args = s.appendRenewArgs(args, p.req, p.started)
	}
	ctx := &deadlineCtx{Context: context.WithoutCancel(live[0].ctx), deadline: deadline, timers: &s.deadlines}
	raw, err := s.runKeys(ctx, s.scripts.renew, keys, args)
	var serverErr redis.Error
	if errors.As(err, &serverErr) {
		for _, p := range live {
			p.out, p.err = s.renewOne(p.ctx, p.req, p.key, p.started)
		}
		return
	}
	replies, _ := raw.([]any)
	for i, p := range live {
		switch {
		case err != nil:
			p.err = classify(opRenew, p.req.Ref, err)
		case len(replies) != len(live):
			p.err = unexpectedReply("%s %s: a renewal of %d leases answered %T of %d", opRenew, p.req.Ref, len(live), raw, len(replies))
		default:
			p.out, p.err = decodeRenew(p.req, p.started != "", replies[i])
		}
	}
}

// renewOne sends one renewal under its caller's context; started is
// startedMeta(req).
func (s *Store) renewOne(ctx context.Context, req driver.RenewRequest, key, started string) (driver.RenewOutcome, error) {
	var buf [7]any
	raw, err := s.callKey(ctx, nil, opRenew, req.Ref, key, s.scripts.renew, s.appendRenewArgs(buf[:0], req, started)...)
	if err != nil {
		return nil, err
	}
	replies, ok := raw.([]any)
	if !ok || len(replies) != 1 {
		return nil, unexpectedReply("%s %s: a renewal of one lease answered %T", opRenew, req.Ref, raw)
	}
	return decodeRenew(req, started != "", replies[0])
}

// appendRenewArgs appends the seven arguments of one lease of renew.lua:
// the owner, the nonce and the fingerprint as the raw bytes the record
// keeps them in.
func (s *Store) appendRenewArgs(args []any, req driver.RenewRequest, started string) []any {
	raw := make([]byte, 0, 80)
	raw = appendRaw(raw, string(req.Owner))
	raw = appendRaw(raw, string(req.Nonce))
	if started != "" {
		raw = appendRaw(raw, string(req.Started.Fingerprint))
	}
	return append(args, raw[:32:32], string(req.Operation), raw[32:48:48],
		s.args.int(ms(req.Lease)), s.args.int(ms(req.Retention)), raw[48:], started)
}
