package order

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/examples/order/ledger"
)

// The -dev worker's public credentials, as public as worker.DevSecret: the
// docs' curl commands use them against a -dev worker, whose HTTP server
// answers on loopback only. Never give them to a worker that others reach;
// a production worker knows neither (worker api-key issues keys, and
// -webhook-secret names each sender's secret).
const (
	// DevAccount is the account -dev creates.
	DevAccount = "dev"
	// DevAPIKey is DevAccount's API key under -dev.
	DevAPIKey = "ofk_dev_public_key_not_for_production"
	// DevWebhookSender is the payment provider -dev knows.
	DevWebhookSender = "dev-psp"
	// DevWebhookSecret is DevWebhookSender's signing secret under -dev.
	DevWebhookSecret = "whsec_dev_public_secret_not_for_production"
)

// AddDevAccount gives the ledger DevAccount and its DevAPIKey (what -dev
// does when it starts); running it again changes nothing.
func AddDevAccount(ctx context.Context, l *ledger.Ledger) error {
	if err := l.CreateAccount(ctx, DevAccount); err != nil {
		return fmt.Errorf("order: the dev account: %w", err)
	}
	if err := l.AddAPIKey(ctx, DevAccount, DevAPIKey); err != nil {
		return fmt.Errorf("order: the dev account's key: %w", err)
	}
	return nil
}
