package order

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/onceflow/onceflow/examples/order/ledger"
)

// GatewayConfig sets the gateway simulator's behaviour. The rates are
// probabilities from 0 to 1, rolled on every call in this order: fail
// before the charge, time out before the charge, decline, then (once
// charged) crash, then time out.
type GatewayConfig struct {
	// Latency is how long each call takes. Default 0.
	Latency time.Duration
	// DeclineRate declines the card: a business result, no money taken.
	DeclineRate float64
	// FailBeforeCharge fails with ErrGatewayUnavailable (a 503): certainly
	// no money taken.
	FailBeforeCharge float64
	// TimeoutBeforeCharge fails with ErrGatewayTimeout without taking the
	// money (the request never reached the bank): the caller cannot tell
	// it from TimeoutAfterCharge, but an operator who asks the gateway
	// finds no charge and decides "retry".
	TimeoutBeforeCharge float64
	// TimeoutAfterCharge takes the money, then fails with
	// ErrGatewayTimeout: the caller cannot know whether it was charged.
	TimeoutAfterCharge float64
	// CrashAfterCharge takes the money, records the call, then calls
	// Crash: the worker process dies before the activity returns.
	CrashAfterCharge float64
	// Crash ends the process; cmd/worker sets it to os.Exit. Required
	// when CrashAfterCharge > 0: library code never exits by itself.
	Crash func()
	// Rand returns a number in [0, 1). Default math/rand/v2's Float64.
	Rand func() float64
}

// Validate checks the rates.
func (c GatewayConfig) Validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"decline rate", c.DeclineRate}, {"fail-before-charge rate", c.FailBeforeCharge},
		{"timeout-before-charge rate", c.TimeoutBeforeCharge}, {"timeout-after-charge rate", c.TimeoutAfterCharge}, {"crash-after-charge rate", c.CrashAfterCharge}} {
		if r.v < 0 || r.v > 1 {
			return fmt.Errorf("order: the gateway's %s must be between 0 and 1, got %v", r.name, r.v)
		}
	}
	if c.Latency < 0 {
		return fmt.Errorf("order: the gateway's latency must not be negative, got %v", c.Latency)
	}
	if c.CrashAfterCharge > 0 && c.Crash == nil {
		return errors.New("order: a gateway crash-after-charge rate needs GatewayConfig.Crash (what ends the process)")
	}
	return nil
}

// ErrGatewayUnavailable is the simulator's 503: nothing was charged.
var ErrGatewayUnavailable = errors.New("gateway: 503 service unavailable (nothing was charged)")

// ErrGatewayTimeout is the simulator's timeout after it charged: the
// caller cannot tell whether it was charged.
var ErrGatewayTimeout = errors.New("gateway: timed out waiting for the response")

// Gateway is a payment gateway simulator that is deliberately not
// idempotent: every call that is not failed or declined takes money, even
// with an operation key it has seen. Every call is recorded in the
// ledger's gateway_calls table, so the count survives restarts, and
// Lookup finds the calls of an operation key, as a real provider's
// "retrieve by idempotency key" would.
type Gateway struct {
	ledger *ledger.Ledger
	cfg    GatewayConfig
}

// NewGateway returns a gateway that records its calls in l.
func NewGateway(l *ledger.Ledger, cfg GatewayConfig) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Gateway{ledger: l, cfg: cfg}, nil
}

// GatewayCharge is what the gateway answers a charge with.
type GatewayCharge struct {
	ChargeID string `json:"charge_id,omitempty"`
	// Status is ledger.PaymentCaptured or ledger.PaymentDeclined.
	Status string `json:"status"`
}

// ChargeRequest is a charge.
type ChargeRequest struct {
	OperationKey string
	OrderID      string
	AmountCents  int64
	Currency     string
}

func (g *Gateway) roll(rate float64) bool { return rate > 0 && g.cfg.Rand() < rate }

// Charge charges the card. It takes money on every call but the failed
// and declined ones.
func (g *Gateway) Charge(ctx context.Context, req ChargeRequest) (GatewayCharge, error) {
	if g.cfg.Latency > 0 {
		t := time.NewTimer(g.cfg.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return GatewayCharge{}, fmt.Errorf("gateway: %w (nothing was charged)", context.Cause(ctx))
		case <-t.C:
		}
	}
	call := ledger.GatewayCall{OperationKey: req.OperationKey, OrderID: req.OrderID, AmountCents: req.AmountCents, Currency: req.Currency}
	record := func(outcome string) (ledger.GatewayCall, error) {
		call.Outcome = outcome
		// The call happened whatever the caller's context says.
		return g.ledger.RecordGatewayCall(context.WithoutCancel(ctx), call)
	}
	switch {
	case g.roll(g.cfg.FailBeforeCharge):
		if _, err := record(ledger.CallUnavailable); err != nil {
			return GatewayCharge{}, err
		}
		return GatewayCharge{}, ErrGatewayUnavailable
	case g.roll(g.cfg.TimeoutBeforeCharge):
		if _, err := record(ledger.CallTimeoutBeforeCharge); err != nil {
			return GatewayCharge{}, err
		}
		return GatewayCharge{}, ErrGatewayTimeout
	case g.roll(g.cfg.DeclineRate):
		if _, err := record(ledger.CallDeclined); err != nil {
			return GatewayCharge{}, err
		}
		return GatewayCharge{Status: ledger.PaymentDeclined}, nil
	}
	call.ChargeID = "ch_" + uuid.Must(uuid.NewV7()).String()
	switch {
	case g.roll(g.cfg.CrashAfterCharge):
		if _, err := record(ledger.CallChargedThenCrash); err != nil {
			return GatewayCharge{}, err
		}
		g.cfg.Crash()
		return GatewayCharge{}, errors.New("gateway: the crash hook returned") // a test's Crash
	case g.roll(g.cfg.TimeoutAfterCharge):
		if _, err := record(ledger.CallChargedThenTimeout); err != nil {
			return GatewayCharge{}, err
		}
		return GatewayCharge{}, ErrGatewayTimeout
	}
	if _, err := record(ledger.CallCharged); err != nil {
		// The money is taken but the call is not recorded: the caller
		// cannot know.
		return GatewayCharge{}, fmt.Errorf("gateway: charged, but: %w", err)
	}
	return GatewayCharge{ChargeID: call.ChargeID, Status: ledger.PaymentCaptured}, nil
}

// Lookup returns the effect of the calls made under an operation key: the
// charge, or the decline, found reports whether there is one. Failed calls
// took nothing and are not an effect.
func (g *Gateway) Lookup(ctx context.Context, operationKey string) (GatewayCharge, bool, error) {
	calls, err := g.ledger.GatewayCallsByKey(ctx, operationKey)
	if err != nil {
		return GatewayCharge{}, false, err
	}
	var declined bool
	for _, c := range calls {
		if c.Charged() {
			return GatewayCharge{ChargeID: c.ChargeID, Status: ledger.PaymentCaptured}, true, nil
		}
		declined = declined || c.Outcome == ledger.CallDeclined
	}
	if declined {
		return GatewayCharge{Status: ledger.PaymentDeclined}, true, nil
	}
	return GatewayCharge{}, false, nil
}

// Refund gives back every charge made under an operation key that was not
// refunded yet, and returns the refunds of record of them all. It is
// idempotent: a charge is refunded once (the ledger's gateway_refunds
// keeps one row per charge ID), however often Refund is called.
func (g *Gateway) Refund(ctx context.Context, operationKey string) ([]ledger.GatewayRefund, error) {
	calls, err := g.ledger.GatewayCallsByKey(ctx, operationKey)
	if err != nil {
		return nil, err
	}
	refunds := []ledger.GatewayRefund{}
	for _, c := range calls {
		if !c.Charged() {
			continue
		}
		r, _, err := g.ledger.RecordGatewayRefund(ctx, ledger.GatewayRefund{ChargeID: c.ChargeID, OperationKey: operationKey,
			OrderID: c.OrderID, AmountCents: c.AmountCents, Currency: c.Currency})
		if err != nil {
			return nil, fmt.Errorf("gateway: refund charge %s: %w", c.ChargeID, err)
		}
		refunds = append(refunds, r)
	}
	return refunds, nil
}
