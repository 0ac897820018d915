package transfer

import (
	"context"
	"fmt"
)

// Activities are the transfer's activities, on a bank.
type Activities struct {
	Bank Bank
}

// Withdraw takes the amount from the source account.
func (a *Activities) Withdraw(ctx context.Context, data PaymentDetails) (string, error) {
	referenceID := fmt.Sprintf("%s-withdrawal", data.ReferenceID)
	return a.Bank.Withdraw(ctx, data.SourceAccount, data.Amount, referenceID)
}

// Deposit adds the amount to the target account.
func (a *Activities) Deposit(ctx context.Context, data PaymentDetails) (string, error) {
	referenceID := fmt.Sprintf("%s-deposit", data.ReferenceID)
	return a.Bank.Deposit(ctx, data.TargetAccount, data.Amount, referenceID)
}
