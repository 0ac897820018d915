package idemstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// The executor's contract: the action runs once, a retry replays its
// response, and a payload that does not match the key is refused.
func ExampleExecutor() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(redisstore.Config{Client: client, Namespace: "example-executor"})
	if err != nil {
		panic(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store}) // lease 30s, replay 24h, json-v2
	if err != nil {
		panic(err)
	}
	digester, err := onceflow.NewDigester([]byte("a secret from your secret store"), 1)
	if err != nil {
		panic(err)
	}

	ref := onceflow.Ref{Code: "charge-payment", Digest: digester.Digest("customer-7", "order-42")}
	_ = client.Del(ctx, store.Key(ref)) // start afresh on every run
	req := idemstore.Request{
		Ref:         ref,
		Operation:   "order-42/charge",
		Fingerprint: onceflow.FingerprintOf([]byte(`{"amount":1000}`)),
	}
	charge := func(ctx context.Context) ([]byte, error) {
		// Pass the operation key to the provider as its own idempotency
		// key. Wrap a decline in idemstore.RetryableNoEffect.
		x, _ := idemstore.ExecutionFrom(ctx)
		fmt.Println("charging, provider key", x.Key() != "")
		return []byte(`{"charge":"ch_1"}`), nil
	}

	for range 2 {
		res, err := exec.Execute(ctx, req, charge)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Outcome, string(res.Response))
	}

	req.Fingerprint = onceflow.FingerprintOf([]byte(`{"amount":999999}`))
	_, err = exec.Execute(ctx, req, charge)
	fmt.Println(errors.Is(err, onceflow.OutcomeFingerprintMismatch))
	// Output:
	// charging, provider key true
	// ran {"charge":"ch_1"}
	// replayed {"charge":"ch_1"}
	// true
}
