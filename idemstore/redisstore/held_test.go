package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
)

// FuzzHeldRecordsKeepTheRules: whatever record a caller says its start
// left, appendHeld packs m from it only when the packed value keeps the
// schema's rules and says what the record says, and appendCompleteHeld's
// head and tail around any time make an m that keeps them too, at the
// next revision. A stored m equal to what was packed is therefore valid:
// the scripts may compare instead of check.
func FuzzHeldRecordsKeepTheRules(f *testing.F) {
	f.Add(int64(1), int64(1), 1, int64(1796400244116), int64(1796400244116), false, "json-v2", int64(1796400244117))
	f.Add(int64(3), int64(9), 2, int64(0), int64(5), true, "proto.v1", int64(0))
	f.Add(int64(0), int64(-1), -4, int64(-1), int64(1e15), false, "JSON", int64(-3))
	f.Add(int64(1), int64(1), 1, int64(1), int64(2), false, "a:b", int64(9))
	f.Fuzz(func(t *testing.T, attempt, rev int64, policy int, created, updated int64, unc bool, codec string, now int64) {
		owner, nonce := onceflow.NewOwner(), onceflow.NewNonce()
		r := onceflow.Record{
			State: onceflow.StateExecuting, Owner: owner, Attempt: attempt, Rev: rev, Operation: "op",
			Fingerprint: onceflow.FingerprintOf([]byte("x")), Codec: codec, Policy: policy, Nonce: nonce,
			EffectUnknown: unc, CreatedAt: time.UnixMilli(created), UpdatedAt: time.UnixMilli(updated),
		}
		m, ok := appendHeld(nil, &r, owner, "op", nonce, attempt, rev)
		if !ok {
			return
		}
		vals, bad := schema.ParseMeta(string(m))
		if bad != "" {
			t.Fatalf("packed %q, which breaks %s", m, bad)
		}
		flag := ""
		if unc {
			flag = "1"
		}
		want := map[int]string{schema.FState: string(onceflow.StateExecuting), schema.FAttempt: strconv.FormatInt(attempt, 10), schema.FRev: strconv.FormatInt(rev, 10),
			schema.FPolicy: strconv.Itoa(policy), schema.FCreatedAt: strconv.FormatInt(created, 10),
			schema.FUpdatedAt: strconv.FormatInt(updated, 10), schema.FEffectUnknown: flag, schema.FSum: "", schema.FCodec: codec}
		for i, w := range want {
			if vals[i] != w {
				t.Fatalf("packed %q: %s is %q, want %q", m, schema.Fields[i].Name, vals[i], w)
			}
		}
		o := driver.Ownership{Operation: "op", Owner: owner, Attempt: attempt, Rev: rev}
		_, held, head, tail := appendCompleteHeld([]byte("before"), &r, o, nonce, "0a1b2c3d")
		if string(held) != string(m) {
			t.Fatalf("the completion packs %q, the renewal %q", held, m)
		}
		if now < 0 {
			now = -now
		}
		next := string(head) + strconv.FormatInt(now%1e15, 10) + string(tail)
		vals, bad = schema.ParseMeta(next)
		// A revision of 15 digits has no next one that keeps the rules;
		// every script (the full path too) would write it the same.
		if bad != "" && !(bad == "rev" && len(strconv.FormatInt(rev+1, 10)) > schema.MaxIntegerDigits) {
			t.Fatalf("the completion writes %q, which breaks %s", next, bad)
		}
		if bad == "" && (vals[schema.FState] != string(onceflow.StateCompleted) || vals[schema.FRev] != strconv.FormatInt(rev+1, 10) || vals[schema.FSum] != "0a1b2c3d" ||
			vals[schema.FEffectUnknown] != "" || vals[schema.FCodec] != codec || vals[schema.FCreatedAt] != strconv.FormatInt(created, 10)) {
			t.Fatalf("the completion writes %q from %q", next, m)
		}
	})
}
