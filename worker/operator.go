package worker

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	idemwf "github.com/onceflow/onceflow/workflow"
)

// RunOperator runs an operator command against a workflow waiting in
// idemwf.Execute:
//
//	pending -workflow-id ID [-run-id ID]
//	    prints the operations whose effect is unknown, as JSON
//	resolve -workflow-id ID [-run-id ID] -record KEY -decision completed|retry|fail [-result JSON] [-reason TEXT]
//	    sends the decision (the onceflow.resolve signal)
//
// Both take -temporal-address and -namespace, falling back to
// TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE.
func RunOperator(ctx context.Context, command string, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(out)
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	addr := fs.String("temporal-address", env("TEMPORAL_ADDRESS", DefaultTemporalAddress), "Temporal frontend host:port (TEMPORAL_ADDRESS)")
	ns := fs.String("namespace", env("TEMPORAL_NAMESPACE", DefaultNamespace), "Temporal namespace (TEMPORAL_NAMESPACE)")
	wfID := fs.String("workflow-id", "", "the waiting workflow's ID (required)")
	runID := fs.String("run-id", "", "its run ID (default: the latest run)")
	record := fs.String("record", "", "resolve: the record key from the pending list (required)")
	decision := fs.String("decision", "", "resolve: completed, retry or fail (required)")
	result := fs.String("result", "", "resolve completed: the activity's result as JSON")
	reason := fs.String("reason", "", "resolve: why, for the history and the record")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *wfID == "" {
		return fmt.Errorf("%s: -workflow-id is required", command)
	}
	var res idemwf.Resolution
	switch command {
	case "pending":
	case "resolve":
		res = idemwf.Resolution{RecordKey: *record, Decision: idemwf.Decision(*decision), Reason: *reason}
		if res.RecordKey == "" {
			return errors.New("resolve: -record is required (see the pending command)")
		}
		switch res.Decision {
		case idemwf.Completed:
			if !json.Valid([]byte(*result)) {
				return errors.New("resolve: -decision completed needs -result with the activity's result as valid JSON")
			}
			res.Result = json.RawMessage(*result)
		case idemwf.Retry, idemwf.Fail:
		default:
			return fmt.Errorf("resolve: -decision must be completed, retry or fail, got %q", *decision)
		}
	default:
		return fmt.Errorf("unknown operator command %q (want pending or resolve)", command)
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: *addr, Namespace: *ns, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("%s: Temporal at %s is not reachable (check -temporal-address): %w", command, *addr, err)
	}
	defer c.Close()
	if command == "resolve" {
		if err := c.SignalWorkflow(ctx, *wfID, *runID, idemwf.ResolveSignal, res); err != nil {
			return fmt.Errorf("resolve: signal %s: %w", *wfID, err)
		}
		_, err := fmt.Fprintf(out, "sent %s %s to %s\n", res.Decision, res.RecordKey, *wfID)
		return err
	}
	v, err := c.QueryWorkflow(ctx, *wfID, *runID, idemwf.PendingQuery)
	if err != nil {
		return fmt.Errorf("pending: query %s: %w", *wfID, err)
	}
	var pending []idemwf.PendingRecovery
	if err := v.Get(&pending); err != nil {
		return fmt.Errorf("pending: decode the answer: %w", err)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(pending)
}
