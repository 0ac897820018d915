package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/driver"
)

var scriptCmds = []string{"evalsha", "eval"}

// storeCmds are the commands the store sends: its scripts, and the HMGET a
// claim reads a replay with first.
var storeCmds = []string{"evalsha", "eval", "hmget"}

// The workloads, in report order.
const (
	floor1       = "floor: 1 EVALSHA"
	floor2       = "floor: 2 EVALSHA"
	fresh        = "executor: fresh"
	twoStep      = "executor: fresh, BeforeStart"
	replayHot    = "executor: replay, hot key"
	replaySpread = "executor: replay, 10k keys"
	replayCached = "executor: replay, hot key, client-side cache"
	replayHotNo  = "executor: replay, hot key, NoAutoPipeline"
	replaySprNo  = "executor: replay, 10k keys, NoAutoPipeline"
	naiveFresh   = "naive: fresh (SET NX, SET)"
	naiveReplay  = "naive: replay (SET NX, GET)"
)

const spreadKeys = 10_000

// workloads are the operations the report measures, in its order; the
// records the replays read are written first.
func (b *bench) workloads(ctx context.Context) ([]workload, error) {
	// Made once: an operation allocates no closure for its action.
	action := idemstore.Action(b.action)
	replayExec, cachedExec, directExec, err := b.replayExecutors(ctx, action)
	if err != nil {
		return nil, err
	}
	trivial := func(ctx context.Context, g int) error {
		return b.trivial.EvalSha(ctx, b.rdb, []string{"bench:floor"}).Err()
	}
	freshWith := func(beforeStart func(context.Context, driver.Ownership) error) func(context.Context) (op, error) {
		return func(context.Context) (op, error) {
			_, e, err := b.executor(idemstore.ExecutorConfig{})
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, g, i int) error {
				req := b.request(g, i)
				req.BeforeStart = beforeStart
				return expect(ctx, e, req, action, onceflow.OutcomeRan)
			}, nil
		}
	}
	static := func(o op) func(context.Context) (op, error) {
		return func(context.Context) (op, error) { return o, nil }
	}
	// The replays ask for one record (hot) or spread over spreadKeys.
	hot := func(_, _ int) idemstore.Request { return b.request(-1, 0) }
	spread := func(g, i int) idemstore.Request { return b.request(-2, (g*7919+i)%spreadKeys) }
	replayOf := func(e *idemstore.Executor, req func(g, i int) idemstore.Request) func(context.Context) (op, error) {
		return static(func(ctx context.Context, g, i int) error {
			return expect(ctx, e, req(g, i), action, onceflow.OutcomeReplayed)
		})
	}
	return []workload{
		{floor1, static(func(ctx context.Context, g, _ int) error { return trivial(ctx, g) }), scriptCmds},
		{floor2, static(func(ctx context.Context, g, _ int) error {
			if err := trivial(ctx, g); err != nil {
				return err
			}
			return trivial(ctx, g)
		}), scriptCmds},
		{fresh, freshWith(nil), storeCmds},
		{twoStep, freshWith(func(context.Context, driver.Ownership) error { return nil }), storeCmds},
		{replayHot, replayOf(replayExec, hot), storeCmds},
		{replaySpread, replayOf(replayExec, spread), storeCmds},
		{replayHotNo, replayOf(directExec, hot), storeCmds},
		{replaySprNo, replayOf(directExec, spread), storeCmds},
		{replayCached, replayOf(cachedExec, hot), storeCmds},
		{naiveFresh, b.naive(false), []string{"set", "get"}},
		{naiveReplay, b.naive(true), []string{"set", "get"}},
	}, nil
}

// action is the operations' action: it returns the response at once;
// the operations take it as a value made once (workloads).
func (b *bench) action(context.Context) ([]byte, error) { return b.resp, nil }

// request is the request for record i of goroutine g.
func (b *bench) request(g, i int) idemstore.Request {
	return idemstore.Request{
		Ref:       onceflow.Ref{Code: "charge-payment", Digest: scope(g, i)},
		Operation: "bench-operation", Fingerprint: b.fp,
	}
}

// expect runs req on e and checks how it was answered.
func expect(ctx context.Context, e *idemstore.Executor, req idemstore.Request, action idemstore.Action, want onceflow.Outcome) error {
	res, err := e.Execute(ctx, req, action)
	if err != nil {
		return err
	}
	if res.Outcome != want {
		return fmt.Errorf("outcome %s, want %s", res.Outcome, want)
	}
	return nil
}

// replayExecutors writes the records the replays read, once for every
// cell: the hot one (goroutine -1) and spreadKeys more (goroutine -2).
// It returns three executors on the same store: the default one, one
// that reads through go-redis' client-side cache, and one whose replay
// reads are not auto-pipelined.
func (b *bench) replayExecutors(ctx context.Context, action idemstore.Action) (replay, cached, direct *idemstore.Executor, err error) {
	replayStore, replayExec, err := b.executor(idemstore.ExecutorConfig{})
	if err != nil {
		return nil, nil, nil, err
	}
	cachedExec, err := b.cachedExecutor(replayStore)
	if err != nil {
		return nil, nil, nil, err
	}
	directExec, err := b.unpipelinedExecutor(replayStore)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := expect(ctx, replayExec, b.request(-1, 0), action, onceflow.OutcomeRan); err != nil {
		return nil, nil, nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < spreadKeys; i += 16 {
				if _, err := replayExec.Execute(ctx, b.request(-2, i), action); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, nil, err
	}
	return replayExec, cachedExec, directExec, nil
}

// naive is the naive code's workload, what a caller without this
// library might write: a SET NX PX marker, the action, a SET of the
// response; a GET on a duplicate. With replay every operation asks for
// one key whose response is already set.
func (b *bench) naive(replay bool) func(context.Context) (op, error) {
	return func(ctx context.Context) (op, error) {
		ns := "naive" + randomHex(6) + ":"
		if replay {
			if err := b.rdb.Set(ctx, ns+"done", b.resp, time.Hour).Err(); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context, g, i int) error {
			key := ns + "done"
			if !replay {
				key = ns + scope(g, i).Hex
			}
			ok, err := b.rdb.SetNX(ctx, key, `{"state":"IN_PROGRESS","fp":"`+string(b.fp)+`"}`, 30*time.Second).Result()
			switch {
			case err != nil:
				return err
			case ok:
				_, err := b.action(ctx)
				if err != nil {
					return err
				}
				return b.rdb.Set(ctx, key, b.resp, 24*time.Hour).Err()
			}
			err = b.rdb.Get(ctx, key).Err()
			if errors.Is(err, redis.Nil) {
				return errors.New("naive: the key vanished")
			}
			return err
		}, nil
	}
}
