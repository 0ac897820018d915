package redisstore_test

import (
	"errors"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestNULInAnOperationIDOrReasonIsNeverSent: the schema refuses a NUL
// byte in a stored op or reason (a reply separates its fields with NUL),
// so a request carrying one was written, and the record the store had
// just written was corrupt for its whole retention: a claim+start wrote
// an EXECUTING record and answered "corrupt". Every such request is now a
// OutcomeInvalid error, and not one command reaches Redis.
func TestNULInAnOperationIDOrReasonIsNeverSent(t *testing.T) {
	t.Parallel()
	client := redistest.NewClient(t, redistest.Addr(t))
	var sent []string
	client.AddHook(countHook{func(name string) { sent = append(sent, name) }})
	s := newStore(t, redisstore.Config{Client: client})
	f := storetest.NewFixture()
	own, nonce := executingOwnership(t, s, f)
	before := inspect(t, s, f.Ref)
	g := storetest.NewFixture()
	g.Operation = "op\x00" + g.Operation
	nulOwn := own
	nulOwn.Operation = "op\x00"
	sent = nil

	calls := map[string]func() error{
		"claim": func() error { _, err := s.Claim(t.Context(), g.Claim(onceflow.NewOwner())); return err },
		"claim+start": func() error {
			_, err := s.ClaimStart(t.Context(), g.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
			return err
		},
		"start": func() error {
			_, err := s.Start(t.Context(), driver.StartRequest{Ownership: nulOwn, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
			return err
		},
		"complete": func() error {
			_, err := s.Complete(t.Context(), driver.CompleteRequest{Ownership: nulOwn, Nonce: nonce, Response: []byte("ok"), TTL: f.TTL})
			return err
		},
		"renew": func() error {
			_, err := s.Renew(t.Context(), driver.RenewRequest{Ref: f.Ref, Operation: nulOwn.Operation, Owner: own.Owner, Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
			return err
		},
		"release": func() error { _, err := s.Release(t.Context(), driver.ReleaseRequest{Ownership: nulOwn}); return err },
		"fail with a NUL reason": func() error {
			_, err := s.Fail(t.Context(), driver.FailRequest{Ownership: own, Nonce: nonce, Target: onceflow.StateAbandoned, Reason: "gateway said \x00", TTL: f.TTL})
			return err
		},
		"resolve with a NUL reason": func() error {
			_, err := s.Resolve(t.Context(), driver.ResolveRequest{Ref: f.Ref, Attempt: own.Attempt, Rev: own.Rev, Target: onceflow.StateFailed, Reason: "operator\x00", TTL: f.TTL})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		var ve *onceflow.Error
		if !errors.Is(err, onceflow.OutcomeInvalid) || !errors.As(err, &ve) {
			t.Errorf("%s: err = %v, want an OutcomeInvalid error", name, err)
		}
	}
	if len(sent) != 0 {
		t.Fatalf("commands sent for invalid requests: %v", sent)
	}
	if obs, err := s.Inspect(t.Context(), g.Ref); err != nil || obs.Found {
		t.Fatalf("a claim with a NUL in its operation ID: record %+v, %v; want none", obs.Record, err)
	}
	if after := inspect(t, s, f.Ref); after.State != before.State || after.Rev != before.Rev || after.Reason != before.Reason {
		t.Fatalf("the record changed: %+v, was %+v", after, before)
	}
}
