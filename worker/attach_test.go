package worker_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/worker"
)

// Withdraw is a service's activity, written without onceflow.
func Withdraw(ctx context.Context, account string) (string, error) { return "W-" + account, nil }

// A service keeps its own Temporal client, SDK worker and Redis client;
// Attach plugs onceflow into them, and Register registers the activity
// under the name the workflow already calls (Withdraw).
func ExampleAttach() {
	ctx := context.Background()
	c, err := client.NewLazyClient(client.Options{HostPort: "localhost:7233"}) // the service's client.Dial
	if err != nil {
		panic(err)
	}
	defer c.Close()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()}) // the service's Redis client
	defer rdb.Close()

	once, err := worker.Attach(ctx, c, rdb, worker.AttachConfig{Secret: []byte("a secret from your secret store, 32 bytes or more")})
	if err != nil {
		panic(err)
	}
	defer once.Close()
	w := sdkworker.New(c, "transfers", sdkworker.Options{Interceptors: once.Interceptors()})
	onceactivity.Register(w, once.Activities, Withdraw)

	a, _ := once.Activities.WrappedActivity("Withdraw")
	fmt.Println(a.Name, a.Code, a.HeartbeatTimeout, a.ResultType)
	// Withdraw withdraw 10s string (TestAttachChecksThePendingAttribute)
}

// Bank is a service's struct of activities, written without onceflow.
type Bank struct{}

// Withdraw takes money: a side effect.
func (Bank) Withdraw(_ context.Context, account string) (string, error) { return "W-" + account, nil }

// Deposit gives money: a side effect, whose result is only an error.
func (Bank) Deposit(_ context.Context, account string) error { return nil }

// A service adopts onceflow where it makes its SDK worker: NewSDKWorker in
// place of sdkworker.New. Its registrations stay as they were: each
// method of the struct is wrapped, under the name the SDK gives it.
func ExampleNewSDKWorker() {
	ctx := context.Background()
	c, err := client.Dial(client.Options{HostPort: "localhost:7233"}) // the service's client.Dial
	if err != nil {
		panic(err)
	}
	defer c.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // the service's Redis client
	defer rdb.Close()

	w, err := worker.NewSDKWorker(ctx, c, rdb, "transfers", sdkworker.Options{}, worker.AttachConfig{Secret: []byte("a secret from your secret store, 32 bytes or more")})
	if err != nil {
		panic(err)
	}
	w.RegisterActivity(&Bank{}) // Withdraw and Deposit, through onceflow
	if err := w.Run(sdkworker.InterruptCh()); err != nil {
		panic(err)
	}
}
