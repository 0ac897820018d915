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
	"github.com/onceflow/onceflow/internal/handshake"
)

// defaultHeartbeatTimeout is the heartbeat timeout the workflow package's
// Interceptor schedules a registered activity with when the workflow's
// ActivityOptions set none (Heartbeat changes it per activity): short
// enough that Temporal notices a dead worker within seconds, long enough
// for a busy one.
const defaultHeartbeatTimeout = 10 * time.Second

// defaultReferenceWindow is how long a business reference (DownstreamKey)
// stays with the first operation key it arrived with, when the activity
// declares no DownstreamRetention: a day, the shortest retention of an
// idempotency key among the large payment providers (Stripe's).
const defaultReferenceWindow = 24 * time.Hour

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
// Default 10s: short enough that Temporal notices a dead worker within
// seconds, long enough for a busy one.
func Heartbeat(timeout time.Duration) Option {
	return optionFunc(func(s *settings) error {
		if timeout < time.Second {
			return fmt.Errorf("Heartbeat: %s is under a second; Temporal would time the activity out between two heartbeats", timeout)
		}
		s.heartbeat = timeout
		return nil
	})
}

// WorkflowScope dedupes across runs of one workflow ID (workflow retries,
// cron): namespace + workflow ID + activity ID. Without it (and without
// BusinessKey) an activity dedupes the retries of one call in one workflow
// run: namespace + workflow ID + run ID + activity ID, Temporal's own
// recommendation, safe across continue-as-new and reset, which reuse
// activity IDs with a new meaning. Pitfall: a continue-as-new run that
// calls the same activity ID again gets the first run's result.
func WorkflowScope() Option {
	return optionFunc(func(s *settings) error { s.scope = workflowScoped; return nil })
}

// BusinessKey dedupes on key(input) across workflows: one payment per
// "order-42/charge" whatever workflow asks for it. The key must not be
// empty; the activity fails with onceflow.InvalidInput when it is.
func BusinessKey[In any](key func(In) string) Option {
	return optionFunc(func(s *settings) error {
		if key == nil {
			return errors.New("BusinessKey: the function is nil")
		}
		s.scope, s.key = businessScoped, key
		return nil
	})
}

// DownstreamKey declares the reference the downstream system knows the
// operation by, such as a transfer's reference ID: KeyForDownstream (and
// so AskFirst's lookup and call) and Reconcile's context get it instead of
// onceflow's operation key, and an unknown effect's details carry it for
// the operator.
func DownstreamKey[In any](key func(In) string) Option {
	return optionFunc(func(s *settings) error {
		if key == nil {
			return errors.New("DownstreamKey: the function is nil")
		}
		s.downstream = key
		return nil
	})
}

// DownstreamRetention is how long the downstream remembers the key it
// deduplicates by: Stripe at least 24 hours, Braintree 30 days, Adyen at
// least 31 days. A re-run after an unknown effect (a takeover with
// IdempotentDownstream or a Reconcile that found nothing, the workflow's
// automatic retry, an operator's retry, a late redelivery) later than that
// after the first attempt may have reached the downstream is refused: the
// downstream may have forgotten the key and act again. The activity then
// ends with onceflow.EffectUnknown for a decision, and the workflow refuses a
// retry decision unless it is overridden with a reason
// (workflow.Resolution.OverrideRetention). Without it: no limit. See
// docs/guards.md#the-downstreams-retention.
func DownstreamRetention(retention time.Duration) Option {
	return optionFunc(func(s *settings) error {
		if retention < time.Second {
			return fmt.Errorf("DownstreamRetention: %s is under a second; give the downstream's retention of an idempotency key, such as 24h", retention)
		}
		s.retention = retention
		return nil
	})
}

// RefuseReusedReference refuses an operation whose DownstreamKey (its
// business reference: an order number, a transfer reference) arrived
// under another operation key first, within DownstreamRetention (24
// hours without one): the activity fails with the non-retryable
// onceflow.ReferenceReused and nothing runs. Without it such a reuse is
// flagged only: a warning line, the executor's
// onceflow.reference_reuses metric and an entry in the store's trail of
// reuses. It needs DownstreamKey; see
// docs/guards.md#the-business-reference.
func RefuseReusedReference() Option {
	return optionFunc(func(s *settings) error { s.refuseRef = true; return nil })
}

// Reconcile is asked, before anything runs again, whenever an earlier
// attempt may have reached the action and its effect is unsettled: a
// takeover from an attempt that died in the middle of the action, and a
// claim that finds no record (Redis lost it) or a FAILED_RETRYABLE one of
// another incarnation while the previous attempt's checkpoint says it
// reached the action. found reports that the effect happened (for
// instance the provider knows KeyForDownstream), with its result. Without
// it, and without IdempotentDownstream, such a claim fails with
// onceflow.EffectUnknown and does not run the action. fn takes the activity's
// one argument and returns its result type, checked at registration.
func Reconcile[In, Out any](fn func(ctx context.Context, in In, rec onceflow.Record) (out Out, found bool, err error)) Option {
	return optionFunc(func(s *settings) error {
		if fn == nil {
			return errors.New("Reconcile: the function is nil")
		}
		s.reconcile = fn
		return nil
	})
}

// IdempotentDownstream declares the action safe to run again after an
// attempt whose effect is unknown (it passes OperationKey to a provider
// that deduplicates). It travels in an unknown effect's details
// (onceflow.EffectUnknownDetails.IdempotentDownstream), so the workflow
// package's Execute retries by itself instead of opening an incident for
// a person.
func IdempotentDownstream() Option {
	return optionFunc(func(s *settings) error { s.idempotent = true; return nil })
}

// NoEffectWhen classifies the activity's errors: those for which
// classify is true certainly had no effect. Such an error is recorded as
// no effect and returned to Temporal as it is, with its own type, message
// and retryability. Whatever classify says, these are treated so too: an
// error marked with the NoEffect function, an ApplicationError marked
// non-retryable, and an error whose type (the ApplicationError type, or
// the Go type's name, as Temporal reports it) the activity's RetryPolicy
// lists in NonRetryableErrorTypes: Temporal runs no attempt after a
// non-retryable error, so nothing could run twice. Any other error means
// the effect may have happened (onceflow.EffectUnknown).
func NoEffectWhen(classify func(error) bool) Option {
	return optionFunc(func(s *settings) error {
		if classify == nil {
			return errors.New("NoEffectWhen: the function is nil")
		}
		s.noEffect = classify
		return nil
	})
}

// WithCodec encodes the activity's result for storage and replay with c
// instead of JSONCodec ("json-v2"). A result stored under another codec
// ID is not replayed: the activity fails with onceflow.CodecMismatch.
func WithCodec(c Codec) Option {
	return optionFunc(func(s *settings) error {
		if c == nil {
			return errors.New("WithCodec: the codec is nil")
		}
		s.codec = c
		return nil
	})
}

// WhenInProgress says what an attempt does when another attempt holds the
// operation. Default InProgressWait.
func WhenInProgress(p InProgressPolicy) Option {
	return optionFunc(func(s *settings) error { s.inProgress = p; return nil })
}

// Code is the activity's operation code, [a-z0-9-]{1,64}, instead of the
// one derived from its name: it names the use case in Redis keys, metrics
// and the operator's tools, so it must stay the same as long as records
// of the activity may exist.
func Code(code onceflow.OperationCode) Option {
	return optionFunc(func(s *settings) error {
		if err := code.Validate(); err != nil {
			return fmt.Errorf("Code: %w", err)
		}
		s.code = code
		return nil
	})
}

// Method gives the method of a struct registered with Register options of
// its own, on top of those given to the whole struct: a Reconcile for
// Withdraw, IdempotentDownstream for Deposit.
func Method(name string, opts ...Option) Option {
	return optionFunc(func(s *settings) error {
		if name == "" {
			return errors.New("Method: the method name is empty")
		}
		if s.methods == nil {
			s.methods = map[string][]Option{}
		}
		s.methods[name] = append(s.methods[name], opts...)
		return nil
	})
}

// ErrorsAreNoEffect declares that every error the activity returns means
// its attempt had no effect: the error goes back to Temporal as it is, the
// retry policy retries it and the workflow's own error handling sees it,
// as without onceflow. Declare it only for an activity whose effect is a
// single call that either happens or fails (a downstream that never acts
// and then answers an error). Without it, an error that is not
// non-retryable and not marked with NoEffect (nor classified by
// NoEffectWhen) means the effect may have happened: the call waits for a
// decision, whose fail delivers this error to the workflow
// (docs/adopting.md#what-an-error-means).
func ErrorsAreNoEffect() Option {
	return optionFunc(func(s *settings) error {
		s.noEffect = func(error) bool { return true }
		return nil
	})
}

// codecID is what a Codec's ID must look like.
var codecID = regexp.MustCompile(`^[a-z0-9.-]{1,32}$`)

// closureName is the name the SDK gives a function literal.
var closureName = regexp.MustCompile(`^(func)?\d+$`)

// Register wraps a and registers it with r as the SDK's RegisterActivity
// would register a, so a workflow keeps calling it as before; it is the
// one way to make an activity idempotent:
// workflow.ExecuteActivity(ctx, Withdraw, in), or a.Withdraw for a method.
// a is any activity the SDK accepts:
//
//   - a function, with or without a context.Context first, of any number
//     of arguments, returning an error or a result and an error:
//     func(ctx, In) (Out, error), func(ctx, In) error, func(ctx) error,
//     func(ctx, A, B) (Out, error), …; it is registered under the name the
//     SDK gives it, or Name's;
//   - a pointer to a struct: each exported method is such a function and
//     is registered under its name (prefixed with Name's, as the SDK's
//     RegisterOptions.Name prefixes them); Method gives one method options
//     of its own.
//
// Each activity's operation code, which names it in Redis keys, metrics
// and the operator's tools, is its registered name in lower case with
// words joined by "-" ("ChargeCard" is "charge-card"), or Code's. The
// first registration on r also registers onceflow's own activities
// (Wrapper.ResolveRecord, Wrapper.Settle), which the workflow side's
// recovery calls.
//
// Every retry of the activity is one operation; the Temporal attempt is
// the retained attempt. The activity runs at most once per scope (the
// run, WorkflowScope's workflow, BusinessKey's key) whenever Redis can
// know; its result is stored (JSONCodec, or WithCodec's) and replayed to
// later attempts and, with WorkflowScope and BusinessKey, to other runs
// and workflows. Its error marks what happened: one that says nothing
// happened (NoEffect, NoEffectWhen, ErrorsAreNoEffect, or a non-retryable
// one) is returned to Temporal as it is; idemstore.RetryableNoEffect
// marks a retryable error with no effect; any other error means the
// effect may have happened and fails the workflow's activity with
// onceflow.EffectUnknown. The activity must be scheduled with a
// HeartbeatTimeout (the workflow package's Interceptor sets Heartbeat's):
// the wrapper heartbeats and renews its lease on a ticker derived from it
// and from the lease, and the heartbeats deliver cancellation.
//
// The options are checked against each activity's types here, and
// Register panics on an invalid activity, code or option, as the SDK's
// RegisterActivity panics on an invalid function; nothing is registered
// then.
func Register(r Registry, w *Wrapper, a any, opts ...Option) {
	if err := register(r, w, a, opts...); err != nil {
		panic(err)
	}
}

// register is Register, returning the error it panics with.
func register(r Registry, w *Wrapper, a any, opts ...Option) error {
	if r == nil || w == nil || a == nil {
		return errors.New("activity: Register needs a registry, a Wrapper and an activity")
	}
	if u, ok := r.(interface{ SDKRegistry() Registry }); ok {
		// onceflow's own SDK worker (the worker package's Worker), whose
		// RegisterActivity wraps: register on the worker beneath it.
		r = u.SDKRegistry()
	}
	s, err := collect(opts)
	if err != nil {
		return fmt.Errorf("activity: register %s: %w", describe(a), err)
	}
	regs, err := plan(w, reflect.ValueOf(a), s)
	if err != nil {
		return fmt.Errorf("activity: register %s: %w", describe(a), err)
	}
	for _, g := range regs {
		if err := w.catalog(g.entry); err != nil {
			return err
		}
	}
	w.registerOwn(r)
	for _, g := range regs {
		w.resolvers.Store(g.entry.Code, g.resolver)
		w.bindings.Store(g.entry.Name, g.bound)
		r.RegisterActivityWithOptions(g.fn, sdkactivity.RegisterOptions{Name: g.entry.Name})
	}
	return nil
}

// describe names a for an error: the function's name, or the struct type.
func describe(a any) string {
	v := reflect.ValueOf(a)
	if v.Kind() == reflect.Func {
		return activityName(a)
	}
	return v.Type().String()
}

// registration is one activity Register registers.
type registration struct {
	entry    handshake.Activity
	resolver resolver
	bound    *bound
	fn       any
}

// plan checks a (a function, or a struct's methods) and its options and
// returns what to register, registering nothing.
func plan(w *Wrapper, v reflect.Value, s settings) ([]registration, error) {
	if v.Kind() == reflect.Func {
		if len(s.methods) > 0 {
			return nil, errors.New("Method options are for the methods of a struct; pass the options themselves for a function")
		}
		name := s.name
		if name == "" {
			name = activityName(v.Interface())
			if closureName.MatchString(name) {
				return nil, fmt.Errorf("a function literal has no name the workflow can call it by (the SDK names it %q): give it one with Name", name)
			}
		}
		g, err := prepare(w, v, name, s)
		if err != nil {
			return nil, err
		}
		return []registration{g}, nil
	}
	t := v.Type()
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s is neither a function nor a pointer to a struct; the SDK registers only those as activities", t)
	}
	var regs []registration
	seen := map[string]bool{}
	for i := range t.NumMethod() {
		m := t.Method(i)
		if !m.IsExported() {
			continue
		}
		seen[m.Name] = true
		ms, err := s.forMethod(m.Name)
		if err != nil {
			return nil, err
		}
		g, err := prepare(w, v.Method(i), s.name+m.Name, ms)
		if err != nil {
			return nil, fmt.Errorf("method %s: %w", m.Name, err)
		}
		regs = append(regs, g)
	}
	for name := range s.methods {
		if !seen[name] {
			return nil, fmt.Errorf("Method(%q) names no exported method of %s", name, t)
		}
	}
	if len(regs) == 0 {
		return nil, fmt.Errorf("%s has no exported method to register", t)
	}
	return regs, nil
}

// prepare checks one activity function and its options and builds its
// registration.
func prepare(w *Wrapper, fn reflect.Value, name string, s settings) (registration, error) {
	sh, err := shapeOf(fn.Type())
	if err != nil {
		return registration{}, err
	}
	code := s.code
	if code == "" {
		if code = codeFor(name); code.Validate() != nil {
			return registration{}, fmt.Errorf("the activity name %q gives no operation code ([a-z0-9-]{1,64}): give it one with Code", name)
		}
	}
	if err := code.Validate(); err != nil {
		return registration{}, err
	}
	b, err := reflectBinding(fn, sh, s)
	if err != nil {
		return registration{}, err
	}
	b.code = code
	decode := func(raw []byte) (any, error) {
		if sh.out == nil {
			return nil, nil
		}
		p := reflect.New(sh.out)
		err := json.Unmarshal(raw, p.Interface())
		return p.Elem().Interface(), err
	}
	entry := handshake.Activity{
		Name: name, Code: code, HeartbeatTimeout: s.heartbeat, NoResult: sh.out == nil, Reconcile: b.reconcile != nil,
		Decodes: func(raw []byte) error { _, err := decode(raw); return err },
	}
	if sh.out != nil {
		entry.ResultType = sh.out.String()
	}
	bd := &bound{b: b, sh: sh}
	return registration{entry: entry, resolver: resolverOf(b.codec, decode), bound: bd, fn: bd.activity(w)}, nil
}

// settings are the options before Register checks them against the
// activity's types.
type settings struct {
	name       string
	code       onceflow.OperationCode
	scope      scopeKind
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
	// methods are Method's options, by method name.
	methods map[string][]Option
}

// collect applies opts to the defaults.
func collect(opts []Option) (settings, error) {
	s := settings{heartbeat: defaultHeartbeatTimeout}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.apply(&s); err != nil {
			return s, err
		}
	}
	return s, nil
}

// forMethod is s with the options Method gave the method name; the name
// (a prefix for a struct) and the other methods' options are not its.
func (s settings) forMethod(name string) (settings, error) {
	own := s.methods[name]
	s.methods, s.name = nil, ""
	for _, opt := range own {
		if opt == nil {
			continue
		}
		if err := opt.apply(&s); err != nil {
			return s, fmt.Errorf("method %s: %w", name, err)
		}
	}
	if s.name != "" {
		return s, fmt.Errorf("method %s: Name is for the struct (a prefix of its methods' names); the SDK names a method by the method", name)
	}
	if len(s.methods) > 0 {
		return s, fmt.Errorf("method %s: Method within Method", name)
	}
	return s, nil
}

// activityName is the name the SDK registers fn under and a workflow's
// ExecuteActivity(ctx, fn) calls: the function's name without its package
// and receiver (and the "-fm" of a method value).
func activityName(fn any) string {
	full := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
}

// codeFor is the operation code of an activity named name: its words in
// lower case joined by "-" ("ChargeCard" is "charge-card", "HTTPCall"
// "http-call", "withdraw_v2" "withdraw-v2"), at most 64 bytes.
func codeFor(name string) onceflow.OperationCode {
	var b strings.Builder
	rs := []rune(name)
	dash := false
	for i, r := range rs {
		switch {
		case r >= 'A' && r <= 'Z':
			// A word starts at an upper-case letter after a lower-case
			// one or a digit, and at the last of a run of upper-case
			// letters followed by a lower-case one (HTTPCall).
			if i > 0 && (isLowerOrDigit(rs[i-1]) || i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z' && rs[i-1] >= 'A' && rs[i-1] <= 'Z') {
				dash = true
			}
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r - 'A' + 'a')
		case isLowerOrDigit(r):
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		default:
			dash = true
		}
	}
	code := b.String()
	if len(code) > 64 {
		code = strings.TrimRight(code[:64], "-")
	}
	return onceflow.OperationCode(code)
}

func isLowerOrDigit(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }

// NoEffect marks err as the error of an attempt that certainly had no
// effect: the wrapped activity records that nothing happened and returns
// err itself to Temporal, with its own type, message and retryability (a
// plain Go error keeps its type name, an ApplicationError its type and
// NonRetryable), so the workflow's RetryPolicy and error handling see
// what they saw before onceflow. Nil stays nil.
//
// A non-retryable error needs no NoEffect: see NoEffectWhen.
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
// NoEffectWhen, or one that Temporal will not retry (an
// ApplicationError marked non-retryable, or a type the activity's retry
// policy lists as non-retryable).
func noEffect(err error, b *binding, nonRetryable []string) (error, bool) {
	var ne *noEffectError
	if errors.As(err, &ne) {
		return ne.err, true
	}
	if b.noEffect != nil && b.noEffect(err) {
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
	return handshake.NonRetryableTypes(ctx)
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
