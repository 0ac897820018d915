// Package worker assembles a onceflow worker: the Redis client (standalone,
// Sentinel or Cluster), the idempotency store and executor, the activity
// wrapper, a Temporal client and worker, and the /healthz and /readyz
// endpoints.
//
// Embed one with New and Run:
//
//	w, err := worker.New(worker.Config{
//		TemporalAddress: "temporal:7233", RedisURL: "redis://redis:6379/0",
//		Secret:   secret, // at least 32 random bytes, stable across restarts
//		Register: func(r worker.Registry) error { /* r.Worker.RegisterWorkflow(…), activity.Register(r.Worker, r.Activities, …) */ return nil },
//	})
//	if err != nil {
//		return err // the message names the setting
//	}
//	return w.Run(ctx) // until ctx ends, then a clean stop
//
// A service that keeps its own Temporal client and Redis client makes its
// SDK worker through onceflow instead (docs/adopting.md): NewSDKWorker
// returns the SDK's worker, whose RegisterActivity wraps what it
// registers, every shape the SDK accepts, under the SDK's names:
//
//	w, err := worker.NewSDKWorker(ctx, c, rdb, queue, sdkworker.Options{}, worker.AttachConfig{Secret: secret})
//	if err != nil {
//		return err
//	}
//	w.RegisterWorkflow(MoneyTransfer)
//	w.RegisterActivity(activities) // each method through onceflow
//
// Or it attaches onceflow to the clients and makes the SDK worker itself:
//
//	once, err := worker.Attach(ctx, c, rdb, worker.AttachConfig{Secret: secret})
//	if err != nil {
//		return err
//	}
//	defer once.Close()
//	w := sdkworker.New(c, queue, sdkworker.Options{Interceptors: once.Interceptors()})
//	activity.Register(w, once.Activities, a.Withdraw)
//
// Config documents every setting and its default; New fills the defaults
// in and validates the whole, in one place. The package reads no flags or
// environment variables: cmd/worker maps its flags onto a Config. The
// operator API (pending recoveries, decisions, reopen, inspect) is package
// operator.
//
// Its tests include the end-to-end suite (examples/order/internal/e2e), which runs
// against a real in-process Temporal server and a real redis-server.
package worker
