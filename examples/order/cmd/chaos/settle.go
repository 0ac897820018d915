package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// decision is one operator decision the settle sent.
type decision struct {
	WorkflowID string `json:"workflow_id"`
	RecordKey  string `json:"record"`
	Attempt    int64  `json:"attempt"`
	Rev        int64  `json:"rev"`
	Activity   string `json:"activity"`
	Decision   string `json:"decision"`
	Result     string `json:"result,omitempty"`
	Why        string `json:"why"`
	Outcome    string `json:"outcome"`
}

// settleReport is what the settle did and reached.
type settleReport struct {
	Decisions []decision `json:"decisions"`
	// ClientsFinished: every client of the phases got a final answer or
	// gave up before the settle ran out.
	ClientsFinished bool `json:"clients_finished"`
	// VerifyFinished: likewise for the settle's own asks.
	VerifyFinished bool `json:"verify_finished"`
	// Running is the workflows still running at the end.
	Running int     `json:"running"`
	Seconds float64 `json:"seconds"`
}

// settle stops the faults (Redis up and unpaused, every worker restarted
// without knobs), decides what waits on an operator from the gateway's
// truth, asks every key once more, and waits, at most -settle, for every
// client and workflow to finish.
func (c *cluster) settle(ctx context.Context, l *load) (settleReport, error) {
	began := time.Now()
	c.tl.begin("settle", knobs{}.String())
	c.log.Info("chaos: settling: faults off, workers restarted without knobs", "for at most", c.cfg.settle)
	deadline := began.Add(c.cfg.settle)
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := c.temporal.start(sctx); err != nil {
		return settleReport{}, fmt.Errorf("settle: bring the Temporal server back: %w", err)
	}
	if c.net != nil {
		c.net.clear(sctx)
	}
	if c.pg != nil {
		if err := c.pg.start(sctx); err != nil {
			return settleReport{}, fmt.Errorf("settle: bring PostgreSQL back: %w", err)
		}
	}
	if err := c.redis.restore(sctx); err != nil {
		return settleReport{}, fmt.Errorf("settle: bring Redis back (%s): %w", c.redis.describe(), err)
	}
	if err := c.restartAll(sctx, knobs{}); err != nil {
		c.log.Warn("chaos: a worker is not ready after the settle's restart", "err", err)
	}
	r := &resolver{c: c, tried: map[string]bool{}}
	rctx, stopResolver := context.WithCancel(sctx)
	resolved := make(chan struct{})
	go func() {
		defer close(resolved)
		r.loop(rctx)
	}()
	var rep settleReport
	rep.ClientsFinished = l.wait(sctx)
	c.waitIdle(sctx)
	c.tl.begin("verify", knobs{}.String())
	c.log.Info("chaos: asking every key once more")
	l.verify(sctx, deadline)
	rep.VerifyFinished = l.wait(sctx)
	c.waitIdle(sctx)
	stopResolver()
	<-resolved
	rep.Decisions = r.decisions
	qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
	defer qcancel()
	rep.Running, _ = c.running(qctx)
	rep.Seconds = time.Since(began).Seconds()
	c.tl.begin("check", "")
	return rep, ctx.Err()
}

// running counts the workflows of the task queue still running.
func (c *cluster) running(ctx context.Context) (int, error) {
	n := 0
	err := c.listWorkflows(ctx, fmt.Sprintf("ExecutionStatus = 'Running' AND TaskQueue = '%s'", c.cfg.taskQueue),
		func(*workflowpb.WorkflowExecutionInfo) { n++ })
	return n, err
}

// waitIdle waits until no workflow runs, or ctx is done.
func (c *cluster) waitIdle(ctx context.Context) bool {
	logged := time.Now()
	for {
		n, err := c.running(ctx)
		if err == nil && n == 0 {
			return true
		}
		if time.Since(logged) > 10*time.Second {
			c.log.Info("chaos: settling", "workflows running", n, "err", err)
			logged = time.Now()
		}
		if !sleepCtx(ctx, time.Second) {
			return false
		}
	}
}

// operator runs a worker operator command against the run's Temporal
// server and returns what it printed.
func (c *cluster) operator(ctx context.Context, command string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(append([]string{command}, c.temporalFlags()...), args...)...)
	cmd.Env = c.workerEnv()
	cmd.SysProcAttr = childAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("worker %s: %w: %s", command, err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	return stdout.Bytes(), nil
}

// resolver decides, every two seconds, the incidents `worker pending`
// lists, each once.
type resolver struct {
	c         *cluster
	tried     map[string]bool
	decisions []decision
}

func (r *resolver) loop(ctx context.Context) {
	for {
		r.once(ctx)
		if !sleepCtx(ctx, 2*time.Second) {
			return
		}
	}
}

// paymentType is how `worker pending` names the charge step's result type.
var paymentType = fmt.Sprintf("%T", ledger.Payment{})

func (r *resolver) once(ctx context.Context) {
	out, err := r.c.operator(ctx, "pending", "-json", "-task-queue", r.c.cfg.taskQueue, "-limit", "10000")
	if err != nil {
		if ctx.Err() == nil {
			r.c.log.Warn("chaos: worker pending failed; trying again", "err", err)
		}
		return
	}
	var list []operator.Waiting
	if err := json.Unmarshal(out, &list); err != nil {
		r.c.log.Warn("chaos: worker pending -json printed what does not decode", "err", err)
		return
	}
	for _, w := range list {
		for _, p := range w.Pending {
			id := w.WorkflowID + " " + p.Incident.String()
			if r.tried[id] {
				continue
			}
			d, err := r.decide(ctx, w, p)
			if err != nil {
				r.c.log.Warn("chaos: cannot read the gateway's calls; deciding later", "record", p.Incident.RecordKey, "err", err)
				continue
			}
			r.tried[id] = true
			if d.Decision != "" {
				args := []string{"-workflow-id", w.WorkflowID, "-run-id", w.RunID, "-record", p.Incident.RecordKey,
					"-attempt", strconv.FormatInt(p.Incident.Attempt, 10), "-rev", strconv.FormatInt(p.Incident.Rev, 10),
					"-decision", d.Decision, "-reason", "chaos: " + d.Why}
				if d.Result != "" {
					args = append(args, "-result", d.Result)
				}
				d.Outcome = "applied"
				if _, err := r.c.operator(ctx, "resolve", args...); err != nil {
					d.Outcome = err.Error()
				}
			}
			r.c.log.Info("chaos: decided", "workflow", w.WorkflowID, "activity", p.Activity, "decision", d.Decision, "why", d.Why, "outcome", d.Outcome)
			r.decisions = append(r.decisions, d)
		}
	}
}

// decide decides an incident from the gateway's truth: the ledger's
// gateway_calls under its operation key (the record key). A charge there
// completes the step with it; a decline completes it declined; nothing
// taken retries it.
func (r *resolver) decide(ctx context.Context, w operator.Waiting, p idemwf.PendingRecovery) (decision, error) {
	d := decision{WorkflowID: w.WorkflowID, RecordKey: p.Incident.RecordKey, Attempt: p.Incident.Attempt, Rev: p.Incident.Rev, Activity: p.Activity}
	calls, err := r.c.ledger.GatewayCallsByKey(ctx, p.Incident.RecordKey)
	if err != nil {
		return d, err
	}
	var charge *ledger.GatewayCall
	declined := false
	for i := range calls {
		if calls[i].Charged() {
			charge = &calls[i]
			break
		}
		declined = declined || calls[i].Outcome == ledger.CallDeclined
	}
	type result struct {
		Status          string `json:"status"`
		GatewayChargeID string `json:"gateway_charge_id,omitempty"`
	}
	var res []byte
	switch {
	case charge != nil && p.ResultType == paymentType:
		d.Decision, d.Why = string(idemwf.Completed), "the gateway shows charge "+charge.ChargeID+" ("+charge.Outcome+")"
		res, _ = json.Marshal(result{Status: ledger.PaymentCaptured, GatewayChargeID: charge.ChargeID})
	case charge != nil:
		d.Why = "left undecided: the gateway shows a charge under this key, but the step returns " + p.ResultType
		d.Outcome = "not sent"
	case declined && p.ResultType == paymentType:
		d.Decision, d.Why = string(idemwf.Completed), "the gateway shows a decline and no charge"
		res, _ = json.Marshal(result{Status: ledger.PaymentDeclined})
	default:
		d.Decision, d.Why = string(idemwf.Retry), fmt.Sprintf("the gateway shows no charge under this key (%d calls)", len(calls))
	}
	d.Result = string(res)
	return d, nil
}
