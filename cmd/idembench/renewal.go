package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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
	// The floor, measured in a second window in which every renewal call
	// is followed by the floor's call of the same leases: pairedLeases
	// leases in pairedCalls calls of each, pairedUsPerOp the renewal's
	// INFO commandstats usec per lease in that window, floorUsPerOp the
	// floor's.
	pairedLeases, pairedCalls, pairedUsPerOp, floorUsPerOp float64
}

// The renewal's floor is renew.lua's fast path (the path every renewal
// of this measurement takes: the record as its start left it, with the
// record the caller holds) stripped of every check: per lease the same
// commands (HGETALL, an HSET of the lease's end, PEXPIRE), TIME once a
// call and the same reply, with the same arguments (renew.lua's seven a
// lease, then one more, the lease field's name), on copies of the same
// records. floorHook sends it right after each renewal call, with that
// call's leases, so that the two cost what they cost on the same leases,
// in the same moment of a machine whose speed drifts. It is sent with
// EVAL, so that INFO commandstats counts it apart from the renewals'
// EVALSHA: Redis then hashes its source (a few hundred bytes) once a
// call, a fraction of a microsecond spread over the call's leases, which
// the floor pays and the renewal does not.
const renewalFloorLua = `local out, now, nows = {}, nil, nil
local field = ARGV[#ARGV]
for i = 1, #KEYS do
  local key, a = KEYS[i], 7 * i
  redis.call('HGETALL', key)
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    nows = string.format('%d', now)
  end
  local lease = tonumber(ARGV[a - 3])
  local lease_until = string.format('%d', now + lease)
  redis.call('HSET', key, field, lease_until)
  local ttl = lease + tonumber(ARGV[a - 2])
  redis.call('PEXPIRE', key, ttl)
  out[i] = '19\0' .. nows .. '\0' .. string.format('%d', ttl) .. '\0' .. lease_until
end
return out
`

// floorLeaseField is the record's field that holds the lease's end.
const floorLeaseField = "l"

// floorSuffix makes a record's key the key of its floor's copy.
const floorSuffix = ":floor"

// floorHook sends, while on, right after each call of renew.lua (an
// EVALSHA of n keys and 7n arguments: no other script of the store has
// that shape), the floor's EVAL of the same arguments on the copies of
// the same records.
type floorHook struct {
	rdb           *redis.Client
	on            atomic.Bool
	leases, calls atomic.Int64
	err           atomic.Pointer[error]
}

func (h *floorHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *floorHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *floorHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil || !h.on.Load() {
			return err
		}
		args := cmd.Args()
		if len(args) < 4 || args[0] != "evalsha" {
			return nil
		}
		n, ok := args[2].(int)
		if !ok || n < 1 || len(args) != 3+8*n {
			return nil
		}
		floor := make([]any, 0, len(args)+1)
		floor = append(floor, "eval", renewalFloorLua, n)
		for _, k := range args[3 : 3+n] {
			floor = append(floor, fmt.Sprint(k)+floorSuffix)
		}
		floor = append(append(floor, args[3+n:]...), floorLeaseField)
		if e := h.rdb.Do(context.WithoutCancel(ctx), floor...).Err(); e != nil {
			h.err.CompareAndSwap(nil, &e)
			return nil
		}
		h.leases.Add(int64(n))
		h.calls.Add(1)
		return nil
	}
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
	calls := s1["evalsha"].calls - s0["evalsha"].calls
	renewals := float64(n1 - n0)
	if renewals <= 0 {
		return renewalCost{}, fmt.Errorf("no renewal in %v", window)
	}
	rc := renewalCost{
		inFlight:     n,
		renewals:     renewals,
		calls:        calls,
		clientUs:     float64((c1 - c0).Microseconds()) / renewals,
		redisCPUUs:   (r1 - r0) * 1e6 / renewals,
		redisUsPerOp: (s1["evalsha"].usec - s0["evalsha"].usec) / renewals,
	}

	// The second window: each renewal call, then its floor.
	keys, err := b.copyForFloor(ctx, s, n)
	defer b.removeFloor(context.WithoutCancel(ctx), keys)
	if err != nil {
		return renewalCost{}, err
	}
	b.floor.leases.Store(0)
	b.floor.calls.Store(0)
	b.floor.err.Store(nil)
	before, err := commandStats(ctx, b.rdb)
	if err != nil {
		return renewalCost{}, err
	}
	b.floor.on.Store(true)
	time.Sleep(window)
	b.floor.on.Store(false)
	after, err := commandStats(ctx, b.rdb)
	if err != nil {
		return renewalCost{}, err
	}
	if e := b.floor.err.Load(); e != nil {
		return renewalCost{}, fmt.Errorf("the renewal floor: %w", *e)
	}
	select {
	case err := <-errs:
		return renewalCost{}, fmt.Errorf("an action lost its lease while renewing: %w", err)
	default:
	}
	rc.pairedLeases, rc.pairedCalls = float64(b.floor.leases.Load()), float64(b.floor.calls.Load())
	if rc.pairedLeases == 0 {
		return renewalCost{}, fmt.Errorf("no renewal of the floor in %v", window)
	}
	rc.pairedUsPerOp = (after["evalsha"].usec - before["evalsha"].usec) / rc.pairedLeases
	rc.floorUsPerOp = (after["eval"].usec - before["eval"].usec) / rc.pairedLeases
	return rc, nil
}

// copyForFloor copies the n records in flight of s (DUMP and RESTORE:
// the same fields, the same encoding) to the keys of the floor's copies,
// and returns those keys.
func (b *bench) copyForFloor(ctx context.Context, s *redisstore.Store, n int) ([]string, error) {
	var keys []string
	for i := range n {
		key := s.Key(onceflow.Ref{Code: "renewal", Digest: scope(-3, i)})
		dump, err := b.rdb.Dump(ctx, key).Result()
		if err != nil {
			return nil, fmt.Errorf("DUMP %s: %w", key, err)
		}
		if err := b.rdb.RestoreReplace(ctx, key+floorSuffix, time.Hour, dump).Err(); err != nil {
			return keys, fmt.Errorf("RESTORE %s: %w", key+floorSuffix, err)
		}
		keys = append(keys, key+floorSuffix)
	}
	return keys, nil
}

// removeFloor deletes the copies.
func (b *bench) removeFloor(ctx context.Context, keys []string) {
	for at := 0; at < len(keys); at += 500 {
		_ = b.rdb.Del(ctx, keys[at:min(at+500, len(keys))]...).Err()
	}
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
