package idemstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// ExecuteWaiting waits while another attempt holds the operation, and
// replays its result once it completes; a deadline or a cancelled context
// ends the wait with an error that is still an *onceflow.Error.
func TestExecuteWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idemstore.ExecutorConfig{})
	req := request(storetest.NewFixture())
	running, finish := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := e.exec.Execute(context.Background(), req, func(context.Context) ([]byte, error) {
			close(running)
			<-finish
			return []byte("first"), nil
		})
		first <- err
	}()
	<-running
	other := req
	// Another invocation: it cannot take over a live lease.

	// The deadline passes while the first runs.
	_, waited, err := e.exec.ExecuteWaiting(context.Background(), other, nil, idemstore.Waiting{Deadline: time.Now().Add(60 * time.Millisecond), MinDelay: 10 * time.Millisecond})
	var ip *onceflow.Error
	if !waited || !errors.As(err, &ip) {
		t.Fatalf("after the deadline: waited %v, %v; want an *onceflow.Error", waited, err)
	}
	// The context ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, waited, err = e.exec.ExecuteWaiting(ctx, other, nil, idemstore.Waiting{MinDelay: 10 * time.Millisecond, OnWait: func(*onceflow.Error) { calls++; cancel() }})
	if !waited || calls != 1 || !errors.As(err, &ip) || !errors.Is(err, context.Canceled) || ip.Outcome != onceflow.OutcomeInProgress {
		t.Fatalf("cancelled: waited %v, OnWait %d times, %v", waited, calls, err)
	}
	// Waiting until the first completes replays its result.
	done := make(chan struct{})
	var res idemstore.Result
	go func() {
		defer close(done)
		res, waited, err = e.exec.ExecuteWaiting(context.Background(), other, func(context.Context) ([]byte, error) {
			return nil, errors.New("the waiting attempt must not run the action")
		}, idemstore.Waiting{MinDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond, OnWait: func(*onceflow.Error) { close(finish) }})
	}()
	<-done
	if err != nil || !waited || string(res.Response) != "first" || res.Outcome != onceflow.OutcomeReplayed {
		t.Fatalf("after the first completed: %+v, waited %v, %v", res, waited, err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}
