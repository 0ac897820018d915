package e2e_test

// The adoption test of issue 33: examples/transfer/after is a money
// transfer in the style of Temporal's Go samples (its own client.Dial and
// SDK worker, typed bank errors its RetryPolicy does not retry) with
// onceflow adopted in 15 changed lines (examples/transfer's
// TestAdoptionDiff counts them). Here it runs on a real Temporal server and
// Redis, with its own RunWorker.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	transfer "github.com/onceflow/onceflow/examples/transfer/after"
	"github.com/onceflow/onceflow/harness/redistest"
	onceworker "github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// envBlock makes the transfer child's bank hang after each withdrawal, so
// that the test kills the worker right after the effect.
const envBlock = "ONCEFLOW_E2E_BLOCK"

// redisBank is the transfer's Bank in Redis, so that a killed worker's
// withdrawal is seen by the test: balances under <prefix>:bank:<account>,
// and every withdrawal and deposit made, by reference, in a list.
type redisBank struct {
	rdb    redis.UniversalClient
	prefix string
	// block hangs after the withdrawal, until the process is killed.
	block bool
}

func (b redisBank) key(s string) string { return b.prefix + ":bank:" + s }

// move applies amount to account, refusing what the bank refuses, and
// lists the reference under what.
func (b redisBank) move(ctx context.Context, what, account string, amount int, ref string) error {
	balance, err := b.rdb.Get(ctx, b.key(account)).Int()
	switch {
	case errors.Is(err, redis.Nil):
		return &transfer.InvalidAccountError{}
	case err != nil:
		return err
	case balance+amount < 0:
		return &transfer.InsufficientFundsError{}
	}
	if err := b.rdb.IncrBy(ctx, b.key(account), int64(amount)).Err(); err != nil {
		return err
	}
	return b.rdb.RPush(ctx, b.key(what), ref).Err()
}

func (b redisBank) Withdraw(ctx context.Context, account string, amount int, ref string) (string, error) {
	if err := b.move(ctx, "withdrawals", account, -amount, ref); err != nil {
		return "", err
	}
	if b.block {
		select {} // the test kills the process here, after the effect
	}
	return "W-" + ref, nil
}

func (b redisBank) Deposit(ctx context.Context, account string, amount int, ref string) (string, error) {
	if err := b.move(ctx, "deposits", account, amount, ref); err != nil {
		return "", err
	}
	return "D-" + ref, nil
}

// transferConfig is the adopted service's Config on this test's servers.
func transferConfig(hostPort, namespace string, rdb redis.UniversalClient, keys string, bank transfer.Bank) transfer.Config {
	return transfer.Config{
		HostPort: hostPort, Namespace: namespace, Bank: bank, Redis: rdb,
		// The lease runs out before Temporal retries a dead worker's
		// attempt (the interceptor's default heartbeat timeout, 10s).
		Onceflow: onceworker.AttachConfig{Secret: []byte(e2eSecret), KeyNamespace: keys, Lease: 3 * time.Second},
	}
}

// runTransferChild runs the adopted service's RunWorker in a child
// process, with a bank that hangs after a withdrawal.
func runTransferChild() int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	defer rdb.Close()
	keys := os.Getenv(envKeys)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := transfer.RunWorker(ctx, transferConfig(os.Getenv(envTemporal), os.Getenv(envNamespace), rdb, keys, redisBank{rdb: rdb, prefix: keys, block: os.Getenv(envBlock) != ""})); err != nil {
		fmt.Fprintln(os.Stderr, "transfer child:", err)
		return 1
	}
	return 0
}

// startBlockingTransferChild starts the adopted service's worker in a
// process of its own (runTransferChild) whose bank hangs after a
// withdrawal; it is killed at the end of the test if not before.
func (h *harness) startBlockingTransferChild() *exec.Cmd {
	t := h.t
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envChild+"=transfer", envBlock+"=1",
		envTemporal+"="+temporalServer.Address(), envNamespace+"="+temporalServer.Namespace(),
		envRedis+"="+redistest.Addr(t), envKeys+"="+h.keys)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	return child
}

// runTransferWorker runs the adopted service's worker on bank in this
// process until the end of the test.
func (h *harness) runTransferWorker(ctx context.Context, bank redisBank) {
	t := h.t
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() {
		stopped <- transfer.RunWorker(wctx, transferConfig(temporalServer.Address(), temporalServer.Namespace(), h.rdb, h.keys, bank))
	}()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("the transfer worker: %v", err)
		}
	})
}

// TestAdoptedTransfer runs the adopted sample: a worker killed right
// after the withdrawal costs no second withdrawal (the retry finds the
// effect unknown, and the workflow waits for a decision, through
// onceflow's Update, behind its own ExecuteActivity); and the bank's
// InsufficientFundsError reaches the workflow as the service's own
// failure type, not retried, with no incident.
func TestAdoptedTransfer(t *testing.T) {
	t.Parallel()
	sampleQueueTurn(t)
	h := newHarness(t, 3*time.Second)
	ctx := context.Background()
	bank := redisBank{rdb: h.rdb, prefix: h.keys}
	for account, balance := range map[string]int{"85-150": 100, "43-812": 0} {
		if err := h.rdb.Set(ctx, bank.key(account), balance, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	list := func(what string) []string {
		v, err := h.rdb.LRange(ctx, bank.key(what), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	balance := func(account string) int {
		n, err := h.rdb.Get(ctx, bank.key(account)).Int()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The service's worker, in a process of its own, hangs after the
	// withdrawal and is killed there.
	child := h.startBlockingTransferChild()
	in := transfer.PaymentDetails{SourceAccount: "85-150", TargetAccount: "43-812", Amount: 40, ReferenceID: "crash-" + h.keys}
	start := func(in transfer.PaymentDetails) client.WorkflowRun {
		run, err := h.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "transfer-" + in.ReferenceID, TaskQueue: transfer.MoneyTransferTaskQueueName},
			transfer.MoneyTransfer, in)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	run := start(in)
	h.waitFor("the withdrawal", func() bool { return len(list("withdrawals")) == 1 })
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	// The service's worker again, as it restarts after a crash.
	h.runTransferWorker(ctx, bank)

	// The retry found the withdrawal's effect unknown: the workflow waits
	// for a decision, and withdraws nothing more.
	var pending []idemwf.PendingRecovery
	h.waitFor("the incident", func() bool {
		v, err := h.tc.QueryWorkflow(ctx, run.GetID(), "", idemwf.PendingQuery)
		if err != nil {
			return false
		}
		return v.Get(&pending) == nil && len(pending) == 1
	})
	if p := pending[0]; p.Activity != "Withdraw" || p.ResultType != "string" || p.Details.OperationCode != "withdraw" {
		t.Fatalf("incident %+v; want the withdrawal's", p)
	}
	if w := list("withdrawals"); len(w) != 1 {
		t.Fatalf("withdrawals %v; want one", w)
	}
	// The operator looks the reference up at the bank, and decides.
	d := pending[0].Details
	result, _ := json.Marshal("W-" + in.ReferenceID + "-withdrawal")
	handle, err := h.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), UpdateName: idemwf.ResolveUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{idemwf.Resolution{RecordKey: d.RecordKey, Attempt: d.Attempt, Rev: d.Rev, Decision: idemwf.Completed,
			Result: result, Reason: "the bank lists the reference", RequestID: "adoption-" + h.keys, By: "e2e"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := handle.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Transfer complete (transaction IDs: W-%[1]s-withdrawal, D-%[1]s-deposit)", in.ReferenceID)
	if out != want || len(list("withdrawals")) != 1 || len(list("deposits")) != 1 || balance("85-150") != 60 || balance("43-812") != 40 {
		t.Fatalf("result %q, withdrawals %v, deposits %v, balances %d and %d; want %q, one each, 60 and 40",
			out, list("withdrawals"), list("deposits"), balance("85-150"), balance("43-812"), want)
	}

	// The bank refuses a withdrawal over the balance: the workflow gets
	// the bank's own InsufficientFundsError, which its RetryPolicy lists
	// as non-retryable, at the first attempt, and no incident opens.
	poor := start(transfer.PaymentDetails{SourceAccount: "85-150", TargetAccount: "43-812", Amount: 1000, ReferenceID: "poor-" + h.keys})
	// An incident would keep the workflow waiting: give up well before
	// the test's timeout, saying so.
	getCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = poor.Get(getCtx, nil)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != "InsufficientFundsError" || ae.Message() != "insufficient funds" {
		t.Fatalf("err %v; want the bank's InsufficientFundsError", err)
	}
	if attempt := h.activityAttempt(poor); attempt != 1 {
		t.Fatalf("the withdrawal ran %d attempts; want 1", attempt)
	}
	v, err := h.tc.QueryWorkflow(ctx, poor.GetID(), "", idemwf.PendingQuery)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Get(&pending); err != nil || len(pending) != 0 {
		t.Fatalf("pending %+v (%v); want no incident", pending, err)
	}
	if balance("85-150") != 60 {
		t.Fatalf("balance %d after the refusal; want 60", balance("85-150"))
	}
}
