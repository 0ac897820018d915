package transfer

import (
	"context"
	"fmt"
	"sync"
)

// InsufficientFundsError is the bank's refusal of a withdrawal larger than
// the balance. The workflow does not retry it.
type InsufficientFundsError struct{}

func (m *InsufficientFundsError) Error() string { return "insufficient funds" }

// InvalidAccountError is the bank's refusal of an account it does not
// know. The workflow does not retry it.
type InvalidAccountError struct{}

func (m *InvalidAccountError) Error() string { return "account number supplied is invalid" }

// Bank is the banking service the activities call.
type Bank interface {
	// Withdraw takes amount from account and returns a confirmation.
	Withdraw(ctx context.Context, account string, amount int, referenceID string) (string, error)
	// Deposit adds amount to account and returns a confirmation.
	Deposit(ctx context.Context, account string, amount int, referenceID string) (string, error)
}

// MemoryBank is a Bank in memory, for tests and demos.
type MemoryBank struct {
	mu       sync.Mutex
	balances map[string]int
}

// NewMemoryBank returns a bank with these accounts and balances.
func NewMemoryBank(balances map[string]int) *MemoryBank {
	b := &MemoryBank{balances: map[string]int{}}
	for k, v := range balances {
		b.balances[k] = v
	}
	return b
}

// Withdraw implements Bank.
func (b *MemoryBank) Withdraw(_ context.Context, account string, amount int, referenceID string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	balance, ok := b.balances[account]
	switch {
	case !ok:
		return "", &InvalidAccountError{}
	case amount > balance:
		return "", &InsufficientFundsError{}
	}
	b.balances[account] = balance - amount
	return fmt.Sprintf("W-%s", referenceID), nil
}

// Deposit implements Bank.
func (b *MemoryBank) Deposit(_ context.Context, account string, amount int, referenceID string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.balances[account]; !ok {
		return "", &InvalidAccountError{}
	}
	b.balances[account] += amount
	return fmt.Sprintf("D-%s", referenceID), nil
}

// Balance returns the account's balance.
func (b *MemoryBank) Balance(account string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.balances[account]
}
