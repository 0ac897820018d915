package redisstore

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// The tests name a record's fields as schema.Fields does; these helpers
// map a name to where the stored layout keeps it: a field of its own
// under its key (Field.Key), or a part of the packed field
// schema.MetaField. A value is read and written as the record keeps it
// (the owner, fingerprint and nonce raw: raw turns hex into that), so a
// test can plant any garble. A name that is no field of the schema (a
// response chunk, m, anything else) is the hash field of that name.

// storedKey is the hash field that keeps field, when not a part of m.
func storedKey(field string) string {
	for _, f := range schema.Fields {
		if f.Name == field && f.Key != "" {
			return f.Key
		}
	}
	return field
}

// raw is the form the record keeps a hex owner, fingerprint or nonce in.
func raw[T ~string](h T) string { return string(appendRaw(nil, string(h))) }

// metaPart returns the position of field in schema.MetaField, or -1.
func metaPart(field string) int {
	for n, i := range schema.MetaParts {
		if schema.Fields[i].Name == field {
			return n
		}
	}
	return -1
}

// getField reads one field of a record as the tests name it, and whether
// it is there (a packed part is there when not empty, uncertain when "1").
func getField(ctx context.Context, client redis.Cmdable, key, field string) (string, bool, error) {
	n := metaPart(field)
	if n < 0 {
		v, err := client.HGet(ctx, key, storedKey(field)).Result()
		if err == redis.Nil {
			return "", false, nil
		}
		return v, err == nil, err
	}
	m, err := client.HGet(ctx, key, schema.MetaField).Result()
	if err == redis.Nil {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	parts := strings.Split(m, string(schema.MetaSep))
	if n >= len(parts) {
		return "", false, nil
	}
	v := parts[n]
	if field == "uncertain" {
		return v, v == "1", nil
	}
	return v, v != "", nil
}

// setField writes one field of a record as the tests name it; value
// "(missing)" deletes it (a packed part is left empty, which is how m
// says a sum is missing and breaks every other part's rule).
func setField(ctx context.Context, client redis.Cmdable, key, field, value string) error {
	n := metaPart(field)
	if n < 0 {
		if value == "(missing)" {
			return client.HDel(ctx, key, storedKey(field)).Err()
		}
		return client.HSet(ctx, key, storedKey(field), value).Err()
	}
	m, err := client.HGet(ctx, key, schema.MetaField).Result()
	if err != nil {
		return err
	}
	parts := strings.Split(m, string(schema.MetaSep))
	if value == "(missing)" {
		value = ""
	}
	parts[n] = value
	return client.HSet(ctx, key, schema.MetaField, strings.Join(parts, string(schema.MetaSep))).Err()
}

// TestFieldHelpersMatchTheStore checks the helpers against the store: the
// fields of an EXECUTING and a COMPLETED record read through getField
// are the ones Inspect decodes, and a part written with setField is read
// by the scripts as that field.
func TestFieldHelpersMatchTheStore(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	s := testStore(t, Config{Client: client, Namespace: redistest.Namespace(t)})
	ctx := context.Background()
	f := storetest.NewFixture()
	owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
	if _, err := s.ClaimStart(ctx, f.ClaimStart(owner, nonce)); err != nil {
		t.Fatal(err)
	}
	key := s.Key(f.Ref)
	obs, err := s.Inspect(ctx, f.Ref)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"state": string(obs.Record.State), "owner": raw(owner), "op": string(f.Operation), "fp": raw(f.Fingerprint),
		"nonce": raw(nonce), "codec": f.Codec, "attempt": "1", "rev": "1", "uncertain": "0", "sum": "",
	}
	for field, v := range want {
		got, _, err := getField(ctx, client, key, field)
		if err != nil || got != v {
			t.Errorf("getField(%s) = %q, %v; want %q", field, got, err, v)
		}
	}
	// An EXECUTING record holds every stored field but reason, and m,
	// under their keys.
	keys, err := client.HKeys(ctx, key).Result()
	if want := []string{"o", "op", "f", "l", "n", schema.MetaField}; err != nil || !slices.Equal(keys, want) {
		t.Errorf("an EXECUTING record holds %q (%v), want %q", keys, err, want)
	}
	if err := setField(ctx, client, key, "rev", "7"); err != nil {
		t.Fatal(err)
	}
	if obs, err := s.Inspect(ctx, f.Ref); err != nil || obs.Record.Rev != 7 {
		t.Fatalf("after setField(rev, 7), Inspect = %+v, %v", obs.Record, err)
	}
}
