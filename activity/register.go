package activity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
)

// DefaultHeartbeatTimeout is the heartbeat timeout the workflow package's
// Interceptor schedules a registered activity with when the workflow's
// ActivityOptions set none (Heartbeat changes it per activity): short
// enough that Temporal notices a dead worker within seconds, long enough
// for a busy one.
const DefaultHeartbeatTimeout = 10 * time.Second

// DefaultReferenceWindow is how long a business reference (DownstreamKey)
// stays with the first operation key it arrived with, when the activity
// declares no DownstreamRetention: a day, the shortest retention of an
// idempotency key among the large payment providers (Stripe's).
const DefaultReferenceWindow = 24 * time.Hour

// Registry is where Register registers an activity: an SDK worker
// (go.temporal.io/sdk/worker.Worker) or the SDK testsuite's
// TestWorkflowEnvironment.
type Registry interface {
	// RegisterActivityWithOptions registers activity a, as the SDK's
	// worker.Registry does.
	RegisterActivityWithOptions(a any, options sdkactivity.RegisterOptions)
}

// Option configures one activity that Register registers. The options
// whose function names the activity's input or result type are checked
// against the activity's when it is registered.
type Option interface {
	apply(*settings) error
}

// settings are the Options before Register checks them against the
// activity's types.
type settings struct {
	name       string
	scope      ScopeKind
	key        any // func(In) string
	downstream any // func(In) string
	reconcile  any // func(context.Context, In, onceflow.Record) (Out, bool, error)
	idempotent bool
	noEffect   func(error) bool
	codec      Codec
	inProgress InProgressPolicy
	heartbeat  time.Duration
	retention  time.Duration
	refuseRef  bool
}

type optionFunc func(*settings) error

func (f optionFunc) apply(s *settings) error { return f(s) }

// Name registers the activity under name instead of the function's name.
// The workflow then calls it by that name (workflow.ExecuteActivity(ctx,
// "name", in)).
func Name(name string) Option {
	return optionFunc(func(s *settings) error {
		if name == "" {
			return errors.New("Name: the name is empty")
		}
		s.name = name
		return nil
	})
}

// Heartbeat is the heartbeat timeout the workflow package's Interceptor
// schedules the activity with when the workflow's ActivityOptions set none.
// Default DefaultHeartbeatTimeout.
func Heartbeat(timeout time.Duration) Option {
	return optionFunc(func(s *settings) error {
		if timeout < time.Second {
			return fmt.Errorf("Heartbeat: %s is under a second; Temporal would time the activity out between two heartbeats", timeout)
		}
		s.heartbeat = timeout
		return nil
	})
}

// WorkflowScope dedupes across runs of one workflow ID (Options.Scope
// WorkflowScoped).
func WorkflowScope() Option {
	return optionFunc(func(s *settings) error { s.scope = WorkflowScoped; return nil })
}

// BusinessKey dedupes on key(input) across workflows (Options.Scope
// BusinessScoped with Options.Key): one payment per "order-42/charge"
// whatever workflow asks for it.
func BusinessKey[In any](key func(In) string) Option {
	return optionFunc(func(s *settings) error {
		if key == nil {
			return errors.New("BusinessKey: the function is nil")
		}
		s.scope, s.key = BusinessScoped, key
		return nil
	})
}

// DownstreamKey declares the reference the downstream system knows the
// operation by, such as a transfer's reference ID (Options.DownstreamKey):
// AskFirst's lookup and call and Options.Reconcile get it from
// KeyForDownstream instead of onceflow's operation key.
func DownstreamKey[In any](key func(In) string) Option {
	return optionFunc(func(s *settings) error {
		if key == nil {
			return errors.New("DownstreamKey: the function is nil")
		}
		s.downstream = key
		return nil
	})
}

// DownstreamRetention is Options.DownstreamRetention: how long the
// downstream remembers the operation's key (Stripe at least 24 hours,
// Braintree 30 days, Adyen at least 31 days). A re-run after an unknown
// effect later than that is refused, unless an operator's decision
// overrides it with a reason.
func DownstreamRetention(retention time.Duration) Option {
	return optionFunc(func(s *settings) error {
		if retention < time.Second {
			return fmt.Errorf("DownstreamRetention: %s is under a second; give the downstream's retention of an idempotency key, such as 24h", retention)
		}
		s.retention = retention
		return nil
	})
}

// RefuseReusedReference is Options.RefuseReusedReference: an operation
// whose DownstreamKey arrived under another operation key first, within
// the window, is refused instead of flagged. It needs DownstreamKey.
func RefuseReusedReference() Option {
	return optionFunc(func(s *settings) error { s.refuseRef = true; return nil })
}

// Reconcile is Options.Reconcile: asked whether an earlier attempt's
// effect happened, before anything runs again.
func Reconcile[In, Out any](fn func(ctx context.Context, in In, rec onceflow.Record) (out Out, found bool, err error)) Option {
	return optionFunc(func(s *settings) error {
		if fn == nil {
			return errors.New("Reconcile: the function is nil")
		}
		s.reconcile = fn
		return nil
	})
}

// IdempotentDownstream is Options.IdempotentDownstream: the action is safe
// to run again after an attempt whose effect is unknown.
func IdempotentDownstream() Option {
	return optionFunc(func(s *settings) error { s.idempotent = true; return nil })
}

// NoEffectWhen is Options.NoEffect: errors for which classify is true are
// returned to Temporal as they are and record that the attempt had no
// effect.
func NoEffectWhen(classify func(error) bool) Option {
	return optionFunc(func(s *settings) error {
		if classify == nil {
			return errors.New("NoEffectWhen: the function is nil")
		}
		s.noEffect = classify
		return nil
	})
}

// WithCodec is Options.Codec.
func WithCodec(c Codec) Option {
	return optionFunc(func(s *settings) error {
		if c == nil {
			return errors.New("WithCodec: the codec is nil")
		}
		s.codec = c
		return nil
	})
}

// WhenInProgress is Options.InProgress.
func WhenInProgress(p InProgressPolicy) Option {
	return optionFunc(func(s *settings) error { s.inProgress = p; return nil })
}

// codecID is what a Codec's ID must look like.
var codecID = regexp.MustCompile(`^[a-z0-9.-]{1,32}$`)

// closureName is the name the SDK gives a function literal.
var closureName = regexp.MustCompile(`^(func)?\d+$`)

// Register wraps fn (Wrap) under the operation code and registers it with
// r under the name the SDK gives fn, so a workflow keeps calling it as
// before: workflow.ExecuteActivity(ctx, Withdraw, in), or a.Withdraw for
// a method. The first registration on r also registers onceflow's own
// activity (Wrapper.ResolveRecord), which the workflow side's recovery
// calls.
//
// The code and the options are checked here, and Register panics on an
// invalid one, as the SDK's RegisterActivity panics on an invalid
// function; RegisterSafely returns the error instead.
func Register[In, Out any](r Registry, w *Wrapper, fn func(context.Context, In) (Out, error), code onceflow.OperationCode, opts ...Option) {
	if err := RegisterSafely(r, w, fn, code, opts...); err != nil {
		panic(err)
	}
}

// RegisterSafely is Register, returning an invalid code or option as an
// error instead of panicking.
func RegisterSafely[In, Out any](r Registry, w *Wrapper, fn func(context.Context, In) (Out, error), code onceflow.OperationCode, opts ...Option) error {
	if r == nil || w == nil || fn == nil {
		return errors.New("activity: Register needs a registry, a Wrapper and a function")
	}
	o, name, heartbeat, err := options[In, Out](fn, code, opts)
	if err != nil {
		return fmt.Errorf("activity: register %s: %w", activityName(fn), err)
	}
	if err := w.catalog(onceflow.WrappedActivity{
		Name: name, Code: code, HeartbeatTimeout: heartbeat, ResultType: reflect.TypeFor[Out]().String(),
		Decodes: func(raw []byte) error { var out Out; return json.Unmarshal(raw, &out) },
	}); err != nil {
		return err
	}
	w.registerResolve(r)
	r.RegisterActivityWithOptions(Wrap(w, o, fn), sdkactivity.RegisterOptions{Name: name})
	return nil
}

// options checks code and opts against the activity's types and returns
// them as Options, with the activity's name and heartbeat timeout.
func options[In, Out any](fn any, code onceflow.OperationCode, opts []Option) (o Options[In, Out], name string, heartbeat time.Duration, err error) {
	if err := code.Validate(); err != nil {
		return o, "", 0, err
	}
	s := settings{heartbeat: DefaultHeartbeatTimeout}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.apply(&s); err != nil {
			return o, "", 0, err
		}
	}
	o = Options[In, Out]{Code: code, Scope: s.scope, IdempotentDownstream: s.idempotent, NoEffect: s.noEffect, Codec: s.codec, InProgress: s.inProgress,
		DownstreamRetention: s.retention, RefuseReusedReference: s.refuseRef}
	if s.refuseRef && s.downstream == nil {
		return o, "", 0, errors.New("RefuseReusedReference needs DownstreamKey: the business reference it guards")
	}
	if s.key != nil {
		if o.Key, err = typed[func(In) string]("BusinessKey", s.key); err != nil {
			return o, "", 0, err
		}
	}
	if s.downstream != nil {
		if o.DownstreamKey, err = typed[func(In) string]("DownstreamKey", s.downstream); err != nil {
			return o, "", 0, err
		}
	}
	if s.reconcile != nil {
		if o.Reconcile, err = typed[func(context.Context, In, onceflow.Record) (Out, bool, error)]("Reconcile", s.reconcile); err != nil {
			return o, "", 0, err
		}
	}
	if s.codec != nil && !codecID.MatchString(s.codec.ID()) {
		return o, "", 0, fmt.Errorf("WithCodec: codec ID %q is not [a-z0-9.-]{1,32}", s.codec.ID())
	}
	name = s.name
	if name == "" {
		name = activityName(fn)
		if closureName.MatchString(name) {
			return o, "", 0, fmt.Errorf("a function literal has no name the workflow can call it by (the SDK names it %q): give it one with Name", name)
		}
	}
	return o, name, s.heartbeat, nil
}

// typed is the option's function as the type the activity needs, or an
// error that names both.
func typed[F any](option string, f any) (F, error) {
	t, ok := f.(F)
	if !ok {
		return t, fmt.Errorf("%s's function is %T, but the activity needs %s", option, f, reflect.TypeFor[F]())
	}
	return t, nil
}

// activityName is the name the SDK registers fn under and a workflow's
// ExecuteActivity(ctx, fn) calls: the function's name without its package
// and receiver (and the "-fm" of a method value).
func activityName(fn any) string {
	full := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
}

// NoEffect marks err as the error of an attempt that certainly had no
// effect: the wrapped activity records that nothing happened and returns
// err itself to Temporal, with its own type, message and retryability (a
// plain Go error keeps its type name, an ApplicationError its type and
// NonRetryable), so the workflow's RetryPolicy and error handling see
// what they saw before onceflow. Nil stays nil.
//
// A non-retryable error needs no NoEffect: see Options.NoEffect.
func NoEffect(err error) error {
	if err == nil {
		return nil
	}
	return &noEffectError{err: err}
}

// noEffectError is an error NoEffect marked.
type noEffectError struct{ err error }

func (e *noEffectError) Error() string { return e.err.Error() }
func (e *noEffectError) Unwrap() error { return e.err }

// passthrough carries an activity's own error through the executor, which
// records it as no effect, back to Temporal unchanged.
type passthrough struct{ err error }

func (e *passthrough) Error() string { return e.err.Error() }
func (e *passthrough) Unwrap() error { return e.err }

// goErrType is the type of errors.New's errors, which the SDK reports
// with an empty type.
const goErrType = "errorString"

// temporalType is the ApplicationError type Temporal reports err with,
// as the SDK's failure converter computes it: an ApplicationError's own
// type, else the name of err's Go type.
func temporalType(err error) string {
	if ae, ok := err.(*temporal.ApplicationError); ok {
		return ae.Type()
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == goErrType {
		return ""
	}
	return t.Name()
}

// noEffect returns the error to hand Temporal unchanged when fn's error
// says the attempt had no effect: marked with NoEffect, classified by
// Options.NoEffect, or one that Temporal will not retry (an
// ApplicationError marked non-retryable, or a type the activity's retry
// policy lists as non-retryable).
func noEffect[In, Out any](err error, opts Options[In, Out], nonRetryable []string) (error, bool) {
	var ne *noEffectError
	if errors.As(err, &ne) {
		return ne.err, true
	}
	if opts.NoEffect != nil && opts.NoEffect(err) {
		return err, true
	}
	if ae, ok := err.(*temporal.ApplicationError); ok && ae.NonRetryable() {
		return err, true
	}
	if typ := temporalType(err); typ != "" && slices.Contains(nonRetryable, typ) {
		return err, true
	}
	return nil, false
}

// nonRetryableTypes are the NonRetryableErrorTypes of the activity's retry
// policy: from its info, else from the header the workflow package's
// Interceptor sets (the SDK testsuite gives activities no retry policy).
func nonRetryableTypes(ctx context.Context, policy *temporal.RetryPolicy) []string {
	if policy != nil {
		return policy.NonRetryableErrorTypes
	}
	return onceflow.NonRetryableTypes(ctx)
}

// downstreamKeyKey is the context key of the downstream key.
type downstreamKeyKey struct{}

// KeyForDownstream returns the key to give the downstream inside a wrapped
// activity and its Reconcile: the activity's DownstreamKey when it declares
// one (the transfer's reference ID), else OperationKey. AskFirst passes it
// to its lookup and call.
func KeyForDownstream(ctx context.Context) string {
	if k, ok := ctx.Value(downstreamKeyKey{}).(string); ok && k != "" {
		return k
	}
	return OperationKey(ctx)
}

// AskFirst runs call, asking lookup first when an earlier attempt's
// effect is unknown (it may have reached the action): the pattern for
// a downstream call that does not deduplicate but can be looked up. Both
// get KeyForDownstream: the activity's DownstreamKey, else its operation
// key. A lookup that fails records no effect (nothing was called) and is
// retried.
func AskFirst[T any](ctx context.Context,
	lookup func(ctx context.Context, key string) (T, bool, error),
	call func(ctx context.Context, key string) (T, error),
) (T, error) {
	key := KeyForDownstream(ctx)
	if why := EarlierEffectUnknown(ctx); why != "" {
		v, found, err := lookup(ctx, key)
		if err != nil {
			var zero T
			return zero, idemstore.RetryableNoEffect(fmt.Errorf("ask the downstream before calling it again (%s): %w", why, err))
		}
		if found {
			return v, nil
		}
	}
	return call(ctx, key)
}
