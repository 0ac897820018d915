package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// opReference is the store operation of the reference index, in errors.
const opReference = "reference"

// reusesMax bounds the trail of reuses (about; XADD MAXLEN ~).
const reusesMax = 10000

var _ driver.ReferenceIndex = (*Store)(nil)

// referenceLayoutVersion is the version of the reference index's keys,
// the "v1" in them: their layout did not change with the records'
// (KeyLayoutVersion).
const referenceLayoutVersion = 1

// ReferenceKey returns the Redis key of a business reference's index
// entry: "<namespace>:ref:v1:d<digestVersion>:<operationCode>:{<digest>}".
// Its value is the operation key that arrived first with the reference;
// it holds no raw reference.
func (s *Store) ReferenceKey(r onceflow.Ref) string {
	return s.ns + ":ref:v" + strconv.Itoa(referenceLayoutVersion) + ":d" + strconv.Itoa(r.Digest.Version) +
		":" + string(r.Code) + ":{" + r.Digest.Hex + "}"
}

// ReusesKey is the Redis stream of the reference reuses NoteReuse
// appends, newest last: "<namespace>:ref:v1:reuses". Each entry has the
// fields code, reference (the digest), holder, key and action (flagged,
// refused).
func (s *Store) ReusesKey() string {
	return s.ns + ":ref:v" + strconv.Itoa(referenceLayoutVersion) + ":reuses"
}

// ClaimReference implements driver.ReferenceIndex with one command, SET
// NX GET PX (Redis 7.0): atomic, and no script, since it touches one key
// and reads only what it would have written.
func (s *Store) ClaimReference(ctx context.Context, req driver.ReferenceRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	holder, err := s.client.SetArgs(ctx, s.ReferenceKey(req.Reference), req.Key, redis.SetArgs{Mode: "NX", Get: true, TTL: req.Window}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return req.Key, nil // set: this key holds it now
	case err != nil:
		return "", classify(opReference, req.Reference, err)
	}
	return holder, nil
}

// NoteReuse implements driver.ReferenceIndex: XADD to ReusesKey, capped
// at about 10,000 entries.
func (s *Store) NoteReuse(ctx context.Context, u driver.ReferenceReuse) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	action := "flagged"
	if u.Refused {
		action = "refused"
	}
	err := s.client.XAdd(ctx, &redis.XAddArgs{Stream: s.ReusesKey(), MaxLen: reusesMax, Approx: true, Values: []any{
		"code", string(u.Reference.Code), "reference", u.Reference.Digest.Hex, "holder", u.Holder, "key", u.Key, "action", action,
	}}).Err()
	if err != nil {
		return classify(opReference, u.Reference, err)
	}
	return nil
}

// Reuses reads the newest limit entries of ReusesKey, newest first: the
// trail of business references that arrived under a second operation key
// (`worker reuses` prints it). An entry that does not decode is an error
// naming its stream ID.
func (s *Store) Reuses(ctx context.Context, limit int64) ([]driver.ReferenceReuse, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("redisstore: Reuses: limit %d: want a positive number", limit)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	msgs, err := s.client.XRevRangeN(ctx, s.ReusesKey(), "+", "-", limit).Result()
	if err != nil {
		return nil, classify(opReference, onceflow.Ref{}, err)
	}
	out := make([]driver.ReferenceReuse, 0, len(msgs))
	for _, m := range msgs {
		u, err := decodeReuse(m)
		if err != nil {
			return nil, fmt.Errorf("redisstore: %s entry %s: %w", s.ReusesKey(), m.ID, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// decodeReuse decodes one entry NoteReuse wrote.
func decodeReuse(m redis.XMessage) (driver.ReferenceReuse, error) {
	field := func(name string) string { v, _ := m.Values[name].(string); return v }
	ms, _, _ := strings.Cut(m.ID, "-")
	at, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return driver.ReferenceReuse{}, fmt.Errorf("stream ID: %w", err)
	}
	code, err := onceflow.ParseOperationCode(field("code"))
	if err != nil {
		return driver.ReferenceReuse{}, fmt.Errorf("code: %w", err)
	}
	var refused bool
	switch a := field("action"); a {
	case "refused":
		refused = true
	case "flagged":
	default:
		return driver.ReferenceReuse{}, fmt.Errorf("action %q: want flagged or refused", a)
	}
	return driver.ReferenceReuse{
		Reference: onceflow.Ref{Code: code, Digest: onceflow.Digest{Hex: field("reference")}},
		Holder:    field("holder"), Key: field("key"), Refused: refused, At: time.UnixMilli(at).UTC(),
	}, nil
}
