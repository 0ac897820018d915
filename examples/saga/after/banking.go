package saga

import (
	"context"
	"sync"
)

// Bank is the banking service the activities call. The upstream sample's
// activities only print; this copy's act on a Bank, so that tests can
// count what they did.
type Bank interface {
	// Withdraw takes amount from account; referenceID names the operation.
	Withdraw(ctx context.Context, account string, amount float32, referenceID string) error
	// Deposit adds amount to account; referenceID names the operation.
	Deposit(ctx context.Context, account string, amount float32, referenceID string) error
}

// Operation is one withdrawal or deposit a MemoryBank made.
type Operation struct {
	Kind        string // "withdraw" or "deposit"
	Account     string
	Amount      float32
	ReferenceID string
}

// MemoryBank is a Bank in memory, for tests and demos: it keeps balances
// and the operations it made, in order.
type MemoryBank struct {
	mu         sync.Mutex
	balances   map[string]float32
	operations []Operation
}

// NewMemoryBank returns a bank with these accounts and balances.
func NewMemoryBank(balances map[string]float32) *MemoryBank {
	b := &MemoryBank{balances: map[string]float32{}}
	for k, v := range balances {
		b.balances[k] = v
	}
	return b
}

// Withdraw implements Bank.
func (b *MemoryBank) Withdraw(_ context.Context, account string, amount float32, referenceID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.balances[account] -= amount
	b.operations = append(b.operations, Operation{Kind: "withdraw", Account: account, Amount: amount, ReferenceID: referenceID})
	return nil
}

// Deposit implements Bank.
func (b *MemoryBank) Deposit(_ context.Context, account string, amount float32, referenceID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.balances[account] += amount
	b.operations = append(b.operations, Operation{Kind: "deposit", Account: account, Amount: amount, ReferenceID: referenceID})
	return nil
}

// Balance returns the account's balance.
func (b *MemoryBank) Balance(account string) float32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.balances[account]
}

// Operations returns the operations the bank made, in order.
func (b *MemoryBank) Operations() []Operation {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Operation(nil), b.operations...)
}
