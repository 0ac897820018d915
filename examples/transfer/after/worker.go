package transfer

import (
	"context"

	onceactivity "github.com/onceflow/onceflow/activity"
	onceworker "github.com/onceflow/onceflow/worker"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// Config says where the worker connects and which bank it uses.
type Config struct {
	HostPort  string
	Namespace string
	Bank      Bank
	Redis     redis.UniversalClient
	Onceflow  onceworker.AttachConfig
}

// RunWorker runs the transfer worker until ctx is done.
func RunWorker(ctx context.Context, cfg Config) error {
	c, err := client.Dial(client.Options{HostPort: cfg.HostPort, Namespace: cfg.Namespace})
	if err != nil {
		return err
	}
	defer c.Close()

	once, err := onceworker.Attach(ctx, c, cfg.Redis, cfg.Onceflow)
	if err != nil {
		return err
	}
	defer once.Close()
	w := worker.New(c, MoneyTransferTaskQueueName, worker.Options{Interceptors: once.Interceptors()})
	w.RegisterWorkflow(MoneyTransfer)
	activities := &Activities{Bank: cfg.Bank}
	onceactivity.Register(w, once.Activities, activities.Withdraw, "withdraw")
	onceactivity.Register(w, once.Activities, activities.Deposit, "deposit")

	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
