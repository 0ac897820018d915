package transfer

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

func newEnv(t *testing.T, bank *MemoryBank) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(MoneyTransfer)
	env.RegisterActivity(&Activities{Bank: bank})
	return env
}

func TestTransferMovesTheMoney(t *testing.T) {
	t.Parallel()
	bank := NewMemoryBank(map[string]int{"85-150": 100, "43-812": 0})
	env := newEnv(t, bank)
	env.ExecuteWorkflow(MoneyTransfer, PaymentDetails{SourceAccount: "85-150", TargetAccount: "43-812", Amount: 40, ReferenceID: "r1"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, err %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
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

func TestInsufficientFundsIsNotRetried(t *testing.T) {
	t.Parallel()
	bank := NewMemoryBank(map[string]int{"85-150": 10, "43-812": 0})
	env := newEnv(t, bank)
	env.ExecuteWorkflow(MoneyTransfer, PaymentDetails{SourceAccount: "85-150", TargetAccount: "43-812", Amount: 40, ReferenceID: "r2"})
	var ae *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &ae) || ae.Type() != "InsufficientFundsError" || ae.NonRetryable() {
		t.Fatalf("err %v; want the bank's InsufficientFundsError", err)
	}
	if bank.Balance("85-150") != 10 {
		t.Fatalf("balance %d, want 10", bank.Balance("85-150"))
	}
}
