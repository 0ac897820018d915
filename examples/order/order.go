package order

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/worker"
)

// ChargeActivity is the registered name of the idempotent charge activity.
const ChargeActivity = "ChargePayment"

// Charge is the input of the charge activity.
type Charge struct {
	OrderID     string `json:"orderId"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amountCents"`
}

// Receipt is its result.
type Receipt struct {
	ChargeID string `json:"chargeId"`
	// ProviderKey is the idempotency key the provider was given: stable
	// across every attempt of the charge.
	ProviderKey string `json:"providerKey"`
}

// ChargeOrder charges the order's card once, however often the activity is
// retried and however many workflows are started for the same order.
func ChargeOrder(ctx workflow.Context, c Charge) (Receipt, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    10 * time.Second, // required: it drives the lease renewal
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second,
			MaximumAttempts: 10,
		},
	})
	var r Receipt
	err := workflow.ExecuteActivity(ctx, ChargeActivity, c).Get(ctx, &r)
	return r, err
}

// Provider is a stand-in for a payment provider. It does not deduplicate
// by itself, so a double charge would show in Charges.
type Provider struct {
	mu      sync.Mutex
	charges map[string]Receipt // by idempotency key
	n       int
}

// NewProvider returns an empty provider.
func NewProvider() *Provider { return &Provider{charges: map[string]Receipt{}} }

// Charge charges the card.
func (p *Provider) Charge(_ context.Context, key string, c Charge) (Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	r := Receipt{ChargeID: fmt.Sprintf("ch_%d_%s", p.n, c.OrderID), ProviderKey: key}
	p.charges[key] = r
	return r, nil
}

// Lookup finds a charge by idempotency key: the reconcile hook.
func (p *Provider) Lookup(_ context.Context, key string) (Receipt, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.charges[key]
	return r, ok
}

// Charges counts the charges made.
func (p *Provider) Charges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// ChargeOptions make the charge idempotent per order, across workflows,
// and reconcile an attempt that died mid-charge by asking the provider:
// the options Register wraps ChargeFunc with, under ChargeActivity.
func ChargeOptions(p *Provider) []onceactivity.Option {
	return []onceactivity.Option{
		onceactivity.Name(ChargeActivity),
		onceactivity.Code("charge-payment"),
		onceactivity.BusinessKey(func(c Charge) string { return c.OrderID + "/charge" }),
		onceactivity.Reconcile(func(ctx context.Context, _ Charge, _ onceflow.Record) (Receipt, bool, error) {
			r, found := p.Lookup(ctx, onceactivity.OperationKey(ctx))
			return r, found, nil
		}),
	}
}

// ChargeFunc is the charge activity before wrapping.
func ChargeFunc(p *Provider) func(context.Context, Charge) (Receipt, error) {
	return func(ctx context.Context, c Charge) (Receipt, error) {
		return p.Charge(ctx, onceactivity.OperationKey(ctx), c)
	}
}

// RegisterCharge registers the workflow and the idempotent activity.
func RegisterCharge(r worker.Registry, p *Provider) error {
	r.Worker.RegisterWorkflow(ChargeOrder)
	onceactivity.Register(r.Worker, r.Activities, ChargeFunc(p), ChargeOptions(p)...)
	return nil
}
