package saga

import (
	"context"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// Config says where the worker connects and which bank it uses.
type Config struct {
	HostPort  string
	Namespace string
	Bank      Bank
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
	w := worker.New(c, TransferMoneyTaskQueue, worker.Options{})
	w.RegisterWorkflow(TransferMoney)
	a := &Activities{Bank: cfg.Bank}
	w.RegisterActivity(a.Withdraw)
	w.RegisterActivity(a.WithdrawCompensation)
	w.RegisterActivity(a.Deposit)
	w.RegisterActivity(a.DepositCompensation)
	w.RegisterActivity(a.StepWithError)
	// Start listening to the Task Queue
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
