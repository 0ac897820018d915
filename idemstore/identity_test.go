package idemstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestEveryExecuteDrawsItsOwnOwnerAndNonce runs many Executes at once, with
// and without an owner of the caller's, on one executor (which cuts them
// from batches of random characters): every owner it drew and every nonce
// is valid and none repeats, so no two invocations can pass for one.
func TestEveryExecuteDrawsItsOwnOwnerAndNonce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	const n = 300
	var mu sync.Mutex
	owners, nonces := map[onceflow.Owner]bool{}, map[onceflow.Nonce]bool{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := request(storetest.NewFixture())
			given := i%3 == 0
			if given {
				req.Owner = onceflow.NewOwner()
			}
			_, err := e.exec.Execute(context.Background(), req, func(ctx context.Context) ([]byte, error) {
				x, _ := idemstore.ExecutionFrom(ctx)
				if err := x.Owner.Validate(); err != nil {
					t.Error(err)
				}
				if err := x.Nonce.Validate(); err != nil {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if nonces[x.Nonce] {
					t.Errorf("nonce %s drawn twice", x.Nonce)
				}
				nonces[x.Nonce] = true
				if !given {
					if owners[x.Owner] {
						t.Errorf("owner %s drawn twice", x.Owner)
					}
					owners[x.Owner] = true
				}
				return []byte("ok"), nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(nonces) != n {
		t.Fatalf("%d nonces for %d Executes", len(nonces), n)
	}
}
