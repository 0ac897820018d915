package redisstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redisproc"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// noScripting is a server configuration that leaves no Lua scripting, as
// Valkey 9.1 with its Lua module unloaded, or a managed service that
// disables EVAL, leaves it: the commands are unknown.
const noScripting = "rename-command EVAL eval-disabled-for-the-test\n" +
	"rename-command EVALSHA evalsha-disabled-for-the-test\n" +
	"rename-command EVAL_RO eval-ro-disabled-for-the-test\n" +
	"rename-command EVALSHA_RO evalsha-ro-disabled-for-the-test\n"

// TestScriptingProbe: a server without Lua scripting, or an ACL user
// without @scripting, is refused by CheckCapabilities with an error that
// names what is missing and what to do; before, the store found out on
// the first operation.
func TestScriptingProbe(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if err := newStore(t, redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)}).CheckCapabilities(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("no scripting", func(t *testing.T) {
		t.Parallel()
		srv, err := redisproc.StartArgs(t.TempDir(), 0, noScripting)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		s := newStore(t, redisstore.Config{Client: redistest.NewClient(t, srv.Addr())})
		err = s.CheckCapabilities(ctx)
		if !errors.Is(err, redisstore.ErrMissingCapability) {
			t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrMissingCapability)
		}
		var ce *redisstore.CapabilityError
		if !errors.As(err, &ce) {
			t.Fatalf("err = %v, want a %T", err, ce)
		}
		if ce.Addr != srv.Addr() {
			t.Fatalf("got %q, want %q", ce.Addr, srv.Addr())
		}
		if len(ce.Missing) != 2 {
			t.Fatalf("EVAL and EVALSHA; EVALSHA_RO is optional when unknown: len = %d, want %d: %v", len(ce.Missing), 2, ce.Missing)
		}
		if !strings.Contains(ce.Missing[0], "Lua scripting (EVAL)") {
			t.Fatalf("%q does not contain %q", ce.Missing[0], "Lua scripting (EVAL)")
		}
		if !strings.Contains(ce.Missing[0], "unknown command") {
			t.Fatalf("%q does not contain %q", ce.Missing[0], "unknown command")
		}
		if !strings.Contains(ce.Missing[0], "Lua module") {
			t.Fatalf("%q does not contain %q", ce.Missing[0], "Lua module")
		}
		// What the probe saves one from: the first operation fails.
		f := storetest.NewFixture()
		_, err = s.Claim(ctx, f.Claim(onceflow.NewOwner()))
		if err == nil {
			t.Fatal("got no error, want one")
		}
	})

	t.Run("ACL user without scripting", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		admin := redistest.NewClient(t, srv.Addr())
		if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">app-password", "~*", "&*", "+@all", "-@scripting").Err(); err != nil {
			t.Fatal(err)
		}
		app := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "app", Password: "app-password", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = app.Close() })
		err := newStore(t, redisstore.Config{Client: app, Durability: redisstore.DurabilityReplicas}).CheckCapabilities(ctx)
		var ce *redisstore.CapabilityError
		if !errors.As(err, &ce) {
			t.Fatalf("err = %v, want a %T", err, ce)
		}
		if len(ce.Missing) != 3 {
			t.Fatalf("EVAL, EVALSHA and EVALSHA_RO refused; PUBLISH and WAIT allowed: len = %d, want %d: %v", len(ce.Missing), 3, ce.Missing)
		}
		for _, m := range ce.Missing {
			if !strings.Contains(m, "NOPERM") {
				t.Fatalf("%q does not contain %q", m, "NOPERM")
			}
			if !strings.Contains(m, "+@scripting") {
				t.Fatalf("%q does not contain %q", m, "+@scripting")
			}
		}
	})
}
