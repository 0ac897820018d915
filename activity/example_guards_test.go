package activity_test

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
)

// withdrawTwiceWorkflow withdraws the same transfer twice, the second
// time under another business key: the bug of a key derived from a
// volatile field.
func withdrawTwiceWorkflow(ctx workflow.Context, in Transfer) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3}})
	var b *tellers
	var first, second string
	if err := workflow.ExecuteActivity(ctx, b.Withdraw, in).Get(ctx, &first); err != nil {
		return "", err
	}
	in.Account += "-retried" // a field that should not have been in the key
	err := workflow.ExecuteActivity(ctx, b.Withdraw, in).Get(ctx, &second)
	return first, err
}

// The guards of docs/guards.md at registration: the bank keeps a
// withdrawal's reference for 30 days, and a reference that arrives under a
// second key (here a key derived from the account field, which the
// retry changed) is refused instead of withdrawn twice.
func ExampleRefuseReusedReference() {
	env := quietSuite()
	wrapper := exampleWrapper()
	env.SetWorkerOptions(exampleWorkerOptions(wrapper))
	b := &tellers{}
	onceactivity.Register(env, wrapper, b.Withdraw,
		onceactivity.BusinessKey(func(in Transfer) string { return in.Reference + "/" + in.Account }),
		onceactivity.DownstreamKey(func(in Transfer) string { return in.Reference }),
		onceactivity.DownstreamRetention(30*24*time.Hour),
		onceactivity.RefuseReusedReference())
	env.RegisterWorkflow(withdrawTwiceWorkflow)

	env.ExecuteWorkflow(withdrawTwiceWorkflow, Transfer{Account: "85-150", Amount: 40, Reference: exampleReference()})
	var ae *temporal.ApplicationError
	errors.As(env.GetWorkflowError(), &ae)
	fmt.Println(ae.Type() == onceflow.OutcomeReferenceReused.TemporalType(), b.calls)
	// Output: true 1
}
