package saga

import (
	"context"
	"errors"
	"fmt"
)

// Activities are the saga's activities, on a bank.
type Activities struct {
	Bank Bank
}

func (a *Activities) Withdraw(ctx context.Context, transferDetails TransferDetails) error {
	fmt.Printf(
		"\nWithdrawing $%f from account %s. ReferenceId: %s\n",
		transferDetails.Amount,
		transferDetails.FromAccount,
		transferDetails.ReferenceID,
	)

	return a.Bank.Withdraw(ctx, transferDetails.FromAccount, transferDetails.Amount, transferDetails.ReferenceID+"-withdraw")
}

func (a *Activities) WithdrawCompensation(ctx context.Context, transferDetails TransferDetails) error {
	fmt.Printf(
		"\nWithdrawing compensation $%f from account %s. ReferenceId: %s\n",
		transferDetails.Amount,
		transferDetails.FromAccount,
		transferDetails.ReferenceID,
	)

	return a.Bank.Deposit(ctx, transferDetails.FromAccount, transferDetails.Amount, transferDetails.ReferenceID+"-withdraw-compensation")
}

func (a *Activities) Deposit(ctx context.Context, transferDetails TransferDetails) error {
	fmt.Printf(
		"\nDepositing $%f into account %s. ReferenceId: %s\n",
		transferDetails.Amount,
		transferDetails.ToAccount,
		transferDetails.ReferenceID,
	)

	return a.Bank.Deposit(ctx, transferDetails.ToAccount, transferDetails.Amount, transferDetails.ReferenceID+"-deposit")
}

func (a *Activities) DepositCompensation(ctx context.Context, transferDetails TransferDetails) error {
	fmt.Printf(
		"\nDepositing compensation $%f into account %s. ReferenceId: %s\n",
		transferDetails.Amount,
		transferDetails.ToAccount,
		transferDetails.ReferenceID,
	)

	return a.Bank.Withdraw(ctx, transferDetails.ToAccount, transferDetails.Amount, transferDetails.ReferenceID+"-deposit-compensation")
}

func (a *Activities) StepWithError(ctx context.Context, transferDetails TransferDetails) error {
	fmt.Printf(
		"\nSimulate failure to trigger compensation. ReferenceId: %s\n",
		transferDetails.ReferenceID,
	)

	return errors.New("some error")
}
