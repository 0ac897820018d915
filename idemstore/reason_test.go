package idemstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestNULInTheOperationIDIsRefusedBeforeAnythingIsWritten: a NUL byte in
// an operation ID made the claim+start write an EXECUTING record whose
// reply did not decode: Execute said "corrupt" and left a record that no
// script would ever touch again. It is now refused by Request.Validate,
// before anything is sent.
func TestNULInTheOperationIDIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	e, f := newEnv(t, idemstore.ExecutorConfig{}), storetest.NewFixture()
	req := request(f)
	req.Operation = "order-42/charge\x00"
	var runs atomic.Int32
	_, err := e.exec.Execute(t.Context(), req, counted(&runs, "ok", nil))
	var ve *onceflow.Error
	if !errors.Is(err, onceflow.OutcomeInvalid) || !errors.As(err, &ve) || ve.Field != "OperationID" {
		t.Fatalf("err = %v, want an OutcomeInvalid error for the OperationID", err)
	}
	if runs.Load() != 0 || e.faulty.Calls(storetest.MethodClaimStart) != 0 {
		t.Fatalf("ran %d times, %d claims sent; want none", runs.Load(), e.faulty.Calls(storetest.MethodClaimStart))
	}
	if obs := e.inspect(t, f.Ref); obs.Found {
		t.Fatalf("a record was written: %+v", obs.Record)
	}
}

// TestActionErrorTextIsSanitisedBeforeItIsRecorded: the reason of a
// FAILED_RETRYABLE or ABANDONED record is built from the action's error
// text or panic value, which the caller does not control. A NUL in it made
// the record corrupt for its whole retention (and the failure was reported
// not recorded); a long multi-byte message was cut mid-rune. The executor
// now sanitises it: the failure is recorded, the reason is valid, and the
// next attempt proceeds as the state says.
func TestActionErrorTextIsSanitisedBeforeItIsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	long := strings.Repeat("é", onceflow.MaxReasonLen) // any cut at an odd byte splits a rune
	for _, c := range []struct {
		name   string
		action idemstore.Action
		state  onceflow.State
		want   string // what the stored reason contains
	}{
		{"retryable with a NUL", func(context.Context) ([]byte, error) {
			return nil, idemstore.RetryableNoEffect(errors.New("card\x00declined"))
		}, onceflow.StateFailedRetryable, "card\uFFFDdeclined"},
		{"panic with a NUL", func(context.Context) ([]byte, error) { panic("boom\x00") }, onceflow.StateAbandoned, "boom\uFFFD"},
		{"error with a NUL", func(context.Context) ([]byte, error) {
			return nil, errors.New("gateway answered \x00\x00")
		}, onceflow.StateAbandoned, "gateway answered \uFFFD\uFFFD"},
		{"long multi-byte retryable", func(context.Context) ([]byte, error) {
			return nil, idemstore.RetryableNoEffect(errors.New(long))
		}, onceflow.StateFailedRetryable, "éé..."},
		{"long multi-byte error", func(context.Context) ([]byte, error) { return nil, errors.New("x" + long) }, onceflow.StateAbandoned, "éé..."},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := storetest.NewFixture()
			_, err := e.exec.Execute(t.Context(), request(f), c.action)
			var re *onceflow.Error
			var eu *onceflow.Error
			switch {
			case errors.As(err, &re) && re.Outcome == onceflow.OutcomeRetryable:
				if !re.Recorded {
					t.Fatalf("err = %v: not recorded", err)
				}
			case errors.As(err, &eu):
				if !eu.Recorded {
					t.Fatalf("err = %v: not recorded", err)
				}
			default:
				t.Fatalf("err = %v, want a recorded onceflow.Error or onceflow.Error", err)
			}
			r := e.wantState(t, f.Ref, c.state)
			if !strings.Contains(r.Reason, c.want) || len(r.Reason) > onceflow.MaxReasonLen || !utf8.ValidString(r.Reason) || strings.ContainsRune(r.Reason, 0) {
				t.Fatalf("stored reason %q (%d bytes), want valid UTF-8 of at most %d bytes, without NUL, containing %q",
					r.Reason, len(r.Reason), onceflow.MaxReasonLen, c.want)
			}
			// The record is an ordinary one: the next attempt takes over a
			// FAILED_RETRYABLE one, and is told recovery is required for an
			// ABANDONED one.
			var runs atomic.Int32
			res, err := e.exec.Execute(t.Context(), request(f), counted(&runs, "ok", nil))
			switch c.state {
			case onceflow.StateFailedRetryable:
				if err != nil || res.Outcome != onceflow.OutcomeRan || res.TookOver != onceflow.StateFailedRetryable {
					t.Fatalf("next attempt: %+v, %v; want it to take over and run", res, err)
				}
			default:
				if !errors.Is(err, onceflow.OutcomeAwaitingDecision) || runs.Load() != 0 {
					t.Fatalf("next attempt: %v after %d runs; want onceflow.OutcomeAwaitingDecision without running", err, runs.Load())
				}
			}
		})
	}
}

// TestUndecodableWriteRepliesAreVerified: a write whose reply does not
// decode (an OutcomeCorrupt error, or OutcomeCorrupt) may have applied,
// as one whose reply was lost may have. The executor used to report such
// a failure write "not recorded", and such a complete as a success it
// could not record, without looking; it now checks with INSPECT, as for a
// lost reply.
func TestUndecodableWriteRepliesAreVerified(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	for _, c := range []struct {
		name   string
		method storetest.Method
		actErr error
		state  onceflow.State
	}{
		{"abandon", storetest.MethodFail, errors.New("timeout after send"), onceflow.StateAbandoned},
		{"retryable", storetest.MethodFail, idemstore.RetryableNoEffect(errors.New("declined")), onceflow.StateFailedRetryable},
		{"complete", storetest.MethodComplete, nil, onceflow.StateCompleted},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := storetest.NewFixture()
			local, exec := e.isolated(t)
			local.Inject(c.method, storetest.CorruptReplyAfterApply)
			var runs atomic.Int32
			res, err := exec.Execute(t.Context(), request(f), counted(&runs, "ch_1", c.actErr))
			if local.Calls(storetest.MethodInspect) == 0 {
				t.Fatal("the write whose reply did not decode was not verified with INSPECT")
			}
			var eu *onceflow.Error
			var re *onceflow.Error
			switch {
			case c.state == onceflow.StateCompleted:
				if err != nil || res.Outcome != onceflow.OutcomeRan || string(res.Response) != "ch_1" {
					t.Fatalf("complete applied, its reply undecodable: %+v, %v; want Ran", res, err)
				}
			case errors.As(err, &eu) && eu.Outcome == onceflow.OutcomeEffectUnknown:
				if !eu.Recorded || eu.State != c.state {
					t.Fatalf("err = %v (recorded %v, state %s), want recorded %s", err, eu.Recorded, eu.State, c.state)
				}
			case errors.As(err, &re) && re.Outcome == onceflow.OutcomeRetryable:
				if !re.Recorded {
					t.Fatalf("err = %v: want recorded", err)
				}
			default:
				t.Fatalf("err = %v", err)
			}
			e.wantState(t, f.Ref, c.state)
			if runs.Load() != 1 {
				t.Fatalf("ran %d times", runs.Load())
			}
		})
	}
}

// TestAStrayChunkNeverBecomesPartOfAResponse: a response chunk field left
// in an EXECUTING record (resp3, without resp2) was joined into the
// response COMPLETE wrote; Execute said Ran, and every replay was refused
// as corrupt. COMPLETE now refuses the record, so Execute does not claim a
// success it could not record, and no later attempt runs or replays.
func TestAStrayChunkNeverBecomesPartOfAResponse(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	rs, err := redisstore.New(redisstore.Config{Client: client, Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: rs})
	if err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture()
	resp := strings.Repeat("r", 100) // two chunks
	_, err = exec.Execute(t.Context(), request(f), func(ctx context.Context) ([]byte, error) {
		if err := client.HSet(ctx, rs.Key(f.Ref), "resp3", "STRAY").Err(); err != nil {
			return nil, idemstore.RetryableNoEffect(err)
		}
		return []byte(resp), nil
	})
	var ad, ce *onceflow.Error
	if !errors.Is(err, onceflow.OutcomeAwaitingDecision) || !errors.As(err, &ad) || !errors.As(ad.Err, &ce) || ce.Field != "resp3" {
		t.Fatalf("err = %v, want onceflow.OutcomeAwaitingDecision caused by the corrupt resp3", err)
	}
	var runs atomic.Int32
	res, err := exec.Execute(t.Context(), request(f), counted(&runs, "again", nil))
	if !errors.Is(err, onceflow.OutcomeCorrupt) || runs.Load() != 0 {
		t.Fatalf("next attempt: %+v, %v after %d runs; want an OutcomeCorrupt error without running", res, err, runs.Load())
	}
}

// FuzzActionErrorTextNeverCorruptsTheRecord: whatever text an action's
// error or panic carries, the failure is recorded and the record stays
// one every script reads.
func FuzzActionErrorTextNeverCorruptsTheRecord(f *testing.F) {
	for _, s := range []string{"", "declined", "\x00", "a\x00b", "\xff\xfe\x00", strings.Repeat("é", 700), strings.Repeat("\x00", 1100)} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
		f.Add(s, uint8(2))
	}
	rs, err := redisstore.New(redisstore.Config{Client: redistest.Client(f), Namespace: redistest.Namespace(f)})
	if err != nil {
		f.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: rs})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string, how uint8) {
		fx := storetest.NewFixture()
		_, err := exec.Execute(t.Context(), request(fx), func(context.Context) ([]byte, error) {
			switch how % 3 {
			case 0:
				return nil, idemstore.RetryableNoEffect(errors.New(text))
			case 1:
				panic(text)
			}
			return nil, errors.New(text)
		})
		var re *onceflow.Error
		var eu *onceflow.Error
		if !(errors.As(err, &re) && re.Recorded) && !(errors.As(err, &eu) && eu.Recorded) {
			t.Fatalf("err = %v, want the failure recorded", err)
		}
		obs, err := rs.Inspect(t.Context(), fx.Ref)
		if err != nil || !obs.Found {
			t.Fatalf("inspect: %+v, %v", obs, err)
		}
		if err := onceflow.ValidateReason(obs.Record.Reason); err != nil {
			t.Fatalf("stored reason %q: %v", obs.Record.Reason, err)
		}
	})
}
