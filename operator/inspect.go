package operator

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/internal/scope"
)

// RecordReport is what Inspect reads of one Redis record.
type RecordReport struct {
	// Key is the record key (code:d<version>:<digest>).
	Key   string `json:"key"`
	Found bool   `json:"found"`
	// Corrupt, when set, says how the stored record breaks the schema.
	Corrupt       string         `json:"corrupt,omitempty"`
	State         onceflow.State `json:"state,omitempty"`
	Attempt       int64          `json:"attempt,omitempty"`
	Rev           int64          `json:"rev,omitempty"`
	LeaseLeft     Duration       `json:"lease_left,omitempty"`
	TTLLeft       Duration       `json:"ttl_left,omitempty"`
	Codec         string         `json:"codec,omitempty"`
	Policy        int            `json:"policy,omitempty"`
	Response      int            `json:"response_bytes"`
	EffectUnknown bool           `json:"effectUnknown,omitempty"`
	Reason        string         `json:"reason,omitempty"`
	UpdatedAt     time.Time      `json:"updated_at,omitzero"`
	ServerTime    time.Time      `json:"server_time,omitzero"`
}

// Duration prints as a Go duration string in JSON.
type Duration time.Duration

// MarshalJSON writes d as "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Inspect reads one record, read-only, from an idemstore.Executor (its
// Inspect; a tool without an executor may pass its driver.Store). A
// missing record is a report with Found false and no error. A corrupt
// record is reported (Corrupt) and is also an error matching
// onceflow.OutcomeCorrupt; any other error reading it is returned as it
// is.
func Inspect(ctx context.Context, from interface {
	Inspect(context.Context, onceflow.Ref) (driver.Observation, error)
}, ref onceflow.Ref) (RecordReport, error) {
	rep := RecordReport{Key: ref.String()}
	obs, err := from.Inspect(ctx, ref)
	var corrupt *onceflow.Error
	if errors.As(err, &corrupt) && corrupt.Outcome == onceflow.OutcomeCorrupt {
		rep.Found, rep.Corrupt = true, corrupt.Error()
		return rep, err
	}
	if err != nil {
		return rep, err
	}
	if !obs.Found {
		return rep, nil
	}
	r := obs.Record
	rep.Found, rep.State, rep.Attempt, rep.Rev = true, r.State, r.Attempt, r.Rev
	rep.LeaseLeft, rep.TTLLeft = Duration(r.LeaseRemaining()), Duration(r.TTL)
	rep.Codec, rep.Policy, rep.Response, rep.EffectUnknown, rep.Reason = r.Codec, r.Policy, len(r.Response), r.EffectUnknown, r.Reason
	rep.UpdatedAt, rep.ServerTime = r.UpdatedAt, obs.ServerTime
	return rep, nil
}

// BusinessRef is the record of an activity whose operation key is a
// business key (activity.BusinessKey; activity.Wrapper.BusinessOperationKey
// is its String): key digested by dig with the Temporal namespace the
// workflow runs in.
func BusinessRef(dig *onceflow.Digester, namespace string, code onceflow.OperationCode, key string) onceflow.Ref {
	return onceflow.Ref{Code: code, Digest: dig.Digest(scope.Business(namespace, key)...)}
}

// HTTPRef is the record of a request an idemhttp.Middleware with this
// code (Config.Code) and dig passed on (idemhttp.InfoFrom's Ref): the
// principal that sent it, its method, the route pattern it matched
// ("POST /orders") and its Idempotency-Key. A middleware with
// Config.KeyPerTarget names its records by the request's target too: they
// are not found here.
func HTTPRef(dig *onceflow.Digester, code onceflow.OperationCode, principal, method, route, key string) onceflow.Ref {
	return onceflow.Ref{Code: code, Digest: dig.Digest(scope.HTTP(principal, method, route, key)...)}
}
