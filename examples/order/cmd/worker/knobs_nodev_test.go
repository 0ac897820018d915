//go:build nodev && !simulate

package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/cmd/cli"
)

// TestProductionBuildHasNoFaultKnobs: the production build (-tags nodev)
// defines none of the gateway's knobs, ignores their environment
// variables, and never wires the crash hook that exits the process. Run it
// with go test -tags nodev ./examples/order/cmd/worker/ (scripts/test does).
func TestProductionBuildHasNoFaultKnobs(t *testing.T) {
	if simulation {
		t.Fatal("a nodev build without the simulate tag has the simulation wiring")
	}
	names := serveFlagNames(t)
	for _, k := range gatewayKnobs {
		if names[k] {
			t.Errorf("the production flag set has -%s", k)
		}
	}
	env := map[string]string{"GATEWAY_CRASH_AFTER_CHARGE": "1", "GATEWAY_TIMEOUT_AFTER_CHARGE": "1", "GATEWAY_LATENCY": "1s"}
	app := appFlags{getenv: func(k string) string { return env[k] }}
	if _, err := cli.ParseWorkerFlags("worker", nil, app.getenv, app.register, cli.Help{}); err != nil {
		t.Fatal(err)
	}
	app.wireGatewayCrash(slog.New(slog.DiscardHandler))
	if g := app.gateway; g.CrashAfterCharge != 0 || g.TimeoutAfterCharge != 0 || g.Latency != 0 || g.Crash != nil {
		t.Fatalf("the knobs' environment variables reached the gateway: %+v", g)
	}
	app = appFlags{getenv: func(string) string { return "" }}
	_, err := cli.ParseWorkerFlags("worker", []string{"-gateway-crash-after-charge", "1"}, app.getenv, app.register, cli.Help{})
	if err == nil || !strings.Contains(err.Error(), "not defined") {
		t.Fatalf("-gateway-crash-after-charge on the production build: %v, want it undefined", err)
	}
}
