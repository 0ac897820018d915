package e2e_test

// The saga sample of issue 45 (examples/saga/after: Temporal's Go saga
// sample with onceflow adopted) on a real Temporal server and Redis, and a
// service whose retry policy allows two attempts: a worker killed right
// after the withdrawal costs one withdrawal, and the call waits for a
// decision instead of failing with the money taken.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	saga "github.com/onceflow/onceflow/examples/saga/after"
	"github.com/onceflow/onceflow/harness/redistest"
	onceworker "github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// redisSagaBank is the saga's Bank in Redis, so that a killed worker's
// withdrawal is seen by the test: balances under <prefix>:bank:<account>,
// and every operation, in order, in a list.
type redisSagaBank struct {
	rdb    redis.UniversalClient
	prefix string
	// block hangs after the withdrawal, until the process is killed.
	block bool
}

func (b redisSagaBank) key(s string) string { return b.prefix + ":bank:" + s }

func (b redisSagaBank) move(ctx context.Context, kind, account string, amount float32, ref string) error {
	if err := b.rdb.IncrByFloat(ctx, b.key(account), float64(amount)).Err(); err != nil {
		return err
	}
	return b.rdb.RPush(ctx, b.key("operations"), kind+" "+ref).Err()
}

func (b redisSagaBank) Withdraw(ctx context.Context, account string, amount float32, ref string) error {
	if err := b.move(ctx, "withdraw", account, -amount, ref); err != nil {
		return err
	}
	if b.block {
		select {} // the test kills the process here, after the effect
	}
	return nil
}

func (b redisSagaBank) Deposit(ctx context.Context, account string, amount float32, ref string) error {
	return b.move(ctx, "deposit", account, amount, ref)
}

// transferMoneyTaskQueue is taken by the tests of the two samples written
// in the style of Temporal's (the transfer and the saga), which both poll
// Temporal's TRANSFER_MONEY_TASK_QUEUE, and with activities of the same
// names: they take turns on this test server's namespace.
var transferMoneyTaskQueue sync.Mutex

// sampleQueueTurn waits for the test's turn on TRANSFER_MONEY_TASK_QUEUE,
// until the test and its cleanups (the workers' stops) have ended.
func sampleQueueTurn(t *testing.T) {
	transferMoneyTaskQueue.Lock()
	t.Cleanup(transferMoneyTaskQueue.Unlock) // registered first: runs last
}

// sagaOnceflow is onceflow's configuration of these services: the
// default lease (30 s), which outlasts the heartbeat timeout (10 s)
// after which Temporal retries a dead worker's attempt, so the retry
// meets the dead attempt's live lease.
func sagaOnceflow(keys string) onceworker.AttachConfig {
	return onceworker.AttachConfig{Secret: []byte(e2eSecret), KeyNamespace: keys}
}

// twoAttemptsQueue is the task queue of the two-attempts service.
const twoAttemptsQueue = "TWO_ATTEMPTS"

// TransferWithTwoAttempts is a service's workflow, written for Temporal
// alone: the saga's withdrawal and deposit under a retry policy of two
// attempts.
func TransferWithTwoAttempts(ctx workflow.Context, in saga.TransferDetails) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
	})
	var a *saga.Activities
	if err := workflow.ExecuteActivity(ctx, a.Withdraw, in).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.ExecuteActivity(ctx, a.Deposit, in).Get(ctx, nil)
}

// runTwoAttempts runs the two-attempts service's worker until ctx is done.
func runTwoAttempts(ctx context.Context, hostPort, namespace string, rdb redis.UniversalClient, keys string, bank saga.Bank) error {
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: namespace, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer c.Close()
	w, err := onceworker.NewSDKWorker(ctx, c, rdb, twoAttemptsQueue+keys, sdkworker.Options{}, sagaOnceflow(keys))
	if err != nil {
		return err
	}
	w.RegisterWorkflow(TransferWithTwoAttempts)
	w.RegisterActivity(&saga.Activities{Bank: bank})
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

// runSagaChild runs, in a child process, the saga sample's RunWorker
// (envChild "saga") or the two-attempts service (envChild "two-attempts")
// with a bank that hangs after a withdrawal.
func runSagaChild() int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	defer rdb.Close()
	keys := os.Getenv(envKeys)
	bank := redisSagaBank{rdb: rdb, prefix: keys, block: true}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var err error
	if os.Getenv(envChild) == "saga" {
		err = saga.RunWorker(ctx, saga.Config{HostPort: os.Getenv(envTemporal), Namespace: os.Getenv(envNamespace), Bank: bank, Redis: rdb,
			Onceflow: sagaOnceflow(keys)})
	} else {
		err = runTwoAttempts(ctx, os.Getenv(envTemporal), os.Getenv(envNamespace), rdb, keys, bank)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "saga child:", err)
		return 1
	}
	return 0
}

// sagaRun is one test's service: its child worker, killed after the
// withdrawal, then its worker again, in this process.
type sagaRun struct {
	h    *harness
	bank redisSagaBank
}

// killAfterTheWithdrawal starts the child worker of kind, starts the
// workflow with start, and kills the child right after the withdrawal.
func (s sagaRun) killAfterTheWithdrawal(kind string, start func() client.WorkflowRun) client.WorkflowRun {
	t := s.h.t
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envChild+"="+kind,
		envTemporal+"="+temporalServer.Address(), envNamespace+"="+temporalServer.Namespace(),
		envRedis+"="+redistest.Addr(t), envKeys+"="+s.h.keys)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	run := start()
	s.h.waitFor("the withdrawal", func() bool { return len(s.operations()) == 1 })
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	return run
}

// restart runs the service's worker again, in this process, until the
// test ends.
func (s sagaRun) restart(run func(ctx context.Context) error) {
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- run(ctx) }()
	s.h.t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			s.h.t.Errorf("the service's worker: %v", err)
		}
	})
}

func (s sagaRun) operations() []string {
	v, err := s.h.rdb.LRange(context.Background(), s.bank.key("operations"), 0, -1).Result()
	if err != nil {
		s.h.t.Fatal(err)
	}
	return v
}

func (s sagaRun) balance(account string) float64 {
	v, err := s.h.rdb.Get(context.Background(), s.bank.key(account)).Float64()
	if err != nil && !errors.Is(err, redis.Nil) {
		s.h.t.Fatal(err)
	}
	return v
}

// incident waits until the workflow waits on one incident, of activity.
func (s sagaRun) incident(run client.WorkflowRun, activity string) idemwf.PendingRecovery {
	var pending []idemwf.PendingRecovery
	s.h.waitFor("the incident", func() bool {
		v, err := s.h.tc.QueryWorkflow(context.Background(), run.GetID(), "", idemwf.PendingQuery)
		return err == nil && v.Get(&pending) == nil && len(pending) == 1
	})
	if p := pending[0]; p.Activity != activity || !p.NoResult || p.ResultType != "" {
		s.h.t.Fatalf("incident %+v; want the %s's, which returns only an error", p, activity)
	}
	return pending[0]
}

// decide applies an operator's decision about p.
func (s sagaRun) decide(run client.WorkflowRun, p idemwf.PendingRecovery, d idemwf.Decision, reason string) {
	handle, err := s.h.tc.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), UpdateName: idemwf.ResolveUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{idemwf.Resolution{RecordKey: p.Incident.RecordKey, Attempt: p.Incident.Attempt, Rev: p.Incident.Rev, Decision: d,
			Reason: reason, RequestID: "saga-" + s.h.keys, By: "e2e"}},
	})
	if err != nil {
		s.h.t.Fatal(err)
	}
	if err := handle.Get(context.Background(), nil); err != nil {
		s.h.t.Fatal(err)
	}
}

// waiting is how long the retry may take to meet the incident: the
// heartbeat timeout, then the rest of the dead attempt's lease.
const waiting = 90 * time.Second

// TestAdoptedSagaKilledAfterTheWithdrawal runs the adopted saga sample
// (MaximumAttempts 3): its worker is killed right after the withdrawal.
// The retry waits out the dead attempt's lease inside the attempt, finds
// the withdrawal's effect unknown and waits for a decision; the operator,
// who sees the withdrawal at the bank, decides it completed, with no
// result to type (the activity returns only an error). The saga goes on
// as it would have: the deposit, the failing step, the compensations in
// reverse order. One withdrawal and one compensation of it.
func TestAdoptedSagaKilledAfterTheWithdrawal(t *testing.T) {
	t.Parallel()
	sampleQueueTurn(t)
	h := newHarness(t, 30*time.Second)
	s := sagaRun{h: h, bank: redisSagaBank{rdb: h.rdb, prefix: h.keys}}
	ctx := context.Background()
	in := saga.TransferDetails{Amount: 40, FromAccount: "001-001", ToAccount: "002-002", ReferenceID: "saga-" + h.keys}
	run := s.killAfterTheWithdrawal("saga", func() client.WorkflowRun {
		run, err := h.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.ReferenceID, TaskQueue: saga.TransferMoneyTaskQueue}, saga.TransferMoney, in)
		if err != nil {
			t.Fatal(err)
		}
		return run
	})
	s.restart(func(ctx context.Context) error {
		return saga.RunWorker(ctx, saga.Config{HostPort: temporalServer.Address(), Namespace: temporalServer.Namespace(),
			Bank: s.bank, Redis: h.rdb, Onceflow: sagaOnceflow(h.keys)})
	})
	p := s.incident(run, "Withdraw")
	s.decide(run, p, idemwf.Completed, "the bank lists the withdrawal")
	getCtx, cancel := context.WithTimeout(ctx, waiting)
	defer cancel()
	err := run.Get(getCtx, nil)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Message() != "some error" {
		t.Fatalf("err %v; want the saga's failing step's", err)
	}
	r := in.ReferenceID
	want := []string{"withdraw " + r + "-withdraw", "deposit " + r + "-deposit", "withdraw " + r + "-deposit-compensation", "deposit " + r + "-withdraw-compensation"}
	if ops := s.operations(); !slices.Equal(ops, want) || s.balance("001-001") != 0 || s.balance("002-002") != 0 {
		t.Fatalf("the bank made %q, balances %v and %v; want %q, each account as it was", ops, s.balance("001-001"), s.balance("002-002"), want)
	}
}

// TestMaximumAttemptsTwoKilledAfterTheEffect: a service whose retry
// policy allows two attempts; its worker is killed right after the
// withdrawal. The second attempt meets the dead attempt's live lease and
// waits for it inside the attempt instead of spending the last attempt:
// it finds the effect unknown, and the call waits for a decision, listed.
// Before, the second attempt failed as in progress, the service's retry
// policy gave up, and the workflow failed with the money taken and
// nothing pending.
func TestMaximumAttemptsTwoKilledAfterTheEffect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 30*time.Second)
	s := sagaRun{h: h, bank: redisSagaBank{rdb: h.rdb, prefix: h.keys}}
	ctx := context.Background()
	in := saga.TransferDetails{Amount: 40, FromAccount: "001-001", ToAccount: "002-002", ReferenceID: "two-" + h.keys}
	run := s.killAfterTheWithdrawal("two-attempts", func() client.WorkflowRun {
		run, err := h.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.ReferenceID, TaskQueue: twoAttemptsQueue + h.keys},
			TransferWithTwoAttempts, in)
		if err != nil {
			t.Fatal(err)
		}
		return run
	})
	s.restart(func(ctx context.Context) error {
		return runTwoAttempts(ctx, temporalServer.Address(), temporalServer.Namespace(), h.rdb, h.keys, s.bank)
	})
	p := s.incident(run, "Withdraw")
	if attempt := h.activityAttempt(run); attempt != 2 {
		t.Errorf("the incident came at attempt %d; want the second, which waited for the lease", attempt)
	}
	s.decide(run, p, idemwf.Completed, "the bank lists the withdrawal")
	getCtx, cancel := context.WithTimeout(ctx, waiting)
	defer cancel()
	if err := run.Get(getCtx, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"withdraw " + in.ReferenceID + "-withdraw", "deposit " + in.ReferenceID + "-deposit"}
	if ops := s.operations(); !slices.Equal(ops, want) || s.balance("001-001") != -40 || s.balance("002-002") != 40 {
		t.Fatalf("the bank made %q, balances %v and %v; want %q, one withdrawal", ops, s.balance("001-001"), s.balance("002-002"), want)
	}
}
