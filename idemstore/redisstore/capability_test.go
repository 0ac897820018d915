package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
	"github.com/onceflow/onceflow/internal/redisproc"
	"github.com/onceflow/onceflow/internal/redistest"
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
	require.NoError(t, newStore(t, redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)}).CheckCapabilities(ctx))

	t.Run("no scripting", func(t *testing.T) {
		t.Parallel()
		srv, err := redisproc.StartArgs(t.TempDir(), 0, noScripting)
		require.NoError(t, err)
		t.Cleanup(srv.Close)
		s := newStore(t, redisstore.Config{Client: redistest.NewClient(t, srv.Addr())})
		err = s.CheckCapabilities(ctx)
		require.ErrorIs(t, err, redisstore.ErrMissingCapability)
		var ce *redisstore.CapabilityError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, srv.Addr(), ce.Addr)
		require.Len(t, ce.Missing, 2, "EVAL and EVALSHA; EVALSHA_RO is optional when unknown")
		require.Contains(t, ce.Missing[0], "Lua scripting (EVAL)")
		require.Contains(t, ce.Missing[0], "unknown command")
		require.Contains(t, ce.Missing[0], "Lua module")
		// What the probe saves one from: the first operation fails.
		f := storetest.NewFixture()
		_, err = s.Claim(ctx, f.Claim(driver.NewOwner()))
		require.Error(t, err)
	})

	t.Run("ACL user without scripting", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		admin := redistest.NewClient(t, srv.Addr())
		require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">app-password", "~*", "&*", "+@all", "-@scripting").Err())
		app := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "app", Password: "app-password", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = app.Close() })
		err := newStore(t, redisstore.Config{Client: app, Durability: redisstore.DurabilityReplicas}).CheckCapabilities(ctx)
		var ce *redisstore.CapabilityError
		require.ErrorAs(t, err, &ce)
		require.Len(t, ce.Missing, 3, "EVAL, EVALSHA and EVALSHA_RO refused; PUBLISH and WAIT allowed")
		for _, m := range ce.Missing {
			require.Contains(t, m, "NOPERM")
			require.Contains(t, m, "+@scripting")
		}
	})
}
