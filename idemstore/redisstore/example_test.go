package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"

	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// A claim, an execution and a replay, by hand. (The idemstore.Executor
// does all of this for you.)
func ExampleStore() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(redisstore.Config{Client: client, Namespace: "example"})
	if err != nil {
		panic(err)
	}

	digester, err := onceflow.NewDigester([]byte("a secret from your secret store"), 1)
	if err != nil {
		panic(err)
	}
	ref := onceflow.Ref{Code: "charge-payment", Digest: digester.Digest("customer-7", "order-42")}
	_ = client.Del(ctx, store.Key(ref)) // start afresh on every run
	req := driver.ClaimRequest{
		Ref:         ref,
		Operation:   "order-42/charge",
		Fingerprint: onceflow.FingerprintOf([]byte(`{"amount":1000}`)),
		Owner:       onceflow.NewOwner(),
		Codec:       "json-v2",
		Policy:      2,
		Lease:       30 * time.Second,
		Retention:   24 * time.Hour,
		Nonce:       onceflow.NewNonce(),
	}

	out, err := store.ClaimStart(ctx, req)
	if err != nil {
		panic(err)
	}
	acquired := out.(driver.Acquired)
	fmt.Println("claimed:", acquired.Record.State, "fence", acquired.Ownership.Fence())

	// ... charge the card here, then record the response:
	_, err = store.Complete(ctx, driver.CompleteRequest{
		Ownership: acquired.Ownership, Nonce: req.Nonce, Response: []byte(`{"charge":"ch_1"}`), TTL: 24 * time.Hour,
	})
	if err != nil {
		panic(err)
	}

	// A retry, by anyone, replays the stored response.
	req.Owner, req.Nonce = onceflow.NewOwner(), onceflow.NewNonce()
	out, err = store.ClaimStart(ctx, req)
	if err != nil {
		panic(err)
	}
	switch o := out.(type) {
	case driver.CompletedReplay:
		fmt.Println("replayed:", string(o.Record.Response))
	case driver.InProgress:
		fmt.Println("in progress for", o.Record.LeaseRemaining())
	}
	// Output:
	// claimed: EXECUTING fence 1.1
	// replayed: {"charge":"ch_1"}
}
