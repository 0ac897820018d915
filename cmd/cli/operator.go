package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/worker"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// operatorSynopses are the operator commands' -h texts.
func operatorSynopsis(command string) string {
	switch command {
	case "pending":
		return `usage: worker pending [-task-queue Q] [-limit N] [-json] [-dev] [Temporal flags]
       worker pending -workflow-id ID [-run-id ID] [-dev] [Temporal flags]

Lists the running workflows of the namespace that wait on a decision,
whatever their type and task queue (-task-queue: of that one only), one
line per incident, with the resolve command to send. Visibility finds them
by the OnceflowPending search attribute, newest first, at most -limit of
them, and only those are asked for their incidents; a namespace without
the attribute is an error naming the command that registers it. Where the binary has an
evidence source (the order example's ledger), each incident's evidence
follows the table, with the decision it implies ready to send. With
-workflow-id: the incidents that workflow waits on and the
decisions it refused, as JSON.`
	case "resolve":
		return `usage: worker resolve -workflow-id ID [-run-id ID] -record KEY -attempt N -rev N
                      -decision completed|retry|fail [-result JSON] [-reason TEXT]
                      [-request-id ID] [-confirm] [-override-retention TEXT]
                      [-signal] [-dev]

Sends the decision about that incident as an Update and prints whether it
was applied or refused (with -signal: as a signal, fire and forget). fail
needs -reason. completed needs -result, the activity's result as JSON of
the type pending shows, except for an activity that returns only an error
(pending's RESULT TYPE says none), which takes none. The request ID (a new
one when not given, printed) makes a resend apply once, and a resend says
it was already applied; the decision carries who sent it ($USER) and when. Where the binary has an
evidence source (the order example's ledger), the step's evidence goes
with it, and a decision against it is refused unless -confirm and -reason
say why it stands. A retry past the downstream's retention of the
operation's key (pending's RETENTION LEFT says expired) is refused unless
-override-retention says why; the reason stays with the decision.`
	case "reopen":
		return `usage: worker reopen -record KEY [-reason TEXT] [-redis-url URL] [-key-namespace NS] [-dev]

Reopens a record a fail decision left FAILED, or an ABANDONED one no
workflow waits on (an idemhttp key whose outcome an operator has found to
be "no effect"), so the next request or attempt runs.`
	case "inspect":
		return `usage: worker inspect -record KEY | -code CODE -key KEY [-namespace NS] [-json] [-dev]

Prints one Redis record, read-only: state, attempt, rev, lease and TTL
left, codec and response size. -code and -key name an activity's business
key, digested with ONCEFLOW_SECRET (-dev: the dev secret) and -namespace.
A corrupt record is reported and the command fails.`
	case "reuses":
		return `usage: worker reuses [-limit N] [-code CODE] [-json] [-redis-url URL] [-key-namespace NS] [-dev]

Prints the trail of business references that arrived under a second
operation key within their window (an activity's DownstreamKey, the
key-derivation guard of docs/guards.md), newest first: when, the
operation code, whether the second was flagged or refused, the key that
holds the reference and the key that came second. The reference itself
is shown only as its keyed digest, as Redis keeps it.`
	}
	return ""
}

// EvidenceFlags plug a service's evidence into the operator commands
// pending and resolve (cmd/worker has none; the order example's binary
// plugs its ledger): flags of its own, and the operator.EvidenceSource
// they open. pending prints each incident's evidence after its table, with
// the decision it implies ready to send; resolve sends it with the
// decision, so that a decision against it is refused unless confirmed.
type EvidenceFlags struct {
	// Register adds the source's flags to the command's flag set.
	Register func(fs *flag.FlagSet, getenv func(string) string)
	// Open opens the source once the flags are parsed; dev says the
	// command runs with -dev. A nil source means none was asked for.
	// close releases it.
	Open func(ctx context.Context, dev bool) (src operator.EvidenceSource, close func(), err error)
}

// open opens the evidence source of e, which may be nil (no source).
func (e *EvidenceFlags) open(ctx context.Context, dev bool) (operator.EvidenceSource, func(), error) {
	if e == nil || e.Open == nil {
		return nil, func() {}, nil
	}
	src, closeSrc, err := e.Open(ctx, dev)
	if closeSrc == nil {
		closeSrc = func() {}
	}
	return src, closeSrc, err
}

func (e *EvidenceFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	if e != nil && e.Register != nil {
		e.Register(fs, getenv)
	}
}

// RunOperator runs an operator command (package operator does the work;
// this parses the arguments and prints): pending, resolve, reopen or
// inspect, each with a flag set of its own (worker COMMAND -h lists it;
// operatorSynopsis says what each does). out receives what the command
// prints, and its help when -h asks for it (the error flag.ErrHelp); a
// command line it cannot run is a *UsageError.
//
// pending and resolve take the Temporal connection flags of the worker
// (-temporal-address, -namespace, the TLS files and the API key), each
// falling back to the same environment variable; reopen and inspect take
// Redis' (-redis-url, -key-namespace). With -dev, what is not given comes
// from the running -dev worker's endpoints file. ev, when not nil, plugs
// a service's evidence into pending and resolve.
func RunOperator(ctx context.Context, command string, args []string, getenv func(string) string, out io.Writer, ev *EvidenceFlags) error {
	env := Env(getenv)
	fs := NewFlagSet(command)
	help := Help{Out: out, Synopsis: operatorSynopsis(command)}
	var c worker.Config
	dev := func(what string) *bool {
		return fs.Bool("dev", env("ONCEFLOW_DEV", "") == "true",
			"talk to the running -dev worker's servers (from its endpoints file) where no address is given"+what+" (ONCEFLOW_DEV=true)")
	}
	redisFlags := func() {
		fs.StringVar(&c.RedisURL, "redis-url", env("REDIS_URL", ""), "Redis URL (REDIS_URL; default "+worker.DefaultConfig().RedisURL+", or with -dev the -dev worker's)")
		fs.StringVar(&c.KeyNamespace, "key-namespace", env("ONCEFLOW_KEY_NAMESPACE", worker.DefaultConfig().KeyNamespace), "prefix of every Redis key (ONCEFLOW_KEY_NAMESPACE)")
	}
	switch command {
	case "pending":
		return runPending(ctx, fs, &c, env, help, args, ev, getenv, dev(""), out)
	case "resolve":
		temporalFlags(fs, &c, env)
		wfID := fs.String("workflow-id", "", "the waiting workflow's ID (required)")
		runID := fs.String("run-id", "", "its run ID (default: the latest run)")
		record := fs.String("record", "", "the record key of the incident, as pending lists it")
		attempt := fs.Int64("attempt", 0, "the incident's attempt, as pending lists it")
		rev := fs.Int64("rev", 0, "the incident's rev, as pending lists it")
		decision := fs.String("decision", "", "completed, retry or fail")
		result := fs.String("result", "", "with -decision completed: the activity's result as JSON (none for an activity that returns only an error)")
		reason := fs.String("reason", "", "why, for the workflow's history and the record; required with -decision fail")
		signal := fs.Bool("signal", false, "send the decision as a signal, without waiting for an answer")
		requestID := fs.String("request-id", "", "the decision's request ID; send a retry of the same decision with the same one, so it applies once (default: a new one, printed)")
		confirm := fs.Bool("confirm", false, "confirm a decision that contradicts the evidence it carries (needs -reason)")
		overrideRetention := fs.String("override-retention", "", "with -decision retry: why to retry although the downstream's retention of the key has passed (pending's RETENTION LEFT says expired); kept with the decision")
		ev.register(fs, getenv)
		useDev := dev("")
		if err := Parse(fs, args, help); err != nil {
			return err
		}
		res := idemwf.Resolution{RecordKey: *record, Attempt: *attempt, Rev: *rev, Decision: idemwf.Decision(*decision), Reason: *reason,
			RequestID: *requestID, By: User(getenv), RequestedAt: time.Now().UTC(), Confirmed: *confirm, OverrideRetention: *overrideRetention}
		if res.OverrideRetention != "" && res.Decision != idemwf.Retry {
			return Usagef(command, "-override-retention goes with -decision retry only")
		}
		if err := validateResolution(&res, *result); err != nil {
			return &UsageError{Command: command, Err: err}
		}
		if res.Confirmed && strings.TrimSpace(res.Reason) == "" {
			return Usagef(command, "-confirm needs -reason: say why the decision stands against the evidence")
		}
		if res.RequestID == "" {
			res.RequestID = operator.NewRequestID()
		}
		if *wfID == "" {
			return Usagef(command, "-workflow-id is required")
		}
		if err := devEndpoints(&c, *useDev, Needs{Temporal: true}, command); err != nil {
			return err
		}
		src, closeSrc, err := ev.open(ctx, *useDev)
		if err != nil {
			return fmt.Errorf("resolve: %w", err)
		}
		defer closeSrc()
		return resolve(ctx, c, *wfID, *runID, res, *signal, src, *useDev, out)
	case "reopen":
		record := fs.String("record", "", "the record key, as pending or inspect shows it (required)")
		reason := fs.String("reason", "", "why, for the record")
		redisFlags()
		useDev := dev("")
		if err := Parse(fs, args, help); err != nil {
			return err
		}
		if *record == "" {
			return Usagef(command, "-record is required")
		}
		if err := devEndpoints(&c, *useDev, Needs{Redis: true}, command); err != nil {
			return err
		}
		return reopen(ctx, c, *record, *reason, out)
	case "inspect":
		record := fs.String("record", "", "the record key")
		code := fs.String("code", "", "the operation code of the record (with -key)")
		key := fs.String("key", "", "the business key of the record (with -code)")
		fs.StringVar(&c.Namespace, "namespace", env("TEMPORAL_NAMESPACE", ""), "with -code and -key: the Temporal namespace the key is digested with (TEMPORAL_NAMESPACE; default "+worker.DefaultConfig().Namespace+")")
		asJSON := fs.Bool("json", false, "print JSON")
		redisFlags()
		useDev := dev("; digest keys with the -dev secret when ONCEFLOW_SECRET is unset")
		if err := Parse(fs, args, help); err != nil {
			return err
		}
		if (*record == "") == (*code == "" || *key == "") {
			return Usagef(command, "give -record KEY, or -code CODE -key KEY")
		}
		if err := devEndpoints(&c, *useDev, Needs{Redis: true}, command); err != nil {
			return err
		}
		return inspect(ctx, c, getenv, *record, *code, *key, *useDev, *asJSON, out)
	case "reuses":
		limit := fs.Int64("limit", 20, "print at most this many entries, newest first")
		code := fs.String("code", "", "only this operation code's")
		asJSON := fs.Bool("json", false, "print JSON")
		redisFlags()
		useDev := dev("")
		if err := Parse(fs, args, help); err != nil {
			return err
		}
		if *limit <= 0 {
			return Usagef(command, "-limit must be positive")
		}
		if err := devEndpoints(&c, *useDev, Needs{Redis: true}, command); err != nil {
			return err
		}
		return reuses(ctx, c, *limit, onceflow.OperationCode(*code), *asJSON, out)
	}
	return Usagef("worker", "unknown operator command %q (want %s)", command, "pending, resolve, reopen, inspect, reuses")
}

// devEndpoints fills in c from the -dev worker's endpoints when dev is
// set, then the defaults.
func devEndpoints(c *worker.Config, dev bool, need Needs, command string) error {
	if dev {
		if err := UseDevEndpoints(c, need, command); err != nil {
			return err
		}
	}
	Defaults(c)
	return nil
}

// User names the CLI's user for a decision's audit: $USER, else the
// operating system's user, else "unknown".
func User(getenv func(string) string) string {
	if u := getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// validateResolution checks what the command can before anything is sent:
// the incident is named, the decision is known, a completed result is
// JSON (none is resolved against the incident once connected:
// needResult), a fail has a reason.
func validateResolution(res *idemwf.Resolution, result string) error {
	if _, err := onceflow.ParseRef(res.RecordKey); err != nil {
		return fmt.Errorf("resolve: -record: %w (copy it from the pending list)", err)
	}
	if res.Attempt <= 0 || res.Rev <= 0 {
		return errors.New("resolve: -attempt and -rev are required: they name the incident, as the pending list shows them")
	}
	switch res.Decision {
	case idemwf.Completed:
		if strings.TrimSpace(result) == "" {
			return nil // an activity that returns only an error takes none: needResult
		}
		if !json.Valid([]byte(result)) {
			return errors.New("resolve: -result must be the activity's result as valid JSON (the pending list says its type)")
		}
		res.Result = json.RawMessage(result)
	case idemwf.Retry, idemwf.Fail:
		if result != "" {
			return fmt.Errorf("resolve: -result goes with -decision completed only, not %s", res.Decision)
		}
		if res.Decision == idemwf.Fail && strings.TrimSpace(res.Reason) == "" {
			return errors.New("resolve: -decision fail needs -reason: say why the operation is given up (the workflow's failure path runs with it, and the audit keeps it)")
		}
	default:
		return fmt.Errorf("resolve: -decision must be completed, retry or fail, got %q", res.Decision)
	}
	return nil
}

// pending prints what one workflow waits on, as JSON.
func pending(ctx context.Context, c worker.Config, wfID, runID string, out io.Writer) error {
	tc, err := Dial(ctx, c, "pending")
	if err != nil {
		return err
	}
	defer tc.Close()
	rep, err := operator.Pending(ctx, tc, wfID, runID)
	if err != nil {
		return fmt.Errorf("pending: %w", err)
	}
	return printJSON(out, rep)
}

// runPending is the pending command: its flags on fs, then the list of
// every waiting workflow (or one workflow's incidents, as JSON).
func runPending(ctx context.Context, fs *flag.FlagSet, c *worker.Config, env func(key, fallback string) string, help Help, args []string,
	ev *EvidenceFlags, getenv func(string) string, useDev *bool, out io.Writer,
) error {
	const command = "pending"
	temporalFlags(fs, c, env)
	wfID := fs.String("workflow-id", "", "one workflow: print what it waits on and the decisions it refused, as JSON")
	runID := fs.String("run-id", "", "with -workflow-id: its run ID (default: the latest run)")
	fs.StringVar(&c.TaskQueue, "task-queue", env("TEMPORAL_TASK_QUEUE", ""), "list only the workflows of this task queue (TEMPORAL_TASK_QUEUE; default: every task queue of the namespace)")
	limit := fs.Int("limit", 100, "list at most this many waiting workflows")
	asJSON := fs.Bool("json", false, "print JSON")
	ask := fs.Bool("ask", false, "ask the downstream now, through each activity's own Reconcile, about every listed incident of an activity that declares one (recorded in its workflow's history)")
	ev.register(fs, getenv)
	if err := Parse(fs, args, help); err != nil {
		return err
	}
	if *limit <= 0 {
		return Usagef(command, "-limit must be positive, got %d", *limit)
	}
	queue := c.TaskQueue // empty: every task queue, not Defaults' one
	if err := devEndpoints(c, *useDev, Needs{Temporal: true}, command); err != nil {
		return err
	}
	c.TaskQueue = queue
	if *wfID != "" {
		return pending(ctx, *c, *wfID, *runID, out)
	}
	var src operator.EvidenceSource
	if !*asJSON {
		s, closeSrc, err := ev.open(ctx, *useDev)
		if err != nil {
			return fmt.Errorf("pending: %w", err)
		}
		defer closeSrc()
		src = s
	}
	return pendingList(ctx, *c, *limit, *asJSON, *ask, src, *useDev, out)
}

// pendingList prints every waiting workflow of the task queue. What could
// be read is printed; the workflows that could not be asked make the
// command fail after it.
func pendingList(ctx context.Context, c worker.Config, limit int, asJSON, ask bool, src operator.EvidenceSource, dev bool, out io.Writer) error {
	tc, err := Dial(ctx, c, "pending")
	if err != nil {
		return err
	}
	defer tc.Close()
	list, listErr := operator.ListPending(ctx, tc, c.Namespace, c.TaskQueue, limit)
	if listErr != nil {
		listErr = fmt.Errorf("pending: %w", listErr)
	}
	if list == nil {
		return listErr
	}
	if ask {
		list = askDownstream(ctx, tc, list, out)
	}
	var assessed []operator.Assessed
	if !asJSON {
		// The service's own source first; else what the activity's own
		// Reconcile said when last asked.
		assessed, _ = operator.Assess(ctx, operator.FirstEvidence(src, operator.AskedEvidence), list) // a failure is in its step's EvidenceError
	}
	if err := printPending(list, assessed, pendingScope(c.Namespace, c.TaskQueue), asJSON, dev, out); err != nil {
		return err
	}
	return listErr
}

// askDownstream asks, for every incident of list whose activity declares
// a Reconcile, the downstream now (operator.AskDownstream), and returns
// list with the answers as its evidence; a failure is said on out, and
// the incident keeps what it had.
func askDownstream(ctx context.Context, tc client.Client, list []operator.Waiting, out io.Writer) []operator.Waiting {
	for i, w := range list {
		for j, p := range w.Pending {
			if !p.Reconcile {
				continue
			}
			ev, err := operator.AskDownstream(ctx, tc, w.WorkflowID, w.RunID, p.Incident)
			if err != nil {
				fmt.Fprintf(out, "could not ask the downstream about %s in %s: %s\n", Printable(p.Incident.String()), Printable(w.WorkflowID), Printable(err.Error()))
				continue
			}
			list[i].Pending[j].Evidence = &ev
		}
	}
	return list
}

// pendingScope names what pending lists: "namespace NS, task queue Q",
// or "namespace NS, every task queue".
func pendingScope(namespace, taskQueue string) string {
	if taskQueue == "" {
		return "namespace " + namespace + ", every task queue"
	}
	return "namespace " + namespace + ", task queue " + taskQueue
}

// resultType is an incident's RESULT TYPE: the Go type of its result, or
// "none" for an activity that returns only an error.
func resultType(p idemwf.PendingRecovery) string {
	if p.NoResult {
		return "none"
	}
	return p.ResultType
}

// resultArg is the -result argument of a completed decision's hint:
// result, or none for an activity that returns only an error.
func resultArg(p idemwf.PendingRecovery, result string) string {
	if p.NoResult {
		return ""
	}
	return " -result '" + result + "'"
}

// printPending prints the waiting workflows as JSON or a table; scope
// names what was listed (pendingScope); assessed, when not empty, is each
// incident's evidence, printed after the table with the decision it
// implies ready to send; dev adds -dev to the commands it prints.
func printPending(list []operator.Waiting, assessed []operator.Assessed, scope string, asJSON, dev bool, out io.Writer) error {
	if asJSON {
		return printJSON(out, list)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(out, "no running workflow waits on a decision (%s)\n", Printable(scope))
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW ID\tACTIVITY\tRECORD\tATTEMPT\tREV\tSTATE\tRESULT TYPE\tSINCE\tRETENTION LEFT")
	now := time.Now()
	var first *operator.Waiting // the first with incidents, for the hint
	for i, w := range list {
		if len(w.Pending) == 0 {
			fmt.Fprintf(tw, "%s\t(%d incidents: it did not answer the query; the error follows)\t\t\t\t\t\t\t\n", Printable(w.WorkflowID), w.Count)
			continue
		}
		if first == nil {
			first = &list[i]
		}
		for _, p := range w.Pending {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", Printable(w.WorkflowID), Printable(p.Activity), Printable(p.Incident.RecordKey), p.Incident.Attempt, p.Incident.Rev,
				Printable(string(p.Details.State)), Printable(resultType(p)), p.Since.UTC().Format(time.RFC3339), RetentionLeft(p.RetentionEnds, p.RetentionPassed, now))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range assessed {
		inc := a.Pending.Incident
		switch {
		case a.Evidence != nil:
			fmt.Fprintf(out, "\nevidence for %s in %s: %s\n", Printable(inc.String()), Printable(a.WorkflowID), Printable(a.Evidence.Summary))
			for _, f := range a.Evidence.Facts {
				fmt.Fprintf(out, "  %s\n", Printable(f))
			}
			if d := a.Evidence.Implies; d != "" {
				result := ""
				if d == idemwf.Completed && len(a.Evidence.Result) > 0 {
					result = resultArg(a.Pending, string(a.Evidence.Result))
				}
				fmt.Fprintf(out, "  implies %s: %s -workflow-id %s -record %s -attempt %d -rev %d -decision %s%s -reason TEXT\n",
					Printable(string(d)), Command("resolve", dev), Printable(a.WorkflowID), Printable(inc.RecordKey), inc.Attempt, inc.Rev, Printable(string(d)), Printable(result))
			}
		case a.EvidenceError != "":
			fmt.Fprintf(out, "\nevidence for %s in %s could not be read: %s\n", Printable(inc.String()), Printable(a.WorkflowID), Printable(a.EvidenceError))
		}
	}
	if first == nil {
		return nil
	}
	p := first.Pending[0]
	_, err := fmt.Fprintf(out, "\ndecide with: %s -workflow-id %s -record %s -attempt %d -rev %d -decision completed%s (or retry, or fail -reason TEXT)\n",
		Command("resolve", dev), Printable(first.WorkflowID), Printable(p.Incident.RecordKey), p.Incident.Attempt, p.Incident.Rev, Printable(resultArg(p, "<"+p.ResultType+" as JSON>")))
	return err
}

// resolve sends a decision and prints the workflow's answer.
func resolve(ctx context.Context, c worker.Config, wfID, runID string, res idemwf.Resolution, signal bool, src operator.EvidenceSource, dev bool, out io.Writer) error {
	tc, err := Dial(ctx, c, "resolve")
	if err != nil {
		return err
	}
	defer tc.Close()
	if res.Decision == idemwf.Completed && len(res.Result) == 0 {
		if err := needResult(ctx, tc, wfID, runID, &res); err != nil {
			return err
		}
	}
	if res.Evidence == nil {
		if err := attachEvidence(ctx, tc, wfID, runID, operator.FirstEvidence(src, operator.AskedEvidence), &res); err != nil {
			return fmt.Errorf("resolve: %w", err)
		}
	}
	if signal {
		if err := operator.SignalResolve(ctx, tc, wfID, runID, res); err != nil {
			return fmt.Errorf("resolve: %w", err)
		}
		_, err := fmt.Fprintf(out, "sent %s for %s to %s as a signal (request %s): no answer comes back; run %s -workflow-id %s to see it applied or refused\n", res.Decision, res.Incident(), wfID, res.RequestID, Command("pending", dev), wfID)
		return err
	}
	reply, err := operator.Resolve(ctx, tc, wfID, runID, res)
	var refused *operator.DecisionRefusedError
	var contradiction *operator.ContradictionError
	switch {
	case errors.As(err, &contradiction):
		_, _ = fmt.Fprintf(out, "not sent: %s contradicts the evidence, which implies %s (%s)\n", res.Decision, contradiction.Evidence.Implies, contradiction.Evidence.Summary)
		return fmt.Errorf("resolve: %w", err)
	case errors.As(err, &refused):
		_, _ = fmt.Fprintln(out, Printable(refused.Message))
		return fmt.Errorf("resolve: the workflow %s %s", wfID, refused.Message)
	case err != nil:
		return fmt.Errorf("resolve: %w", err)
	case reply.Signalled:
		_, err := fmt.Fprintf(out, "this Temporal server does not take Updates; sent %s for %s to %s as a signal (request %s): run %s -workflow-id %s to see it applied or refused\n", res.Decision, res.Incident(), wfID, res.RequestID, Command("pending", dev), wfID)
		return err
	}
	return writeApplied(out, wfID, res.RequestID, reply.DecisionReply)
}

// writeApplied prints the answer of a workflow that took the decision of
// request requestID: applied, or already applied by that request before
// (a resend), when nothing changed.
func writeApplied(out io.Writer, wfID, requestID string, reply idemwf.DecisionReply) error {
	if reply.Repeated {
		_, err := fmt.Fprintf(out, "already applied by request %s: %s for %s in %s; nothing changed\n", requestID, reply.Decision, reply.Applied, wfID)
		return err
	}
	_, err := fmt.Fprintf(out, "applied: %s for %s in %s (request %s)\n", reply.Decision, reply.Applied, wfID, requestID)
	return err
}

// needResult completes res, a completed decision given no -result: an
// activity that returns only an error takes none (null is sent); any
// other needs -result, and the error names its type. The workflow's
// incidents say which it is; an incident it does not list (decided
// already: a resend, which Resolve answers; or mistyped) is left to the
// workflow to answer.
func needResult(ctx context.Context, tc client.Client, wfID, runID string, res *idemwf.Resolution) error {
	pending, err := operator.PendingRecoveries(ctx, tc, wfID, runID)
	if err != nil {
		return fmt.Errorf("resolve: -decision completed without -result: asking the workflow whether the activity returns a result failed: %w", err)
	}
	for _, p := range pending {
		switch {
		case p.Incident != res.Incident():
		case p.NoResult:
			res.Result = json.RawMessage("null")
			return nil
		default:
			return &UsageError{Command: "resolve", Err: fmt.Errorf("resolve: -decision completed needs -result: %s's result as JSON, a %s", Printable(p.Activity), Printable(p.ResultType))}
		}
	}
	return nil
}

// attachEvidence reads the evidence for the incident res names from src
// and puts it in res, so that a decision against it is
// refused unless confirmed, and the history keeps what it said. An
// incident the workflow does not list is left to the workflow to refuse.
func attachEvidence(ctx context.Context, tc client.Client, wfID, runID string, src operator.EvidenceSource, res *idemwf.Resolution) error {
	pending, err := operator.PendingRecoveries(ctx, tc, wfID, runID)
	if err != nil {
		return err
	}
	for _, p := range pending {
		if p.Incident != res.Incident() {
			continue
		}
		ev, err := src.Evidence(ctx, operator.Step{WorkflowID: wfID, RunID: runID, Pending: p})
		switch {
		case errors.Is(err, operator.ErrNoEvidence):
			return nil
		case err != nil:
			return fmt.Errorf("reading the evidence failed, so the decision was not sent: %w", err)
		}
		res.Evidence = &ev
		return nil
	}
	return nil
}

// reopen reopens a FAILED or ABANDONED record and prints what it was.
func reopen(ctx context.Context, c worker.Config, record, reason string, out io.Writer) error {
	ref, err := onceflow.ParseRef(record)
	if err != nil {
		return fmt.Errorf("reopen: -record: %w", err)
	}
	store, closeStore, err := OpenStore(c)
	if err != nil {
		return err
	}
	defer closeStore()
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		return err
	}
	was, err := exec.Reopen(ctx, ref, reason)
	switch {
	case errors.Is(err, onceflow.OutcomeNoRecord) && !was.State.Valid():
		return fmt.Errorf("reopen: there is no record %s under the key namespace %q (expired, or check -key-namespace)", record, c.KeyNamespace)
	case err != nil:
		return fmt.Errorf("reopen: %w", err)
	}
	_, err = fmt.Fprintf(out, "reopened %s: the next attempt runs (it was %s: %s)\n", record, was.State, Printable(was.Reason))
	return err
}

// inspect prints one record: by -record, or by -code and -key (a business
// key, digested with the workers' secret and the Temporal namespace).
func inspect(ctx context.Context, c worker.Config, getenv func(string) string, record, code, key string, dev, asJSON bool, out io.Writer) error {
	var ref onceflow.Ref
	switch {
	case record != "":
		r, err := onceflow.ParseRef(record)
		if err != nil {
			return fmt.Errorf("inspect: -record: %w", err)
		}
		ref = r
	case code != "" && key != "":
		oc, err := onceflow.ParseOperationCode(code)
		if err != nil {
			return fmt.Errorf("inspect: -code: %w", err)
		}
		dig, err := Digester(getenv, dev)
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		ref = operator.BusinessRef(dig, c.Namespace, oc, key)
	default:
		return errors.New("inspect: give -record KEY, or -code CODE -key KEY")
	}
	store, closeStore, err := OpenStore(c)
	if err != nil {
		return err
	}
	defer closeStore()
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		return err
	}
	rep, err := operator.Inspect(ctx, exec, ref)
	if asJSON {
		if jerr := printJSON(out, rep); jerr != nil {
			return jerr
		}
	} else if werr := WriteRecordReport(out, "", rep); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("inspect: %s: %w", ref, err)
	}
	return nil
}

// printJSON prints v as indented JSON.
func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// RetentionLeft is the RETENTION LEFT column of an incident: the time
// left at now before the downstream's retention of the operation's key
// ends, "expired <d> ago" after it (a retry then needs
// -override-retention), "expired" when the activity refused to run past
// it, "-" when the activity declares no retention.
func RetentionLeft(ends time.Time, passed bool, now time.Time) string {
	switch {
	case ends.IsZero() && passed:
		return "expired"
	case ends.IsZero():
		return "-"
	case !now.Before(ends):
		return "expired " + now.Sub(ends).Truncate(time.Second).String() + " ago"
	}
	return ends.Sub(now).Truncate(time.Second).String()
}

// reuses prints the store's trail of reused business references.
func reuses(ctx context.Context, c worker.Config, limit int64, code onceflow.OperationCode, asJSON bool, out io.Writer) error {
	store, closeStore, err := OpenStore(c)
	if err != nil {
		return err
	}
	defer closeStore()
	list, err := store.Reuses(ctx, limit)
	if err != nil {
		return fmt.Errorf("reuses: %w", err)
	}
	type row struct {
		At        time.Time `json:"at"`
		Code      string    `json:"code"`
		Action    string    `json:"action"`
		Reference string    `json:"reference_digest"`
		Holder    string    `json:"holder"`
		Key       string    `json:"key"`
	}
	rows := make([]row, 0, len(list))
	for _, u := range list {
		if code != "" && u.Reference.Code != code {
			continue
		}
		action := "flagged"
		if u.Refused {
			action = "refused"
		}
		rows = append(rows, row{At: u.At, Code: string(u.Reference.Code), Action: action, Reference: u.Reference.Digest.Hex, Holder: u.Holder, Key: u.Key})
	}
	if asJSON {
		return printJSON(out, rows)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(out, "no reused references")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tCODE\tACTION\tHOLDER (FIRST KEY)\tSECOND KEY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.At.Format(time.RFC3339), Printable(r.Code), r.Action, Printable(r.Holder), Printable(r.Key))
	}
	return tw.Flush()
}
