//go:build nodev

package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// gatewayKnobs are the gateway simulator's flags (simulate.go).
var gatewayKnobs = []string{
	"gateway-latency", "gateway-decline-rate", "gateway-fail-before-charge",
	"gateway-timeout-before-charge", "gateway-timeout-after-charge", "gateway-crash-after-charge",
}

// serveFlagNames lists the example's flags the serving worker defines in
// this build, beside the worker's (package cli, which has no gateway
// flag).
func serveFlagNames(t *testing.T) map[string]bool {
	t.Helper()
	app := appFlags{getenv: func(string) string { return "" }}
	names := map[string]bool{}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	app.register(fs)
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}

// Every build has the example's own flags; whether it has the gateway's
// fault knobs is the build's (knobs_nodev_test.go, knobs_simulate_test.go).
func TestServeFlagsOfEveryBuild(t *testing.T) {
	names := serveFlagNames(t)
	for _, want := range []string{"ledger-dsn", "console-token", "order-wait"} {
		if !names[want] {
			t.Errorf("-%s is missing", want)
		}
	}
	for name := range names {
		if strings.HasPrefix(name, "gateway-") && !simulation {
			t.Errorf("-%s in a build with simulation=%v", name, simulation)
		}
	}
}
