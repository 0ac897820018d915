package main

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/idemhttp/webhook"
)

// parseWebhookSecrets reads -webhook-secrets: comma-separated
// sender=secret pairs; a sender named twice has two secrets (a rotation).
// Under dev, with none given, the -dev sender and its public secret.
func parseWebhookSecrets(v string, dev bool) (webhook.Config, error) {
	cfg := webhook.Config{Secrets: map[string][][]byte{}}
	if strings.TrimSpace(v) == "" {
		if dev {
			cfg.Secrets[order.DevWebhookSender] = [][]byte{[]byte(order.DevWebhookSecret)}
		}
		return cfg, nil
	}
	for _, pair := range strings.Split(v, ",") {
		sender, secret, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || sender == "" || secret == "" {
			return cfg, fmt.Errorf("worker: -webhook-secrets (ONCEFLOW_WEBHOOK_SECRETS) is sender=secret[,sender=secret…]; an entry is not (%d characters)", len(pair))
		}
		cfg.Secrets[sender] = append(cfg.Secrets[sender], []byte(secret))
	}
	if _, err := webhook.New(cfg); err != nil { // the secrets' checks, at start
		return cfg, fmt.Errorf("worker: -webhook-secrets: %w", err)
	}
	return cfg, nil
}
