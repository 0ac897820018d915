package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/examples/order/ledger"
)

// TestAPIKeysAreHashedAtRestAndRotate: an issued key finds its account,
// the ledger holds no key in clear, an account may hold two keys at once
// (rotation), a revoked or unknown key finds no one, and a key cannot
// move to another account.
func TestAPIKeysAreHashedAtRestAndRotate(t *testing.T) {
	t.Parallel()
	eachLedger(t, func(t *testing.T, fresh func(*testing.T) string, open func(*testing.T, string) *sql.DB) {
		ctx := context.Background()
		dsn := fresh(t)
		l := openLedger(t, dsn)
		if _, err := l.IssueAPIKey(ctx, "acct-none"); !errors.Is(err, ledger.ErrUnknownAccount) {
			t.Fatalf("a key for an account that does not exist: %v", err)
		}
		for _, id := range []string{"acct-1", "acct-2"} {
			if err := l.CreateAccount(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.CreateAccount(ctx, "acct-1"); err != nil { // again: a no-op
			t.Fatal(err)
		}
		old, err := l.IssueAPIKey(ctx, "acct-1")
		if err != nil {
			t.Fatal(err)
		}
		rotated, err := l.IssueAPIKey(ctx, "acct-1")
		if err != nil || rotated == old || !strings.HasPrefix(rotated, ledger.APIKeyPrefix) {
			t.Fatalf("second key %q (%v)", rotated, err)
		}
		for _, k := range []string{old, rotated} {
			if id, ok, err := l.AccountByAPIKey(ctx, k); err != nil || !ok || id != "acct-1" {
				t.Fatalf("key %q: %q %v %v", k, id, ok, err)
			}
		}
		// At rest: hashes only.
		var stored []string
		rows, err := open(t, dsn).QueryContext(ctx, "SELECT key_hash FROM api_keys")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var h string
			if err := rows.Scan(&h); err != nil {
				t.Fatal(err)
			}
			stored = append(stored, h)
		}
		rows.Close()
		if len(stored) != 2 {
			t.Fatalf("want two stored keys, got %q", stored)
		}
		for _, h := range stored {
			if h == old || h == rotated || len(h) != 64 {
				t.Fatalf("a key is stored as %q, not as its SHA-256", h)
			}
		}
		if ok, err := l.RevokeAPIKey(ctx, old); !ok || err != nil {
			t.Fatalf("revoke: %v %v", ok, err)
		}
		if _, ok, err := l.AccountByAPIKey(ctx, old); ok || err != nil {
			t.Fatalf("a revoked key still authenticates: %v %v", ok, err)
		}
		if id, ok, _ := l.AccountByAPIKey(ctx, rotated); !ok || id != "acct-1" {
			t.Fatal("revoking one key ended the other")
		}
		for _, bad := range []string{"", "short", ledger.NewAPIKey(), rotated + "x", " " + rotated, strings.Repeat("k", ledger.MaxAPIKeyLen+1)} {
			if id, ok, err := l.AccountByAPIKey(ctx, bad); ok || err != nil {
				t.Fatalf("key %q found %q (%v)", bad, id, err)
			}
		}
		if err := l.AddAPIKey(ctx, "acct-2", rotated); err == nil {
			t.Fatal("acct-2 took acct-1's key")
		}
		if err := l.CreateAccount(ctx, "acct\n1"); err == nil {
			t.Fatal("an account ID with a newline was created")
		}
	})
}
