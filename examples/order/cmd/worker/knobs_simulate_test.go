//go:build nodev && simulate

package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/onceflow/onceflow/cmd/cli"
)

// TestSimulationBuildHasTheFaultKnobs: development and simulation builds
// (-tags nodev,simulate: cmd/chaos) take the gateway's knobs, from flags
// or their environment variables, and wire the crash hook when asked.
func TestSimulationBuildHasTheFaultKnobs(t *testing.T) {
	names := serveFlagNames(t)
	for _, k := range gatewayKnobs {
		if !names[k] {
			t.Errorf("-%s is missing", k)
		}
	}
	env := map[string]string{"GATEWAY_LATENCY": "1s"}
	app := appFlags{getenv: func(k string) string { return env[k] }}
	if _, err := cli.ParseWorkerFlags("worker", []string{"-gateway-crash-after-charge", "0.5"}, app.getenv, app.register, cli.Help{}); err != nil {
		t.Fatal(err)
	}
	app.wireGatewayCrash(slog.New(slog.DiscardHandler))
	if g := app.gateway; g.CrashAfterCharge != 0.5 || g.Latency != time.Second || g.Crash == nil {
		t.Fatalf("gateway = %+v", g)
	}
}
