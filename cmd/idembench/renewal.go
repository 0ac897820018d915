package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// renewalCost is what keeping leases costs while many actions run.
type renewalCost struct {
	inFlight     int
	renewals     float64
	calls        float64 // script calls that renewed them
	clientUs     float64 // client CPU (user+system) per renewal
	redisCPUUs   float64 // Redis CPU (INFO cpu) per renewal
	redisUsPerOp float64 // INFO commandstats usec per renewal
}

// measureRenewal starts n actions that wait, lets their leases be renewed
// for a few renewal intervals with nothing else running, and divides.
func (b *bench) measureRenewal(ctx context.Context, n int) (renewalCost, error) {
	const lease = 3 * time.Second
	s, _, err := b.executor(idemstore.ExecutorConfig{Lease: lease})
	if err != nil {
		return renewalCost{}, err
	}
	counted := &renewCounter{Store: s}
	e, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Lease: lease, Store: counted})
	if err != nil {
		return renewalCost{}, err
	}
	release := make(chan struct{})
	var running atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			req := idemstore.Request{
				Ref:       onceflow.Ref{Code: "renewal", Digest: scope(-3, i)},
				Operation: "bench-renewal", Fingerprint: b.fp,
			}
			_, err := e.Execute(ctx, req, func(ctx context.Context) ([]byte, error) {
				running.Add(1)
				select {
				case <-release:
					return b.resp, nil
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			})
			if err != nil {
				errs <- err
			}
		})
	}
	defer func() { close(release); wg.Wait() }()
	for running.Load() < int32(n) {
		select {
		case err := <-errs:
			return renewalCost{}, err
		case <-time.After(5 * time.Millisecond):
		}
	}
	window := 4 * e.Config().RenewInterval
	n0 := counted.renewals.Load()
	c0, r0, s0, err := b.cpuSnapshot(ctx)
	if err != nil {
		return renewalCost{}, err
	}
	time.Sleep(window)
	c1, r1, s1, err := b.cpuSnapshot(ctx)
	n1 := counted.renewals.Load()
	if err != nil {
		return renewalCost{}, err
	}
	select {
	case err := <-errs:
		return renewalCost{}, fmt.Errorf("an action lost its lease while renewing: %w", err)
	default:
	}
	calls := s1["evalsha"].calls - s0["evalsha"].calls
	renewals := float64(n1 - n0)
	if renewals <= 0 {
		return renewalCost{}, fmt.Errorf("no renewal in %v", window)
	}
	return renewalCost{
		inFlight:     n,
		renewals:     renewals,
		calls:        calls,
		clientUs:     float64((c1 - c0).Microseconds()) / renewals,
		redisCPUUs:   (r1 - r0) * 1e6 / renewals,
		redisUsPerOp: (s1["evalsha"].usec - s0["evalsha"].usec) / renewals,
	}, nil
}

// renewCounter counts the renewals the executor asks its store for: a
// script call may renew several leases (redisstore batches them).
type renewCounter struct {
	*redisstore.Store
	renewals atomic.Int64
}

// Renew implements driver.Store.
func (c *renewCounter) Renew(ctx context.Context, req driver.RenewRequest) (driver.RenewOutcome, error) {
	c.renewals.Add(1)
	return c.Store.Renew(ctx, req)
}

// cpuSnapshot reads this process' CPU time, Redis' CPU seconds and its
// command statistics.
func (b *bench) cpuSnapshot(ctx context.Context) (time.Duration, float64, map[string]cmdStat, error) {
	client, err := processCPU()
	if err != nil {
		return 0, 0, nil, err
	}
	var redisCPU float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := infoField(ctx, b.rdb, "cpu", f)
		if err != nil {
			return 0, 0, nil, err
		}
		x, _ := strconv.ParseFloat(v, 64)
		redisCPU += x
	}
	stats, err := commandStats(ctx, b.rdb)
	return client, redisCPU, stats, err
}
