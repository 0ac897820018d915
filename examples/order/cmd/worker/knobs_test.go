//go:build nodev

package main

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
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

// TestConsolePrincipal: a decision made through the console names who
// made it: the proxy's header when one is configured and set, else under
// -dev the user who runs the worker, else the console's default.
func TestConsolePrincipal(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "USER" {
			return "ana"
		}
		return ""
	}
	r := httptest.NewRequest(http.MethodPost, "/console/decide", nil)
	if p := consolePrincipal("", false, env); p != nil {
		t.Fatalf("no header, not -dev: a principal func, want nil (the console's default)")
	}
	if got := consolePrincipal("", true, env)(r); got != "dev:ana" {
		t.Fatalf("-dev: %q, want dev:ana", got)
	}
	p := consolePrincipal("X-Forwarded-User", false, env)
	if got := p(r); got != "" {
		t.Fatalf("header configured but absent: %q, want empty (the console's default)", got)
	}
	r.Header.Set("X-Forwarded-User", "bo@example.com")
	if got := p(r); got != "bo@example.com" {
		t.Fatalf("header: %q, want bo@example.com", got)
	}
}
