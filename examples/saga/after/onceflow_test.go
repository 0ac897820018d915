package saga

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/onceflowtest"
	"github.com/onceflow/onceflow/workflow"
)

// The tests the adoption added: the saga's activities run through
// onceflow, on an in-memory Redis, as they run on the worker.

// crashingBank is the test's bank: its first withdrawal happens, and then
// the worker dies (onceflowtest.Crash).
type crashingBank struct {
	*MemoryBank
	crashed atomic.Bool
}

func (b *crashingBank) Withdraw(ctx context.Context, account string, amount float32, ref string) error {
	if err := b.MemoryBank.Withdraw(ctx, account, amount, ref); err != nil {
		return err
	}
	if !b.crashed.Swap(true) {
		onceflowtest.Crash(ctx) // the worker dies right after the withdrawal
	}
	return nil
}

// TestAWorkerDeadAfterTheWithdrawalWithdrawsOnce: the worker dies right
// after the withdrawal. The next attempt waits out the dead attempt's
// lease (it spends none of the three attempts), finds the withdrawal's
// effect unknown and waits for a decision; the operator, who sees the
// withdrawal at the bank, decides it completed (the activity returns only
// an error: no result to give). The saga then goes on as it would have:
// the deposit, the failing step, the compensations in reverse order. One
// withdrawal, one compensation of it.
func TestAWorkerDeadAfterTheWithdrawalWithdrawsOnce(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	once := onceflowtest.Attach(t, env, onceflowtest.Options{Lease: 3 * time.Second})
	bank := &crashingBank{MemoryBank: NewMemoryBank(map[string]float32{"001-001": 100, "002-002": 0})}
	a := &Activities{Bank: bank}
	env.RegisterWorkflow(TransferMoney)
	onceactivity.Register(env, once.Activities, a.Withdraw)
	onceactivity.Register(env, once.Activities, a.WithdrawCompensation)
	onceactivity.Register(env, once.Activities, a.Deposit)
	onceactivity.Register(env, once.Activities, a.DepositCompensation)
	env.RegisterActivity(a.StepWithError)
	var decided atomic.Int32
	onceflowtest.Decide(env, func(p workflow.PendingRecovery) (workflow.Resolution, bool) {
		decided.Add(1)
		return workflow.Resolution{Decision: workflow.Completed, Reason: "the bank lists the withdrawal"}, p.Activity == "Withdraw" && p.NoResult
	})
	env.ExecuteWorkflow(TransferMoney, TransferDetails{Amount: 40, FromAccount: "001-001", ToAccount: "002-002", ReferenceID: "r1"})
	if err := env.GetWorkflowError(); err == nil {
		t.Fatal("the saga succeeded; its last step always fails")
	}
	var kinds []string
	for _, op := range bank.Operations() {
		kinds = append(kinds, op.Kind+" "+op.ReferenceID)
	}
	want := []string{"withdraw r1-withdraw", "deposit r1-deposit", "withdraw r1-deposit-compensation", "deposit r1-withdraw-compensation"}
	if len(kinds) != len(want) || decided.Load() != 1 {
		t.Fatalf("the bank made %q after %d decisions; want %q after one", kinds, decided.Load(), want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("the bank made %q; want %q", kinds, want)
		}
	}
	if bank.Balance("001-001") != 100 || bank.Balance("002-002") != 0 {
		t.Fatalf("balances %v and %v; want 100 and 0", bank.Balance("001-001"), bank.Balance("002-002"))
	}
}

// failingDepositBank refuses every deposit into account, as a bank that
// answers an error does.
type failingDepositBank struct {
	*MemoryBank
	account string
}

func (b *failingDepositBank) Deposit(ctx context.Context, account string, amount float32, ref string) error {
	if account == b.account {
		return errors.New("This deposit has failed.")
	}
	return b.MemoryBank.Deposit(ctx, account, amount, ref)
}

// TestAFailedDepositIsCompensatedThroughOnceflow: the bank answers the
// deposit with an error. onceflow cannot tell whether a plain error
// followed the effect, so the call waits for a decision; the operator
// fails it, and the saga's own error path runs as it did without
// onceflow: the withdrawal is compensated, and the workflow fails with the
// bank's own words.
func TestAFailedDepositIsCompensatedThroughOnceflow(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	once := onceflowtest.Attach(t, env)
	bank := &failingDepositBank{MemoryBank: NewMemoryBank(map[string]float32{"001-001": 100, "002-002": 0}), account: "002-002"}
	a := &Activities{Bank: bank}
	env.RegisterWorkflow(TransferMoney)
	onceactivity.Register(env, once.Activities, a)
	onceflowtest.Decide(env, onceflowtest.Fail("the bank confirms the deposit failed"))
	env.ExecuteWorkflow(TransferMoney, TransferDetails{Amount: 40, FromAccount: "001-001", ToAccount: "002-002", ReferenceID: "r2"})
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Message() != "This deposit has failed." {
		t.Fatalf("err %v; want the bank's own error", err)
	}
	if _, acted := workflow.MayHaveActed(err); !acted {
		t.Errorf("the failure does not say the deposit may have acted: %v", err)
	}
	if bank.Balance("001-001") != 100 || len(bank.Operations()) != 2 {
		t.Fatalf("balance %v after %+v; want the withdrawal compensated", bank.Balance("001-001"), bank.Operations())
	}
}
