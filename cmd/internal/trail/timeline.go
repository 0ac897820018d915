package trail

import (
	"context"
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

// Event is one row of a trail's timeline: what happened to the workflow
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

// maxTimelineEvents bounds the history a timeline reads: a trail is for
// one business operation, not a workflow that continued as new for days.
const maxTimelineEvents = 2000

// timeline reads the workflow's history as a timeline, oldest first, and
// adds the activities it is running now (pending, from the description
// d, which may be nil): an activity that retries has no started event in
// the history until it ends.
func timeline(ctx context.Context, tc client.Client, wfID, runID string, d *workflowservice.DescribeWorkflowExecutionResponse) ([]Event, error) {
	it := tc.GetWorkflowHistory(ctx, wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []Event
	activities := map[int64]string{} // scheduled event ID -> activity type
	attempts := map[int64]int32{}    // scheduled event ID -> started attempt
	for n := 0; it.HasNext() && n < maxTimelineEvents; n++ {
		e, err := it.Next()
		if err != nil {
			return events, fmt.Errorf("trace: read the history of workflow %s: %w", wfID, err)
		}
		if ev, ok := event(e, activities, attempts); ok {
			events = append(events, ev)
		}
	}
	for _, pa := range d.GetPendingActivities() {
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
		events = append(events, ev)
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].Time.Before(events[j].Time) })
	return events, nil
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
