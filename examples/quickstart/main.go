// Quickstart is a onceflow worker and a starter in one program: it registers
// a workflow whose activity sends a welcome email, starts that workflow
// twice under one workflow ID, and shows that the email went once.
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
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/worker"
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

// SendWelcome is the activity before wrapping: it is not idempotent.
func SendWelcome(_ context.Context, s Signup) (Sent, error) {
	n := emails.Add(1)
	fmt.Printf("sending the welcome email to %s\n", s.Email)
	return Sent{MessageID: fmt.Sprintf("msg-%d-%s", n, s.UserID)}, nil
}

// Welcome is the workflow: it sends the welcome email.
func Welcome(ctx workflow.Context, s Signup) (Sent, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    10 * time.Second, // required: it drives the lease renewal
	})
	var sent Sent
	err := workflow.ExecuteActivity(ctx, "SendWelcome", s).Get(ctx, &sent)
	return sent, err
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var tc client.Client
	w, err := worker.New(worker.Config{
		TemporalAddress: env("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		Namespace:       env("TEMPORAL_NAMESPACE", "default"),
		RedisURL:        env("REDIS_URL", "redis://127.0.0.1:6379/0"),
		Secret:          []byte(os.Getenv("ONCEFLOW_SECRET")),
		Dev:             os.Getenv("ONCEFLOW_SECRET") == "", // the public dev secret
		TaskQueue:       "quickstart",
		HTTPAddr:        "off",
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Register: func(r worker.Registry) error {
			r.Worker.RegisterWorkflow(Welcome)
			r.Worker.RegisterActivityWithOptions(onceactivity.Wrap(r.Activities, onceactivity.Options[Signup, Sent]{
				Code:  "send-welcome",
				Scope: onceactivity.BusinessScoped, // one email per user, whatever starts it
				Key:   func(s Signup) string { return s.UserID },
			}, SendWelcome), activity.RegisterOptions{Name: "SendWelcome"})
			tc = r.Client
			return nil
		},
	})
	if err != nil {
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	select {
	case <-w.Started():
	case err := <-stopped:
		return err
	}

	// A new user each run; the workflow ID is fixed for both starts, as a
	// signup handler that is retried would start it.
	user := uuid.NewString()
	signup := Signup{UserID: user, Email: user[:8] + "@example.com"}
	for start := 1; start <= 2; start++ {
		we, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
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
	cancel()
	if err := <-stopped; err != nil {
		return err
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
