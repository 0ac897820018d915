package transfer

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/onceflowtest"
)

// The tests the adoption added: the workflow's activities run through
// onceflow, on an in-memory Redis, as they run on the worker.

func newOnceEnv(t *testing.T, bank *MemoryBank) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	once := onceflowtest.Attach(t, env)
	env.RegisterWorkflow(MoneyTransfer)
	activities := &Activities{Bank: bank}
	onceactivity.Register(env, once.Activities, activities.Withdraw)
	onceactivity.Register(env, once.Activities, activities.Deposit)
	return env
}

func TestTransferThroughOnceflow(t *testing.T) {
	t.Parallel()
	bank := NewMemoryBank(map[string]int{"85-150": 100, "43-812": 0})
	env := newOnceEnv(t, bank)
	env.ExecuteWorkflow(MoneyTransfer, PaymentDetails{SourceAccount: "85-150", TargetAccount: "43-812", Amount: 40, ReferenceID: "r1"})
	var result string
	if err := env.GetWorkflowResult(&result); err != nil {
		t.Fatal(err)
	}
	if want := "Transfer complete (transaction IDs: W-r1-withdrawal, D-r1-deposit)"; result != want {
		t.Fatalf("result %q, want %q", result, want)
	}
	if bank.Balance("85-150") != 60 || bank.Balance("43-812") != 40 {
		t.Fatalf("balances %d and %d, want 60 and 40", bank.Balance("85-150"), bank.Balance("43-812"))
	}
}

// TestInsufficientFundsStaysTheBanksError: through onceflow, the bank's
// refusal is still the bank's InsufficientFundsError, which the workflow's
// RetryPolicy does not retry; it opens no incident.
func TestInsufficientFundsStaysTheBanksError(t *testing.T) {
	t.Parallel()
	bank := NewMemoryBank(map[string]int{"85-150": 10, "43-812": 0})
	env := newOnceEnv(t, bank)
	env.ExecuteWorkflow(MoneyTransfer, PaymentDetails{SourceAccount: "85-150", TargetAccount: "43-812", Amount: 40, ReferenceID: "r2"})
	var ae *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &ae) || ae.Type() != "InsufficientFundsError" || ae.Message() != "insufficient funds" {
		t.Fatalf("err %v; want the bank's InsufficientFundsError", err)
	}
	if bank.Balance("85-150") != 10 {
		t.Fatalf("balance %d, want 10", bank.Balance("85-150"))
	}
}
