//go:build !nodev || simulate

package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
)

// This file is the gateway simulator's fault wiring: its knobs' flags and
// the crash hook that exits the process. It is compiled into development
// builds and into simulation builds (-tags nodev,simulate, what cmd/chaos
// runs), never into the production build (-tags nodev), whose gateway
// never fails, declines, waits or exits on purpose (simulate_off.go).

// simulation reports whether this build has the gateway's fault knobs.
const simulation = true

// exitCrash is the status the gateway's crash-after-charge exits with.
const exitCrash = 3

// registerGatewayKnobs defines the gateway simulator's knobs, each
// falling back to its environment variable.
func (a *appFlags) registerGatewayKnobs(fs *flag.FlagSet) {
	a.duration(fs, &a.gateway.Latency, "gateway-latency", "GATEWAY_LATENCY", "how long each gateway call takes")
	a.rate(fs, &a.gateway.DeclineRate, "gateway-decline-rate", "GATEWAY_DECLINE_RATE", "share of charges the gateway declines, 0–1")
	a.rate(fs, &a.gateway.FailBeforeCharge, "gateway-fail-before-charge", "GATEWAY_FAIL_BEFORE_CHARGE",
		"share of calls that fail with a 503 before charging (certainly no effect), 0–1")
	a.rate(fs, &a.gateway.TimeoutBeforeCharge, "gateway-timeout-before-charge", "GATEWAY_TIMEOUT_BEFORE_CHARGE",
		"share of calls that time out before charging (effect unknown to the caller, but nothing taken), 0–1")
	a.rate(fs, &a.gateway.TimeoutAfterCharge, "gateway-timeout-after-charge", "GATEWAY_TIMEOUT_AFTER_CHARGE",
		"share of charges that time out after the money is taken (effect unknown to the caller), 0–1")
	a.rate(fs, &a.gateway.CrashAfterCharge, "gateway-crash-after-charge", "GATEWAY_CRASH_AFTER_CHARGE",
		"share of charges after which the worker process exits at once (status 3), before the activity returns, 0–1")
}

// wireGatewayCrash sets the hook -gateway-crash-after-charge calls: the
// process exits at once, as a crash would end it.
func (a *appFlags) wireGatewayCrash(log *slog.Logger) {
	if a.gateway.CrashAfterCharge <= 0 {
		return
	}
	a.gateway.Crash = func() {
		log.Error("onceflow example: the gateway charged and the worker crashes now (-gateway-crash-after-charge)")
		os.Exit(exitCrash)
	}
}

// rate defines a flag of a share from 0 to 1 that falls back to env.
func (a *appFlags) rate(fs *flag.FlagSet, dst *float64, name, env, usage string) {
	if v := a.getenv(env); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			a.errs = append(a.errs, fmt.Errorf("worker: %s must be a number from 0 to 1, got %q", env, v))
		}
		*dst = f
	}
	fs.Float64Var(dst, name, *dst, usage+" ("+env+")")
}
