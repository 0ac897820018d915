package idemstore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow/idemstore/driver"
)

// tracerName names the executor's tracer.
const tracerName = "github.com/onceflow/onceflow/idemstore"

// Executor defaults, from the seed design; setDefaults applies them and
// Executor.Config reports them.
const (
	defaultLease            = 30 * time.Second
	defaultReplayTTL        = 24 * time.Hour
	defaultFailureRetention = 24 * time.Hour
	defaultCodec            = "json-v2"
	defaultPolicyRevision   = 2
)

// ExecutorConfig configures an Executor. The zero value of every field but
// Store means its default.
type ExecutorConfig struct {
	// Store is the record store. Required.
	Store driver.Store
	// Lease is the processing lease: how long an owner may go without a
	// confirmed renewal before another may take over. Default 30s. It must
	// be at least 3 × RenewInterval and at most ReplayTTL.
	Lease time.Duration
	// ReplayTTL is how long a completed response is replayed. Default 24h.
	ReplayTTL time.Duration
	// FailureRetention is how long a failed or abandoned record is kept,
	// and how long an in-flight (CLAIMED or EXECUTING) record outlives its
	// lease: its time to live is always the lease left plus
	// FailureRetention, so the evidence of an attempt that died mid-action
	// outlives its lease whatever the settings. Default 24h; at least
	// Lease.
	FailureRetention time.Duration
	// Codec names the encoding of stored responses. A completed record
	// stored under another codec is not replayed (onceflow.OutcomeCodecMismatch).
	// Default "json-v2".
	Codec string
	// PolicyRevision is the revision of the idempotency policy; like Codec,
	// a mismatch refuses replay. Default 2.
	PolicyRevision int
	// RenewInterval is how often the lease is renewed while the action
	// runs, unless the Request brings its own ticks: on the ticks of a
	// grid of RenewInterval on the wall clock that every lease of the
	// process shares, so that the store can send the renewals that fall
	// due together as one call; the first within one interval of the
	// start. Default a third of what the lease leaves before its
	// deadline, (Lease - SafetyMargin) / 3; at least two renewals must fit
	// before the deadline.
	RenewInterval time.Duration
	// SafetyMargin is how long before the lease runs out the action's
	// context is cancelled when no renewal has confirmed it: the deadline
	// is measured on the local monotonic clock from when the confirming
	// request was sent, and fires whatever the store does. The margin must
	// cover the time the action takes to stop and the outcome to be
	// written, so it must be well above (at least twice) the store's
	// CommandTimeout when the store reports one (see driver.TimeBounded), and at
	// most Lease / 3. Default Lease / 10, raised to twice the store's
	// CommandTimeout when that is more.
	SafetyMargin time.Duration
	// Logger receives takeovers, abandonments and recoveries. Default:
	// discard.
	Logger *slog.Logger
	// TracerProvider traces each Execute. When it is set, every Execute
	// starts a span; when it is not, Execute starts one only as the child
	// of a recording span the context already carries (a Temporal
	// activity's or an HTTP request's), with that span's provider, so an
	// untraced call costs nothing. Each phase (every store call: claim,
	// start, complete, fail, renew, release, inspect, resolve; the action
	// and reconcile) is a child span of it.
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, receives the executor's metrics: executions by
	// outcome, takeovers, renewals, lost leases and phase latencies (their
	// names, kinds and labels: docs/operations.md#metrics-get-metrics).
	// Default: none, and nothing is measured.
	MeterProvider metric.MeterProvider
}

func (c *ExecutorConfig) setDefaults() error {
	if c.Store == nil {
		return errors.New("idemstore: ExecutorConfig.Store is required")
	}
	if c.Lease == 0 {
		c.Lease = defaultLease
	}
	if c.ReplayTTL == 0 {
		c.ReplayTTL = defaultReplayTTL
	}
	if c.FailureRetention == 0 {
		c.FailureRetention = defaultFailureRetention
	}
	if c.Codec == "" {
		c.Codec = defaultCodec
	}
	if c.PolicyRevision == 0 {
		c.PolicyRevision = defaultPolicyRevision
	}
	var storeTimeout time.Duration
	if tb, ok := c.Store.(driver.TimeBounded); ok {
		storeTimeout = tb.CommandTimeout()
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = max(c.Lease/10, 2*storeTimeout)
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = (c.Lease - c.SafetyMargin) / 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Lease < time.Millisecond:
		return fmt.Errorf("idemstore: ExecutorConfig.Lease must be at least 1ms, got %v", c.Lease)
	case c.Lease > c.ReplayTTL:
		return fmt.Errorf("idemstore: ExecutorConfig.Lease (%v) is longer than ReplayTTL (%v): lower Lease or raise ReplayTTL", c.Lease, c.ReplayTTL)
	case c.FailureRetention < c.Lease:
		return fmt.Errorf("idemstore: ExecutorConfig.FailureRetention (%v) is shorter than Lease (%v): raise FailureRetention", c.FailureRetention, c.Lease)
	case c.SafetyMargin <= 0:
		return fmt.Errorf("idemstore: ExecutorConfig.SafetyMargin must be positive, got %v", c.SafetyMargin)
	case c.SafetyMargin > c.Lease/3:
		if storeTimeout > 0 && 2*storeTimeout > c.Lease/3 {
			return fmt.Errorf("idemstore: ExecutorConfig.Lease (%v) is too short for the store's CommandTimeout (%v): "+
				"the safety margin must be at least twice the command timeout and at most a third of the lease; raise Lease to at least %v or lower the store's CommandTimeout",
				c.Lease, storeTimeout, 6*storeTimeout)
		}
		return fmt.Errorf("idemstore: ExecutorConfig.SafetyMargin (%v) is more than a third of Lease (%v), which leaves too little time to renew: lower SafetyMargin or raise Lease", c.SafetyMargin, c.Lease)
	case storeTimeout > 0 && c.SafetyMargin < 2*storeTimeout:
		return fmt.Errorf("idemstore: ExecutorConfig.SafetyMargin (%v) is not well above the store's CommandTimeout (%v): "+
			"a store call may outlast the margin, so the outcome of a cancelled action could not be written before the lease runs out; raise SafetyMargin to at least %v or lower the store's CommandTimeout",
			c.SafetyMargin, storeTimeout, 2*storeTimeout)
	case c.RenewInterval <= 0:
		return fmt.Errorf("idemstore: ExecutorConfig.RenewInterval must be positive, got %v", c.RenewInterval)
	case c.Lease < 3*c.RenewInterval:
		return fmt.Errorf("idemstore: ExecutorConfig.Lease (%v) is shorter than 3 renew intervals (3 × %v): raise Lease or lower RenewInterval", c.Lease, c.RenewInterval)
	case 2*c.RenewInterval >= c.Lease-c.SafetyMargin:
		return fmt.Errorf("idemstore: ExecutorConfig.RenewInterval (%v) leaves fewer than two renewals before the lease's deadline (Lease %v less SafetyMargin %v): lower RenewInterval or raise Lease",
			c.RenewInterval, c.Lease, c.SafetyMargin)
	}
	return driver.ValidateCodec(c.Codec, c.PolicyRevision)
}
