package worker

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/onceflow/onceflow/activity"
)

// SDKWorker is an SDK worker (go.temporal.io/sdk/worker.Worker) with onceflow
// attached, for a service that adopts onceflow without changing how it
// registers its activities: RegisterActivity and
// RegisterActivityWithOptions wrap what they register (activity.Register:
// every shape the SDK accepts, a struct's methods included, under the
// names the SDK gives them), the workflows get onceflow's interceptors,
// and Stop (or the end of Run) closes onceflow after the SDK worker
// stopped. Everything else is the SDK worker's.
//
// An activity without side effects, which needs no record, is registered
// on Unwrap() instead. Per-activity options (a Reconcile, a business key)
// go through activity.Register on the Worker itself:
//
//	onceactivity.Register(w, w.Once.Activities, activities, onceactivity.Method("Withdraw", onceactivity.Reconcile(...)))
type SDKWorker struct {
	sdkworker.Worker
	// Once is onceflow attached to the worker's clients.
	Once *Attached
}

// NewSDKWorker attaches onceflow (Attach) to c and the Redis client rdb and
// makes the SDK worker of taskQueue with options, onceflow's interceptors
// appended to options.Interceptors: the worker.New of a service that
// adopts onceflow. It does not close c or rdb.
func NewSDKWorker(ctx context.Context, c client.Client, rdb redis.UniversalClient, taskQueue string, options sdkworker.Options, cfg AttachConfig) (*SDKWorker, error) {
	once, err := Attach(ctx, c, rdb, cfg)
	if err != nil {
		return nil, err
	}
	options.Interceptors = append(options.Interceptors, once.Interceptors()...)
	return &SDKWorker{Worker: sdkworker.New(c, taskQueue, options), Once: once}, nil
}

// RegisterActivity wraps a and registers it, as activity.Register does,
// with no options; it panics as the SDK's RegisterActivity does on an
// activity it cannot register.
func (w *SDKWorker) RegisterActivity(a any) {
	activity.Register(w.Worker, w.Once.Activities, a)
}

// RegisterActivityWithOptions wraps a and registers it under options.Name
// (for a struct, the prefix of its methods' names), as the SDK's
// RegisterActivityWithOptions names it. Of the SDK's options only the name
// applies; SkipInvalidStructFunctions and DisableAlreadyRegisteredCheck
// are refused: onceflow registers each activity once, and every method of
// a struct.
func (w *SDKWorker) RegisterActivityWithOptions(a any, options sdkactivity.RegisterOptions) {
	if options.SkipInvalidStructFunctions || options.DisableAlreadyRegisteredCheck {
		panic(errors.New("worker: RegisterActivityWithOptions: onceflow registers every method of a struct, once; " +
			"register an activity with SkipInvalidStructFunctions or DisableAlreadyRegisteredCheck on Unwrap(), without onceflow"))
	}
	var opts []activity.Option
	if options.Name != "" {
		opts = append(opts, activity.Name(options.Name))
	}
	activity.Register(w.Worker, w.Once.Activities, a, opts...)
}

// SDKRegistry is the SDK worker beneath, where activity.Register registers
// when it is given the Worker.
func (w *SDKWorker) SDKRegistry() activity.Registry { return w.Worker }

// Unwrap returns the SDK worker, to register an activity onceflow must not
// wrap (one without side effects).
func (w *SDKWorker) Unwrap() sdkworker.Worker { return w.Worker }

// Stop stops the SDK worker, then closes onceflow (Attached.Close): the
// activities still running record their outcome.
func (w *SDKWorker) Stop() {
	w.Worker.Stop()
	if err := w.Once.Close(); err != nil {
		w.Once.cfg.Logger.Warn("onceflow: closing after the worker stopped", "err", err)
	}
}

// Run runs the SDK worker until interruptCh delivers (see the SDK's
// Worker.Run), then closes onceflow.
func (w *SDKWorker) Run(interruptCh <-chan any) error {
	err := w.Worker.Run(interruptCh)
	return errors.Join(err, w.Once.Close())
}
