package redisstore_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/idemstore"
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
	storetest.Run(t, storetest.Harness{NewStore: func(*testing.T) idemstore.Store { return s }})
}
