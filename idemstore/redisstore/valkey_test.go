package redisstore_test

import (
	"os"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/harness/redisproc"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestContractOnValkey runs the store contract suite on a Valkey server,
// checking first that the server the tests run on is one: scripts/test
// runs this package and the executor's with ONCEFLOW_REDIS_SERVER naming
// Debian's valkey-server, and a run that silently fell back to
// redis-server would prove nothing about Valkey. Without a Valkey server
// named, it is skipped.
func TestContractOnValkey(t *testing.T) {
	t.Parallel()
	if !strings.Contains(os.Getenv(redisproc.EnvServer), "valkey") {
		t.Skipf("$%s names no valkey-server: scripts/test runs this on Valkey", redisproc.EnvServer)
	}
	info, err := redistest.Client(t).Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "valkey_version:") {
		t.Fatalf("$%s names %s, but the server's INFO names no valkey_version:\n%s", redisproc.EnvServer, os.Getenv(redisproc.EnvServer), info)
	}
	s := newStore(t, redisstore.Config{Client: redistest.Client(t), Namespace: redistest.Namespace(t)})
	if err := s.CheckCapabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, storetest.Harness{NewStore: func(*testing.T) driver.Store { return s }})
}
