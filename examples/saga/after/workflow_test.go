package saga

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// newEnv is a test environment with the workflow and the activities
// registered as the worker registers them, on bank.
func newEnv(bank Bank) *testsuite.TestWorkflowEnvironment {
	testSuite := &testsuite.WorkflowTestSuite{}
	env := testSuite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(TransferMoney)
	a := &Activities{Bank: bank}
	env.RegisterActivity(a.Withdraw)
	env.RegisterActivity(a.WithdrawCompensation)
	env.RegisterActivity(a.Deposit)
	env.RegisterActivity(a.DepositCompensation)
	env.RegisterActivity(a.StepWithError)
	return env
}

// Test_Workflow is the upstream sample's test, on a MemoryBank instead of
// activity mocks: the failing step fails the workflow.
func Test_Workflow(t *testing.T) {
	bank := NewMemoryBank(map[string]float32{"001-001": 100, "002-002": 0})
	env := newEnv(bank)
	testDetails := TransferDetails{
		Amount:      1.00,
		FromAccount: "001-001",
		ToAccount:   "002-002",
		ReferenceID: "1234",
	}
	env.ExecuteWorkflow(TransferMoney, testDetails)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow not completed")
	}
	if env.GetWorkflowError() == nil {
		t.Fatal("workflow succeeded; want the failing step's error")
	}
}

// TestCompensationsRunInReverseOrder: the step fails its three attempts,
// then the deposit and the withdrawal are compensated, in that order, and
// the workflow fails with the step's error.
func TestCompensationsRunInReverseOrder(t *testing.T) {
	t.Parallel()
	bank := NewMemoryBank(map[string]float32{"001-001": 100, "002-002": 0})
	env := newEnv(bank)
	var stepAttempts atomic.Int32
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "StepWithError" {
			stepAttempts.Add(1)
		}
	})
	env.ExecuteWorkflow(TransferMoney, TransferDetails{Amount: 1.00, FromAccount: "001-001", ToAccount: "002-002", ReferenceID: "1234"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow not completed")
	}
	var activityErr *temporal.ActivityError
	var ae *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &activityErr) || !errors.As(err, &ae) || ae.Error() != "some error" {
		t.Fatalf("workflow error %v; want StepWithError's activity error %q", err, "some error")
	}
	if n := stepAttempts.Load(); n != 3 {
		t.Fatalf("StepWithError ran %d times; want 3 (MaximumAttempts)", n)
	}
	want := []Operation{
		{Kind: "withdraw", Account: "001-001", Amount: 1, ReferenceID: "1234-withdraw"},
		{Kind: "deposit", Account: "002-002", Amount: 1, ReferenceID: "1234-deposit"},
		{Kind: "withdraw", Account: "002-002", Amount: 1, ReferenceID: "1234-deposit-compensation"},
		{Kind: "deposit", Account: "001-001", Amount: 1, ReferenceID: "1234-withdraw-compensation"},
	}
	if got := bank.Operations(); !slices.Equal(got, want) {
		t.Fatalf("operations\n%v\nwant\n%v", got, want)
	}
	if bank.Balance("001-001") != 100 || bank.Balance("002-002") != 0 {
		t.Fatalf("balances %v and %v; want 100 and 0", bank.Balance("001-001"), bank.Balance("002-002"))
	}
}

// TestTransferMoneySucceeds: with a step that succeeds in place of
// StepWithError, the money moves and nothing is compensated.
func TestTransferMoneySucceeds(t *testing.T) {
	t.Parallel()
	bank := NewMemoryBank(map[string]float32{"001-001": 100, "002-002": 0})
	testSuite := &testsuite.WorkflowTestSuite{}
	env := testSuite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(TransferMoney)
	a := &Activities{Bank: bank}
	env.RegisterActivity(a.Withdraw)
	env.RegisterActivity(a.WithdrawCompensation)
	env.RegisterActivity(a.Deposit)
	env.RegisterActivity(a.DepositCompensation)
	env.RegisterActivityWithOptions(func(context.Context, TransferDetails) error { return nil }, activity.RegisterOptions{Name: "StepWithError"})
	env.ExecuteWorkflow(TransferMoney, TransferDetails{Amount: 54.99, FromAccount: "001-001", ToAccount: "002-002", ReferenceID: "5678"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, err %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	want := []Operation{
		{Kind: "withdraw", Account: "001-001", Amount: 54.99, ReferenceID: "5678-withdraw"},
		{Kind: "deposit", Account: "002-002", Amount: 54.99, ReferenceID: "5678-deposit"},
	}
	if got := bank.Operations(); !slices.Equal(got, want) {
		t.Fatalf("operations\n%v\nwant\n%v", got, want)
	}
	if bank.Balance("001-001") != 100-float32(54.99) || bank.Balance("002-002") != 54.99 {
		t.Fatalf("balances %v and %v; want 45.01 and 54.99", bank.Balance("001-001"), bank.Balance("002-002"))
	}
}
