//go:build nodev

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
)

// TestWebhookSecretsFlag: -webhook-secrets names senders and their
// secrets (a sender twice: a rotation); none outside -dev is no sender,
// under -dev the public dev provider; a malformed or weak entry is
// refused without printing the secret.
func TestWebhookSecretsFlag(t *testing.T) {
	t.Parallel()
	c, err := parseWebhookSecrets(" psp=secret-old-0123456789 , psp=secret-new-0123456789,bank=bank-secret-0123456789", false)
	if err != nil || len(c.Secrets["psp"]) != 2 || len(c.Secrets["bank"]) != 1 || string(c.Secrets["psp"][1]) != "secret-new-0123456789" {
		t.Fatalf("%+v, %v", c.Secrets, err)
	}
	if c, err := parseWebhookSecrets("", false); err != nil || len(c.Secrets) != 0 {
		t.Fatalf("none: %+v, %v", c.Secrets, err)
	}
	if c, err := parseWebhookSecrets("", true); err != nil || string(c.Secrets[order.DevWebhookSender][0]) != order.DevWebhookSecret {
		t.Fatalf("-dev: %+v, %v", c.Secrets, err)
	}
	for _, bad := range []string{"psp", "=x-secret-0123456789", "psp=", "psp=short-secret", "a=same-secret-0123456789,b=same-secret-0123456789"} {
		_, err := parseWebhookSecrets(bad, false)
		if err == nil || strings.Contains(err.Error(), "secret-0123456789") || strings.Contains(err.Error(), "short-secret") {
			t.Errorf("%q: %v; want an error that does not repeat the secret", bad, err)
		}
	}
}

// TestAPIKeyCommandIssuesAndRevokes: worker api-key creates the account,
// prints a key the ledger then knows (hashed), issues a second one beside
// it, and -revoke ends one key of that account only.
func TestAPIKeyCommandIssuesAndRevokes(t *testing.T) {
	t.Parallel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
	noEnv := func(string) string { return "" }
	ctx := context.Background()
	issue := func() string {
		var out bytes.Buffer
		if err := apiKey(ctx, []string{"-ledger-dsn", dsn, "-account", "shop-42"}, noEnv, &out); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	first, second := issue(), issue()
	l, err := ledger.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, k := range []string{first, second} {
		if id, ok, err := l.AccountByAPIKey(ctx, k); !ok || err != nil || id != "shop-42" {
			t.Fatalf("key %q: %q %v %v", k, id, ok, err)
		}
	}
	var out bytes.Buffer
	if err := apiKey(ctx, []string{"-ledger-dsn", dsn, "-account", "other", "-revoke", first}, noEnv, &out); err == nil {
		t.Fatal("another account revoked shop-42's key")
	}
	if err := apiKey(ctx, []string{"-ledger-dsn", dsn, "-account", "shop-42", "-revoke", first}, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.AccountByAPIKey(ctx, first); ok {
		t.Fatal("the revoked key still authenticates")
	}
	if _, ok, _ := l.AccountByAPIKey(ctx, second); !ok {
		t.Fatal("revoking one key ended the other")
	}
	if err := apiKey(ctx, []string{"-ledger-dsn", dsn, "-account", "bad\nname"}, noEnv, &out); err == nil {
		t.Fatal("an account ID with a newline was taken")
	}
}
