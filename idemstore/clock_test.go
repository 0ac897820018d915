package idemstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// TestExecutorLeaseDeadlineIgnoresTheClocksOffset: the executor's lease
// deadline is the lease the server reports left (a duration on the
// server's clock), counted on the local monotonic clock from the send of
// the confirming request; the offset between the two wall clocks never
// enters it. With the server's clock 10 minutes behind the worker's, the
// action runs (a deadline read as LeaseUntil against the worker's clock
// would have passed 10 minutes ago); 10 minutes ahead, an unrenewed lease
// still ends the action after about a lease (not 10 minutes later).
// What this does not prove (a jump of the worker's own clock mid-lease):
// docs/chaos.md#skewed-clocks.
func TestExecutorLeaseDeadlineIgnoresTheClocksOffset(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	for _, skew := range []time.Duration{-10 * time.Minute, 10 * time.Minute} {
		t.Run("server "+skew.String(), func(t *testing.T) {
			t.Parallel()
			mr := miniredis.RunT(t)
			mr.SetTime(time.Now().Add(skew)) // miniredis' TIME; it stands still
			client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = client.Close() })
			s, err := redisstore.New(redisstore.Config{Client: client, OmitShebang: true, CommandTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: s, Lease: lease})
			if err != nil {
				t.Fatal(err)
			}
			req := request(storetest.NewFixture())
			// The caller's ticks, which never come: no renewal, so the
			// deadline is the first lease's.
			req.RenewTicks = make(chan time.Time)

			began := time.Now()
			var cause error
			res, err := exec.Execute(t.Context(), req, func(ctx context.Context) ([]byte, error) {
				select {
				case <-ctx.Done():
					cause = context.Cause(ctx)
					return nil, cause
				case <-time.After(10 * lease):
					return []byte("ran"), nil
				}
			})
			took := time.Since(began)
			if err == nil || !errors.Is(cause, idemstore.ErrLeaseUnconfirmed) {
				t.Fatalf("Execute = %+v, %v; the action ended with %v: want ErrLeaseUnconfirmed", res, err, cause)
			}
			// The deadline is lease - margin after the claim was sent:
			// neither at once (a deadline 10 minutes past) nor 10 minutes
			// late.
			if took <= lease/2 || took >= 3*lease {
				t.Fatalf("the action was cancelled after %v, want about a lease (%v): at once means the deadline was read against the worker's wall clock", took, lease)
			}
		})
	}
}
