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
)

// renewalCost is what keeping leases costs while many actions run.
type renewalCost struct {
	inFlight     int
	renewals     float64
	clientUs     float64 // client CPU (user+system) per renewal
	redisCPUUs   float64 // Redis CPU (INFO cpu) per renewal
	redisUsPerOp float64 // INFO commandstats usec per renewal
}

// measureRenewal starts n actions that wait, lets their leases be renewed
// for a few renewal intervals with nothing else running, and divides.
func (b *bench) measureRenewal(ctx context.Context, n int) (renewalCost, error) {
	const lease = 3 * time.Second
	_, e, err := b.executor(idemstore.ExecutorConfig{Lease: lease})
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
	c0, r0, s0, err := b.cpuSnapshot(ctx)
	if err != nil {
		return renewalCost{}, err
	}
	time.Sleep(window)
	c1, r1, s1, err := b.cpuSnapshot(ctx)
	if err != nil {
		return renewalCost{}, err
	}
	select {
	case err := <-errs:
		return renewalCost{}, fmt.Errorf("an action lost its lease while renewing: %w", err)
	default:
	}
	calls := s1["evalsha"].calls - s0["evalsha"].calls
	if calls <= 0 {
		return renewalCost{}, fmt.Errorf("no renewal in %v", window)
	}
	return renewalCost{
		inFlight:     n,
		renewals:     calls,
		clientUs:     float64((c1 - c0).Microseconds()) / calls,
		redisCPUUs:   (r1 - r0) * 1e6 / calls,
		redisUsPerOp: (s1["evalsha"].usec - s0["evalsha"].usec) / calls,
	}, nil
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
