package saga

import (
	"context"

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

// RunWorker runs the saga worker until ctx is done.
func RunWorker(ctx context.Context, cfg Config) error {
	// Create the client object just once per process
	c, err := client.Dial(client.Options{HostPort: cfg.HostPort, Namespace: cfg.Namespace})
	if err != nil {
		return err
	}
	defer c.Close()
	// This worker hosts both Workflow and Activity functions
	w, err := onceworker.NewSDKWorker(ctx, c, cfg.Redis, TransferMoneyTaskQueue, worker.Options{}, cfg.Onceflow)
	if err != nil {
		return err
	}
	w.RegisterWorkflow(TransferMoney)
	a := &Activities{Bank: cfg.Bank}
	w.RegisterActivity(a.Withdraw)
	w.RegisterActivity(a.WithdrawCompensation)
	w.RegisterActivity(a.Deposit)
	w.RegisterActivity(a.DepositCompensation)
	w.Unwrap().RegisterActivity(a.StepWithError)
	// Start listening to the Task Queue
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
