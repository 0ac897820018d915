package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	idemwf "github.com/onceflow/onceflow/workflow"
)

// History is what a workflow's history says of it, for a person: its
// type, its input, and its timeline.
type History struct {
	// Type is the workflow's type.
	Type string `json:"workflow_type,omitempty"`
	// Input are the workflow's arguments, each as JSON (a payload the
	// default data converter cannot read as JSON is left out).
	Input []json.RawMessage `json:"input,omitempty"`
	// Timeline is one row per thing that happened to the workflow or its
	// steps, oldest first, and the activities it runs now.
	Timeline []Event `json:"timeline,omitempty"`
	// Truncated says the history had more than MaxHistoryEvents events:
	// the timeline shows the first of them only.
	Truncated bool `json:"truncated,omitempty"`
	// Closed is the status the history's closing event gave the run
	// (COMPLETED, FAILED, TERMINATED, …, as Status names them), "" while
	// it runs. The history is read after the description, so a run that
	// closed in between (a decision's workflow completing) is closed
	// here while its description says RUNNING.
	Closed string `json:"closed,omitempty"`
}

// Status is a workflow status as the operator tools show it: RUNNING,
// COMPLETED, CONTINUEDASNEW, ….
func Status(s enumspb.WorkflowExecutionStatus) string { return strings.ToUpper(s.String()) }

// closedBy is the status a closing event gives the run, or
// WORKFLOW_EXECUTION_STATUS_UNSPECIFIED for any other event.
func closedBy(t enumspb.EventType) enumspb.WorkflowExecutionStatus {
	switch t {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		return enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		return enumspb.WORKFLOW_EXECUTION_STATUS_FAILED
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		return enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		return enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		return enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
	}
	return enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED
}

// Event is one row of a workflow's timeline: what happened to the workflow
// or one of its steps, when, in which attempt, and who did it.
type Event struct {
	Time time.Time `json:"time"`
	// Step is the activity's type (order.ChargeCard), the Update or
	// signal's name (onceflow.decide), or "workflow".
	Step string `json:"step"`
	// State is what happened: scheduled, started, completed, failed,
	// running (an activity retrying now), a decision, and so on.
	State string `json:"state"`
	// Attempt is the activity's Temporal attempt (0 where none applies).
	Attempt int32 `json:"attempt,omitempty"`
	// Actor is who did it: a worker's or a client's identity, the
	// decision's principal, or "workflow" for what the workflow did.
	Actor string `json:"actor,omitempty"`
	// Detail is a failure's message, or a decision's reason.
	Detail string `json:"detail,omitempty"`
}

// MaxHistoryEvents bounds the history ReadHistory reads: a timeline is
// for following one business operation, not a workflow that continued as
// new for days.
const MaxHistoryEvents = 2000

// ReadHistory reads a workflow's history (runID "": the latest run) as a
// person follows it: its input and a timeline, oldest first, with the
// activities it runs now (from d, its description, which may be nil: an
// activity that retries has no started event in the history until it
// ends; none once the history shows the run closed, History.Closed). A
// decision's row names the decision and who sent it (the
// idemwf.Resolution of an onceflow.decide Update or onceflow.resolve
// signal). What could be read before an error is returned with it.
func ReadHistory(ctx context.Context, tc client.Client, wfID, runID string, d *workflowservice.DescribeWorkflowExecutionResponse) (History, error) {
	it := tc.GetWorkflowHistory(ctx, wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h History
	activities := map[int64]string{} // scheduled event ID -> activity type
	attempts := map[int64]int32{}    // scheduled event ID -> started attempt
	for n := 0; it.HasNext(); n++ {
		if n == MaxHistoryEvents {
			h.Truncated = true
			break
		}
		e, err := it.Next()
		if err != nil {
			return h, fmt.Errorf("operator: read the history of workflow %s: %w", wfID, err)
		}
		if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			h.Type = a.GetWorkflowType().GetName()
			for _, p := range a.GetInput().GetPayloads() {
				var v json.RawMessage
				if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err == nil && json.Valid(v) {
					h.Input = append(h.Input, v)
				}
			}
		}
		if ev, ok := event(e, activities, attempts); ok {
			h.Timeline = append(h.Timeline, ev)
		}
		if s := closedBy(e.GetEventType()); s != enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
			h.Closed = Status(s)
		}
	}
	running := d.GetPendingActivities()
	if h.Closed != "" {
		running = nil // the description is older than the history's end
	}
	for _, pa := range running {
		state := "running"
		if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED {
			state = "waiting to retry"
		}
		at := pa.GetLastStartedTime().AsTime()
		if pa.GetLastStartedTime() == nil {
			at = time.Now()
		}
		ev := Event{Time: at, Step: pa.GetActivityType().GetName(), State: state, Attempt: pa.GetAttempt(), Actor: pa.GetLastWorkerIdentity()}
		if f := pa.GetLastFailure(); f != nil {
			ev.Detail = "last failure: " + f.GetMessage()
		}
		h.Timeline = append(h.Timeline, ev)
	}
	sort.SliceStable(h.Timeline, func(i, j int) bool { return h.Timeline[i].Time.Before(h.Timeline[j].Time) })
	return h, nil
}

// event is the timeline's row for a history event; false for the events
// a person following a business operation need not read (workflow tasks,
// markers, search attributes, timers).
func event(e *historypb.HistoryEvent, activities map[int64]string, attempts map[int64]int32) (Event, bool) {
	ev := Event{Time: e.GetEventTime().AsTime()}
	wf := func(state, actor, detail string) (Event, bool) {
		ev.Step, ev.State, ev.Actor, ev.Detail = "workflow", state, actor, detail
		return ev, true
	}
	act := func(scheduled int64, state, actor, detail string) (Event, bool) {
		ev.Step, ev.State, ev.Attempt, ev.Actor, ev.Detail = activities[scheduled], state, attempts[scheduled], actor, detail
		return ev, true
	}
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		a := e.GetWorkflowExecutionStartedEventAttributes()
		return wf("started "+a.GetWorkflowType().GetName(), a.GetIdentity(), "")
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		a := e.GetActivityTaskScheduledEventAttributes()
		activities[e.GetEventId()] = a.GetActivityType().GetName()
		return act(e.GetEventId(), "scheduled", "workflow", "")
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		a := e.GetActivityTaskStartedEventAttributes()
		attempts[a.GetScheduledEventId()] = a.GetAttempt()
		detail := ""
		if f := a.GetLastFailure(); f != nil {
			detail = "last failure: " + f.GetMessage()
		}
		return act(a.GetScheduledEventId(), "started", a.GetIdentity(), detail)
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		a := e.GetActivityTaskCompletedEventAttributes()
		return act(a.GetScheduledEventId(), "completed", a.GetIdentity(), "")
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := e.GetActivityTaskFailedEventAttributes()
		state := "failed"
		if t := a.GetFailure().GetApplicationFailureInfo().GetType(); t != "" {
			state += " (" + t + ")"
		}
		return act(a.GetScheduledEventId(), state, a.GetIdentity(), a.GetFailure().GetMessage())
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		a := e.GetActivityTaskTimedOutEventAttributes()
		return act(a.GetScheduledEventId(), "timed out", "", a.GetFailure().GetMessage())
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		a := e.GetActivityTaskCanceledEventAttributes()
		return act(a.GetScheduledEventId(), "canceled", a.GetIdentity(), "")
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes()
		req := a.GetAcceptedRequest()
		ev.Step, ev.Actor = req.GetInput().GetName(), req.GetMeta().GetIdentity()
		ev.State = "update accepted"
		decision(&ev, req.GetInput().GetName() == idemwf.ResolveUpdate, req.GetInput().GetArgs().GetPayloads())
		return ev, true
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		a := e.GetWorkflowExecutionSignaledEventAttributes()
		ev.Step, ev.State, ev.Actor = a.GetSignalName(), "signalled", a.GetIdentity()
		decision(&ev, a.GetSignalName() == idemwf.ResolveSignal, a.GetInput().GetPayloads())
		return ev, true
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		return wf("completed", "", "")
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		return wf("failed", "", e.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		return wf("timed out", "", "")
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		a := e.GetWorkflowExecutionTerminatedEventAttributes()
		return wf("terminated", a.GetIdentity(), a.GetReason())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		return wf("canceled", "", "")
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return wf("continued as new", "", "")
	}
	return Event{}, false
}

// decision fills in a decision's row from its payload (an
// idemwf.Resolution): the decision, who sent it and why.
func decision(ev *Event, isDecision bool, payloads []*commonpb.Payload) {
	if !isDecision || len(payloads) == 0 {
		return
	}
	var r idemwf.Resolution
	if err := converter.GetDefaultDataConverter().FromPayload(payloads[0], &r); err != nil {
		return
	}
	ev.State = "decision: " + string(r.Decision)
	if r.By != "" {
		ev.Actor = r.By
	}
	ev.Detail = strings.TrimSpace(r.Reason)
}
