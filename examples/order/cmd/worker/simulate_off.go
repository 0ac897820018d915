//go:build nodev && !simulate

package main

import (
	"flag"
	"log/slog"
)

// The production build (-tags nodev) has none of the gateway simulator's
// knobs and no crash hook: its gateway never fails, declines, waits or
// exits on purpose, and no flag or environment variable can make it. See
// simulate.go, and -tags nodev,simulate for a production-like build with
// them (cmd/chaos).

// simulation reports whether this build has the gateway's fault knobs.
const simulation = false

func (a *appFlags) registerGatewayKnobs(*flag.FlagSet) {}

func (a *appFlags) wireGatewayCrash(*slog.Logger) {}
