// Quickstart is a Temporal worker and a starter in one program, with
// onceflow attached to its own Temporal and Redis clients: it starts a
// workflow whose activity sends a welcome email twice under one workflow
// ID, and shows that the email went once.
//
// It reads TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE
// (default "default"), REDIS_URL (default redis://127.0.0.1:6379/0) and
// ONCEFLOW_SECRET (default: the public dev secret). On success it prints
// "sent once: 1 effect for 2 starts" and exits 0.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	onceactivity "github.com/onceflow/onceflow/activity"
	onceworker "github.com/onceflow/onceflow/worker"
)

// Signup is the workflow's and the activity's input.
type Signup struct {
	UserID string `json:"userId"`
	Email  string `json:"email"`
}

// Sent is the activity's result, stored in Redis and replayed.
type Sent struct {
	MessageID string `json:"messageId"`
}

// emails counts the emails actually sent: the side effect.
var emails atomic.Int64

// SendWelcome is the activity, as written for Temporal alone: it is not
// idempotent.
func SendWelcome(_ context.Context, s Signup) (Sent, error) {
	n := emails.Add(1)
	fmt.Printf("sending the welcome email to %s\n", s.Email)
	return Sent{MessageID: fmt.Sprintf("msg-%d-%s", n, s.UserID)}, nil
}

// Welcome is the workflow, as written for Temporal alone.
func Welcome(ctx workflow.Context, s Signup) (Sent, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var sent Sent
	err := workflow.ExecuteActivity(ctx, SendWelcome, s).Get(ctx, &sent)
	return sent, err
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.Dial(client.Options{HostPort: env("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		Namespace: env("TEMPORAL_NAMESPACE", "default"), Logger: sdklog.NewStructuredLogger(quiet)})
	if err != nil {
		return err
	}
	defer c.Close()
	opts, err := redis.ParseURL(env("REDIS_URL", "redis://127.0.0.1:6379/0"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	// onceflow, attached to the clients above; then the SDK worker as
	// usual, with onceflow's interceptors, and the activity registered
	// through onceflow under the name the workflow calls.
	once, err := onceworker.Attach(ctx, c, rdb, onceworker.AttachConfig{Secret: []byte(env("ONCEFLOW_SECRET", onceworker.DevSecret)), Logger: quiet})
	if err != nil {
		return err
	}
	defer once.Close()
	w := worker.New(c, "quickstart", worker.Options{Interceptors: once.Interceptors()})
	w.RegisterWorkflow(Welcome)
	onceactivity.Register(w, once.Activities, SendWelcome,
		onceactivity.BusinessKey(func(s Signup) string { return s.UserID })) // one email per user, whatever starts it
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	// A new user each run; the workflow ID is fixed for both starts, as a
	// signup handler that is retried would start it.
	user := uuid.NewString()
	signup := Signup{UserID: user, Email: user[:8] + "@example.com"}
	for start := 1; start <= 2; start++ {
		we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                    "welcome-" + user,
			TaskQueue:             "quickstart",
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, // a second run
		}, Welcome, signup)
		if err != nil {
			return err
		}
		var sent Sent
		if err := we.Get(ctx, &sent); err != nil {
			return err
		}
		fmt.Printf("start %d: workflow %s run %s: message %s\n", start, we.GetID(), we.GetRunID(), sent.MessageID)
	}
	if n := emails.Load(); n != 1 {
		return fmt.Errorf("%d effects for 2 starts, want 1", n)
	}
	fmt.Println("sent once: 1 effect for 2 starts")
	return nil
}

// env returns the environment variable name, or def when it is empty.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
