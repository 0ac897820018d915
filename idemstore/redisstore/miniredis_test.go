package redisstore_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestContractOnMiniredis runs the same scripts on miniredis, the
// in-process Redis that `cmd/worker -dev` falls back to when no
// redis-server is installed.
func TestContractOnMiniredis(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(redisstore.Config{
		Client: client, OmitShebang: true,
		// miniredis interprets Lua in Go, slowly under -race: the suite is
		// about semantics, not latency.
		CommandTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, storetest.Harness{NewStore: func(*testing.T) driver.Store { return s }})
}

// TestReadOnlyScriptsFallBackOnceWithoutEVALSHA_RO: miniredis, like Redis
// before 7.0, does not know EVALSHA_RO. The first INSPECT is told so
// ("unknown command", which proves nothing ran) and is sent again with
// EVALSHA; the store remembers, and later INSPECTs go by EVALSHA at once.
func TestReadOnlyScriptsFallBackOnceWithoutEVALSHA_RO(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	sent := map[string]int{}
	client.AddHook(countHook{func(name string) { sent[name]++ }})
	s, err := redisstore.New(redisstore.Config{Client: client, OmitShebang: true, CommandTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture()
	if _, err := s.ClaimStart(t.Context(), f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce())); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		obs, err := s.Inspect(t.Context(), f.Ref)
		if err != nil || !obs.Found || obs.Record.State != onceflow.StateExecuting {
			t.Fatalf("inspect %d on miniredis: %+v, %v", i, obs, err)
		}
	}
	if sent["evalsha_ro"] != 1 || sent["eval_ro"] != 0 {
		t.Fatalf("EVALSHA_RO sent %d times, EVAL_RO %d; want 1 and 0 (detected once)", sent["evalsha_ro"], sent["eval_ro"])
	}
}
