package redisstore_test

import (
	"go.uber.org/goleak"
	"testing"

	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestMain runs the tests with the shared Redis up, then checks that no
// goroutine (a renewal, a heartbeat, a guarded call) outlived them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.MainM(m)) }

func newStore(tb testing.TB, cfg redisstore.Config) *redisstore.Store {
	tb.Helper()
	if cfg.Client == nil {
		cfg.Client = redistest.Client(tb)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = redistest.Namespace(tb)
	}
	s, err := redisstore.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	t.Parallel()
	s := newStore(t, redisstore.Config{})
	storetest.Run(t, storetest.Harness{
		NewStore: func(*testing.T) driver.Store { return s },
	})
}
