package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/handshake"
)

// interceptorChange is the workflow.GetVersion change ID of the
// Interceptor's recovery: a history recorded on a worker without the
// Interceptor, which then failed an activity with onceflow.EffectUnknown,
// replays as it ran.
const interceptorChange = "onceflow.interceptor"

// InterceptorOptions configure an Interceptor.
type InterceptorOptions struct {
	// Activities names the wrapped activities (the activity package's
	// Wrapper registers them): the Interceptor schedules them with their
	// default heartbeat timeout when the workflow sets none, and checks a
	// decided result against their result type. Optional: without it, or
	// for an activity it does not know, an unknown effect is still
	// recovered, and a decided result need only be JSON.
	Activities handshake.Catalog
	// PendingSearchAttribute is RecoveryOptions.PendingSearchAttribute:
	// upsert PendingSearchAttribute as incidents open and close. The
	// namespace must have it registered.
	PendingSearchAttribute bool
}

// Interceptor is a worker interceptor (go.temporal.io/sdk/interceptor) that
// gives every workflow of its worker onceflow's recovery, with the
// workflow's own calls unchanged: workflow.ExecuteActivity(ctx, Withdraw,
// in) of a wrapped activity is scheduled with the activity's heartbeat
// timeout when the workflow set none, and an unknown effect is recovered
// as Execute recovers it (decided by itself where the answer is known,
// else waiting for a decision through ResolveUpdate or ResolveSignal),
// behind the Future the workflow got. Each workflow gets a Recovery at its
// start, which NewRecovery returns to a workflow that asks for one.
//
// Install it where the SDK worker is made: sdkworker.Options{Interceptors:
// []interceptor.WorkerInterceptor{i}} (worker.Attach's Interceptors).
type Interceptor struct {
	interceptor.WorkerInterceptorBase
	opts InterceptorOptions
}

// NewInterceptor returns an Interceptor.
func NewInterceptor(opts InterceptorOptions) *Interceptor {
	return &Interceptor{opts: opts}
}

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (i *Interceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &inbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, root: i}
}

// InterceptActivity implements interceptor.WorkerInterceptor: it hands a
// wrapped activity the NonRetryableErrorTypes the workflow side sent in
// a header of its own (the activity package reads them from the context).
func (i *Interceptor) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}}
}

// activityInbound reads handshake.NonRetryableTypesHeader.
type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
}

func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if p, ok := interceptor.Header(ctx)[handshake.NonRetryableTypesHeader]; ok {
		var types []string
		if err := converter.GetDefaultDataConverter().FromPayload(p, &types); err == nil {
			ctx = handshake.WithNonRetryableTypes(ctx, types)
		}
	}
	return a.Next.ExecuteActivity(ctx, in)
}

// recoveryKey is the workflow context key of the Interceptor's Recovery.
type recoveryKey struct{}

// inbound makes the workflow's Recovery at its start.
type inbound struct {
	interceptor.WorkflowInboundInterceptorBase
	root *Interceptor
	out  *outbound
}

func (in *inbound) Init(next interceptor.WorkflowOutboundInterceptor) error {
	in.out = &outbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: next}, root: in.root}
	return in.Next.Init(in.out)
}

func (in *inbound) ExecuteWorkflow(ctx workflow.Context, input *interceptor.ExecuteWorkflowInput) (any, error) {
	r, err := NewRecoveryWithOptions(ctx, RecoveryOptions{PendingSearchAttribute: in.root.opts.PendingSearchAttribute})
	if err != nil {
		return nil, err
	}
	in.out.rec = r
	return in.Next.ExecuteWorkflow(workflow.WithValue(ctx, recoveryKey{}, r), input)
}

// outbound recovers the workflow's activity calls.
type outbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	root *Interceptor
	rec  *Recovery
	// version is the interceptorChange version, read at the first
	// unknown effect.
	version *workflow.Version
}

func (o *outbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if own, _ := ctx.Value(ownRecoveryKey{}).(bool); own || o.rec == nil || ownActivity(activityType) {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	c := call{activity: activityType, args: args, exec: o.Next.ExecuteActivity, resultType: "JSON", scheduled: workflow.Now(ctx),
		decodes: func(raw json.RawMessage) error {
			if !json.Valid(raw) {
				return errors.New("not JSON")
			}
			return nil
		}}
	if o.root.opts.Activities != nil {
		if a, ok := o.root.opts.Activities.WrappedActivity(activityType); ok {
			if workflow.GetActivityOptions(ctx).HeartbeatTimeout == 0 && a.HeartbeatTimeout > 0 {
				ctx = workflow.WithHeartbeatTimeout(ctx, a.HeartbeatTimeout)
			}
			if a.Decodes != nil {
				c.decodes = func(raw json.RawMessage) error { return a.Decodes(raw) }
				c.resultType = a.ResultType
			}
			c.settles, c.noResult, c.reconciles = true, a.NoResult, a.Reconcile
		}
	}
	if rp := workflow.GetActivityOptions(ctx).RetryPolicy; rp != nil && len(rp.NonRetryableErrorTypes) > 0 {
		if h := interceptor.WorkflowHeader(ctx); h != nil {
			if p, err := converter.GetDefaultDataConverter().ToPayload(rp.NonRetryableErrorTypes); err == nil {
				h[handshake.NonRetryableTypesHeader] = p
			}
		}
	}
	// The first attempt is scheduled now, in the workflow's coroutine, so
	// the commands come in the order they came without the Interceptor.
	first := o.Next.ExecuteActivity(ctx, activityType, args...)
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		err := first.Get(ctx, nil)
		_, unknown := rawEffectUnknown(err)
		_, ended := retriesEnded(err, workflow.GetActivityOptions(ctx).RetryPolicy)
		if !unknown && !(ended && c.settles) || !o.recovers(ctx) {
			set.Chain(first)
			return
		}
		done, decided, err := o.rec.execute(ctx, c, first)
		switch {
		case err != nil:
			set.SetError(err)
		case done != nil:
			set.Chain(done)
		default:
			p, err := converter.NewJSONPayloadConverter().ToPayload(decided)
			if err != nil {
				set.SetError(fmt.Errorf("onceflow: encode the decided result: %w", err))
				return
			}
			set.SetValue(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
		}
	})
	return f
}

// ownActivity reports whether activityType is one of onceflow's own
// activities, which the Interceptor lets through.
func ownActivity(activityType string) bool {
	switch activityType {
	case handshake.ResolveRecordActivity, handshake.SettleActivity, handshake.ReconcileActivity:
		return true
	}
	return false
}

// ExecuteLocalActivity refuses a wrapped activity: a local activity has no
// heartbeat to renew its lease and carry its checkpoint. Every other local
// activity runs as it would without the Interceptor.
func (o *outbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if o.root.opts.Activities != nil {
		if _, ok := o.root.opts.Activities.WrappedActivity(activityType); ok {
			f, set := workflow.NewFuture(ctx)
			set.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"onceflow: %s is registered through onceflow, which does not run local activities (no heartbeat renews the lease "+
					"or carries the checkpoint); schedule it with workflow.ExecuteActivity", activityType), onceflow.OutcomeMisconfigured.TemporalType(), nil))
			return f
		}
	}
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

// recovers reports whether this run recovers unknown effects: every run
// that reaches one since interceptorChange.
func (o *outbound) recovers(ctx workflow.Context) bool {
	if o.version == nil {
		v := workflow.GetVersion(ctx, interceptorChange, workflow.DefaultVersion, 1)
		o.version = &v
	}
	return *o.version >= 1
}
