package activity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"go.temporal.io/sdk/temporal"

	"github.com/onceflow/onceflow"
)

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
	recordType  = reflect.TypeFor[onceflow.Record]()
	stringType  = reflect.TypeFor[string]()
	boolType    = reflect.TypeFor[bool]()
)

// shape is an activity function's signature, as the SDK accepts it: a
// context.Context first or not, any number of arguments, and an error or a
// result and an error.
type shape struct {
	ctx  bool
	args []reflect.Type
	// out is the result's type; nil when the function returns only an
	// error.
	out reflect.Type
}

// shapeOf checks t, a function's type, as the SDK checks an activity.
func shapeOf(t reflect.Type) (shape, error) {
	var sh shape
	if t.Kind() != reflect.Func {
		return sh, fmt.Errorf("%s is not a function", t)
	}
	if t.IsVariadic() {
		return sh, fmt.Errorf("%s is variadic; the SDK passes an activity its arguments one by one", t)
	}
	first := 0
	if t.NumIn() > 0 && t.In(0).Implements(contextType) && t.In(0).Kind() == reflect.Interface {
		sh.ctx, first = true, 1
	}
	for i := first; i < t.NumIn(); i++ {
		sh.args = append(sh.args, t.In(i))
	}
	switch {
	case t.NumOut() == 1 && t.Out(0) == errorType:
	case t.NumOut() == 2 && t.Out(1) == errorType:
		sh.out = t.Out(0)
	default:
		return sh, fmt.Errorf("%s must return an error, or a result and an error, as the SDK requires of an activity", t)
	}
	return sh, nil
}

// reflectBinding binds fn, of shape sh, with the options s, checking the
// options that name the activity's types against them.
func reflectBinding(fn reflect.Value, sh shape, s settings) (*binding, error) {
	b := &binding{
		scope: s.scope, idempotent: s.idempotent, noEffect: s.noEffect, codec: s.codec, inProgress: s.inProgress,
		retention: s.retention, refuseRef: s.refuseRef, noResult: sh.out == nil,
	}
	if b.codec == nil {
		b.codec = JSONCodec{}
	}
	if !codecID.MatchString(b.codec.ID()) {
		return nil, fmt.Errorf("WithCodec: codec ID %q is not [a-z0-9.-]{1,32}", b.codec.ID())
	}
	if s.refuseRef && s.downstream == nil {
		return nil, errors.New("RefuseReusedReference needs DownstreamKey: the business reference it guards")
	}
	b.input = func(args any) ([]byte, error) {
		vals := args.([]reflect.Value)
		if len(vals) == 1 {
			return json.Marshal(vals[0].Interface())
		}
		all := make([]any, len(vals))
		for i, v := range vals {
			all[i] = v.Interface()
		}
		return json.Marshal(all)
	}
	b.call = func(ctx context.Context, args any) (any, error) {
		in := args.([]reflect.Value)
		if sh.ctx {
			in = append([]reflect.Value{reflect.ValueOf(&ctx).Elem()}, in...)
		}
		outs := fn.Call(in)
		var err error
		if e := outs[len(outs)-1]; !e.IsNil() {
			err = e.Interface().(error)
		}
		if sh.out == nil {
			return nil, err
		}
		return outs[0].Interface(), err
	}
	var err error
	if s.key != nil {
		if b.key, err = inputFunc("BusinessKey", s.key, sh); err != nil {
			return nil, err
		}
	}
	if s.downstream != nil {
		if b.downstream, err = inputFunc("DownstreamKey", s.downstream, sh); err != nil {
			return nil, err
		}
	}
	if s.reconcile != nil {
		if b.reconcile, err = reconcileFunc(s.reconcile, sh); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// inputFunc is option's func(In) string as a function of the activity's
// arguments, or an error naming both types.
func inputFunc(option string, f any, sh shape) (func(args any) string, error) {
	ft := reflect.TypeOf(f)
	if len(sh.args) != 1 {
		return nil, fmt.Errorf("%s needs an activity with one argument (after the context), whose value it takes; this one has %d", option, len(sh.args))
	}
	if ft.NumIn() != 1 || ft.In(0) != sh.args[0] || ft.NumOut() != 1 || ft.Out(0) != stringType {
		return nil, fmt.Errorf("%s's function is %s, but the activity needs func(%s) string", option, ft, sh.args[0])
	}
	fv := reflect.ValueOf(f)
	return func(args any) string { return fv.Call(args.([]reflect.Value)[:1])[0].String() }, nil
}

// reconcileFunc is Reconcile's function as a function of the activity's
// arguments, or an error naming the types it needs.
func reconcileFunc(f any, sh shape) (func(ctx context.Context, args any, rec onceflow.Record) (any, bool, error), error) {
	ft := reflect.TypeOf(f)
	if len(sh.args) != 1 {
		return nil, fmt.Errorf("Reconcile needs an activity with one argument (after the context), which it is given; this one has %d", len(sh.args))
	}
	out := "struct{}"
	if sh.out != nil {
		out = sh.out.String()
	}
	ok := ft.NumIn() == 3 && ft.In(0) == contextType && ft.In(1) == sh.args[0] && ft.In(2) == recordType &&
		ft.NumOut() == 3 && (sh.out == nil || ft.Out(0) == sh.out) && ft.Out(1) == boolType && ft.Out(2) == errorType
	if !ok {
		return nil, fmt.Errorf("%s's function is %s, but the activity needs func(context.Context, %s, onceflow.Record) (%s, bool, error)",
			"Reconcile", ft, sh.args[0], out)
	}
	fv := reflect.ValueOf(f)
	return func(ctx context.Context, args any, rec onceflow.Record) (any, bool, error) {
		outs := fv.Call([]reflect.Value{reflect.ValueOf(&ctx).Elem(), args.([]reflect.Value)[0], reflect.ValueOf(rec)})
		var err error
		if e := outs[2]; !e.IsNil() {
			err = e.Interface().(error)
		}
		return outs[0].Interface(), outs[1].Bool(), err
	}, nil
}

// bound is an activity Register bound: its binding and shape.
type bound struct {
	b  *binding
	sh shape
}

// activity is the function Register registers for it: the same
// arguments and results, with a context.Context first whether or not the
// function takes one, running through run.
func (bd *bound) activity(w *Wrapper) any {
	in := append([]reflect.Type{contextType}, bd.sh.args...)
	outs := []reflect.Type{errorType}
	if bd.sh.out != nil {
		outs = []reflect.Type{bd.sh.out, errorType}
	}
	return reflect.MakeFunc(reflect.FuncOf(in, outs, false), func(vals []reflect.Value) []reflect.Value {
		ctx, _ := vals[0].Interface().(context.Context)
		out, err := bd.result(run(ctx, w, bd.b, vals[1:], nil))
		errv := reflect.New(errorType).Elem()
		if err != nil {
			errv.Set(reflect.ValueOf(err))
		}
		if bd.sh.out == nil {
			return []reflect.Value{errv}
		}
		return []reflect.Value{out, errv}
	}).Interface()
}

// result is the activity's result (a zero Value when it has none) from
// one run of it.
func (bd *bound) result(r ran) (reflect.Value, error) {
	if bd.sh.out == nil {
		return reflect.Value{}, r.err
	}
	out := reflect.New(bd.sh.out)
	if r.err != nil {
		return out.Elem(), r.err
	}
	if err := bd.b.codec.Unmarshal(r.res.Response, out.Interface()); err != nil {
		return out.Elem(), temporal.NewNonRetryableApplicationError(
			"onceflow: the stored result does not decode into "+bd.sh.out.String()+": "+err.Error(), onceflow.OutcomeCodecMismatch.TemporalType(), err)
	}
	return out.Elem(), nil
}

// decodeArgs decodes the activity's arguments from JSON, as a workflow
// passed them.
func (bd *bound) decodeArgs(raw []json.RawMessage) ([]reflect.Value, error) {
	if len(raw) != len(bd.sh.args) {
		return nil, fmt.Errorf("the activity takes %d arguments, got %d", len(bd.sh.args), len(raw))
	}
	vals := make([]reflect.Value, len(raw))
	for i, t := range bd.sh.args {
		p := reflect.New(t)
		if err := json.Unmarshal(raw[i], p.Interface()); err != nil {
			return nil, fmt.Errorf("argument %d does not decode into %s: %w", i+1, t, err)
		}
		vals[i] = p.Elem()
	}
	return vals, nil
}
