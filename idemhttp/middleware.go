package idemhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/internal/scope"
)

// The defaults of Config's fields, which New applies.
const (
	defaultCode            onceflow.OperationCode = "http"
	defaultMaxBodyBytes                           = 1 << 20
	defaultMaxWait                                = 10 * time.Second
	defaultStoreRetryAfter                        = time.Second
	// defaultMaxResponseBytes is the default Config.MaxResponseBytes: the
	// idempotency store's own default limit on a stored response.
	defaultMaxResponseBytes = 1 << 20
)

// Codec is the codec ID of stored responses: the status and the replayed
// headers as a JSON object, a newline, then the body's bytes as they are.
const Codec = "http-v2"

// Config configures a Middleware. Empty fields take their defaults.
type Config struct {
	// Executor runs the requests. Required.
	Executor *idemstore.Executor
	// Digester digests each request's scope, so no raw key or principal
	// reaches Redis. Required.
	Digester *onceflow.Digester
	// Code is the operation code of the records, [a-z0-9-]{1,64}. Default
	// "http". Give each API its own.
	Code onceflow.OperationCode
	// Principal names who sent the request, from the identity the service
	// authenticated (an account or client ID, as ContextPrincipal reads
	// it from the context), never from credential bytes: a client that
	// retries with a re-formatted or rotated credential of the same
	// account must meet the same record, or its retry runs the handler a
	// second time. A key is scoped to principal + method + route pattern +
	// key, as the IETF draft scopes keys per client (and bound to the
	// request's target, see KeyPerTarget). It is called before
	// the body is read. An error matching ErrUnauthenticated, or an empty
	// principal, is answered 401; a *Problem it wraps is answered as it
	// is; any other error is answered 503 (the identity could not be
	// checked). Required unless Anonymous.
	Principal func(*http.Request) (string, error)
	// Anonymous declares that the requests carry no identity: every
	// client shares one scope, so two clients that pick the same key meet
	// one record (the second gets the first's response, or a 422). Fit
	// for a service with a single client, or behind a gateway that scopes
	// keys itself. It cannot be combined with Principal. Default false:
	// New refuses a Config with neither.
	Anonymous bool
	// Key returns the request's idempotency key from the request and its
	// body (read whole, at most MaxBodyBytes). It returns ErrKeyMissing
	// when there is none, an error matching ErrInvalidKey when it is
	// malformed and one matching ErrBodyRefused when the body cannot be
	// read unambiguously (a 400 invalid request body). Default HeaderKey
	// (the Idempotency-Key header); use JSONFieldKey for webhooks keyed by
	// an event ID.
	Key func(r *http.Request, body []byte) (string, error)
	// Require says which requests need a key; the others pass through
	// untouched. Default: POST and PATCH.
	Require func(*http.Request) bool
	// Validate checks a request before anything is claimed: a *Problem it
	// returns is answered as it is and nothing is stored, so a corrected
	// request may reuse the key. Optional.
	Validate func(r *http.Request, body []byte) *Problem
	// MaxBodyBytes is the largest request body: a larger one is answered
	// 413 before any claim. Default 1 MiB.
	MaxBodyBytes int64
	// KeyPerTarget makes the request's target (its path, with the values
	// of the route's wildcards, and its query) part of a key's scope: the
	// same key sent to /accounts/A/charge and to /accounts/B/charge, or
	// with ?dry_run=1 and ?dry_run=0, is then two operations, each run
	// once and replayed to its own retries. Default false: a key is
	// bound to the target of its first request (the path as sent, escapes
	// included, and the query byte for byte), and a request under the key
	// to another target is answered 422, as one with another body is:
	// never another request's stored response. Either way a route without
	// wildcards, sent without a query, is scoped and fingerprinted as it
	// was before targets were bound, so its records stored then still
	// replay.
	KeyPerTarget bool
	// MaxWait caps the wait a client asks for with Prefer: wait=N (RFC
	// 7240) on a key in progress. Default 10s; negative: never wait.
	MaxWait time.Duration
	// Store says which statuses are final and stored for replay. Default
	// StoreStatus. A response not stored leaves the key retryable.
	Store func(status int) bool
	// ReplayHeaders are response headers stored and replayed besides
	// Content-Type and Location (for example "ETag"). Set-Cookie never is.
	ReplayHeaders []string
	// UnknownOn5xx is for handlers that are not idempotent themselves: a
	// 5xx answer or a panic marks the key effect-unknown (ABANDONED), and
	// later requests get a 409 problem until an operator resolves it.
	// Default false: a 5xx or a panic leaves the key retryable
	// (FAILED_RETRYABLE), safe when running the handler again is harmless.
	UnknownOn5xx bool
	// IdempotentHandler declares that running the handler again for a key
	// is harmless: it attaches to what the first run started (a workflow
	// by ID, a row by a UNIQUE key) instead of doing it twice. A key whose
	// earlier request died in the middle of the handler (a worker killed,
	// Redis lost the record, the lease lost) then runs the handler again
	// instead of answering 409 effect-unknown until an operator reopens
	// it. Default false: such a key is effect-unknown. It cannot be
	// combined with UnknownOn5xx.
	IdempotentHandler bool
	// MaxResponseBytes is the largest response kept for replay: its body
	// plus its status and replayed headers (a few hundred bytes). A
	// response to be stored that is larger is not sent: the request, which
	// was processed, is answered 500 response-too-large, and that answer
	// is kept and replayed to every retry of the key, so a retry never
	// runs the handler again nor finds the key stuck. A handler that may
	// answer large bodies learns the limit from InfoFrom and answers a
	// reference instead (a Location to fetch). Default 1 MiB; it must not
	// exceed the store's own limit (redisstore.Config.MaxResponseBytes).
	MaxResponseBytes int
	// StoreRetryAfter is the Retry-After of the 503 answered when Redis
	// cannot be reached. Default 1s.
	StoreRetryAfter time.Duration
	// Logger receives the middleware's lines. Default: discard.
	Logger *slog.Logger
}

// ErrKeyMissing is what Config.Key returns when a request has no key.
var ErrKeyMissing = errors.New("idemhttp: no idempotency key")

// HeaderKey reads the Idempotency-Key header with ParseKey. A request that
// repeats the header is refused.
func HeaderKey(r *http.Request, _ []byte) (string, error) {
	vs := r.Header.Values("Idempotency-Key")
	switch len(vs) {
	case 0:
		return "", ErrKeyMissing
	case 1:
		return ParseKey(vs[0])
	}
	return "", fmt.Errorf("%w: send the header once", ErrInvalidKey)
}

// JSONFieldKey returns a Config.Key that takes the key from a string
// field of the JSON body, such as a webhook's "event_id". A body that
// CanonicalJSON refuses (two "event_id" members, or "event_id" and
// "Event_ID", which a handler decoding with encoding/json reads as the
// other one) is refused with its error (ErrBodyRefused), whatever its
// Content-Type.
func JSONFieldKey(field string) func(*http.Request, []byte) (string, error) {
	return func(_ *http.Request, body []byte) (string, error) {
		if _, err := CanonicalJSON(body); errors.Is(err, ErrBodyRefused) {
			return "", err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return "", fmt.Errorf("%w: the body is not a JSON object with %q", ErrInvalidKey, field)
		}
		raw, ok := m[field]
		if !ok {
			return "", fmt.Errorf("%w: send the %q field, the same on every delivery of the request", ErrKeyMissing, field)
		}
		var key string
		if err := json.Unmarshal(raw, &key); err != nil {
			return "", fmt.Errorf("%w: %q is not a string", ErrInvalidKey, field)
		}
		if key == "" || len(key) > MaxKeyLen {
			return "", fmt.Errorf("%w: %q must be 1 to %d characters", ErrInvalidKey, field, MaxKeyLen)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				return "", fmt.Errorf("%w: %q must be printable ASCII", ErrInvalidKey, field)
			}
		}
		return key, nil
	}
}

// ErrUnauthenticated is what a Config.Principal returns, or wraps, for a
// request that carries no valid identity: the middleware answers it 401
// before it reads the body.
var ErrUnauthenticated = errors.New("idemhttp: request not authenticated")

// AnonymousPrincipal is the principal of every request under
// Config.Anonymous.
const AnonymousPrincipal = "anonymous"

type principalKey struct{}

// WithPrincipal returns a context that names the request's principal, for
// ContextPrincipal: an authentication middleware in front of the
// idempotency middleware calls it once it knows who the caller is.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// ContextPrincipal is a Config.Principal that reads the principal an
// authentication middleware put in the request's context with
// WithPrincipal, and returns ErrUnauthenticated when there is none.
func ContextPrincipal(r *http.Request) (string, error) {
	if p, ok := r.Context().Value(principalKey{}).(string); ok && p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%w: no authenticated principal in the request's context (serve the route behind your authentication middleware, which calls idemhttp.WithPrincipal)", ErrUnauthenticated)
}

// StoreStatus is the default Config.Store: final 2xx and 4xx answers are
// stored, except 202 Accepted (the work goes on: a retry asks again), and
// 408, 409, 425 and 429 (the client should retry). 1xx, 3xx and 5xx are
// not stored.
func StoreStatus(status int) bool {
	switch {
	case status == http.StatusAccepted:
		return false
	case status >= 200 && status < 300:
		return true
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return false
	case status >= 400 && status < 500:
		return true
	}
	return false
}

func requirePostPatch(r *http.Request) bool {
	return r.Method == http.MethodPost || r.Method == http.MethodPatch
}

// Middleware makes handlers idempotent per Idempotency-Key. It is safe for
// concurrent use.
type Middleware struct {
	cfg    Config
	replay map[string]bool // canonical header names
	log    *slog.Logger
	// headerKey: the key is the Idempotency-Key header (Config.Key
	// unset), read before the body.
	headerKey bool
}

// New validates cfg and returns a Middleware.
func New(cfg Config) (*Middleware, error) {
	if cfg.Executor == nil || cfg.Digester == nil {
		return nil, errors.New("idemhttp: Config.Executor and Config.Digester are required")
	}
	if cfg.UnknownOn5xx && cfg.IdempotentHandler {
		return nil, errors.New("idemhttp: Config.UnknownOn5xx and Config.IdempotentHandler contradict each other: " +
			"set UnknownOn5xx for a handler that must not run twice, IdempotentHandler for one that may")
	}
	if cfg.Code == "" {
		cfg.Code = defaultCode
	}
	if _, err := onceflow.ParseOperationCode(string(cfg.Code)); err != nil {
		return nil, fmt.Errorf("idemhttp: Config.Code: %w", err)
	}
	switch {
	case cfg.Principal == nil && !cfg.Anonymous:
		return nil, errors.New("idemhttp: Config.Principal is required: name each request's client from the identity your authentication " +
			"established (idemhttp.ContextPrincipal reads what your middleware put there with idemhttp.WithPrincipal), " +
			"or set Config.Anonymous to let every client share one scope")
	case cfg.Principal != nil && cfg.Anonymous:
		return nil, errors.New("idemhttp: Config.Principal and Config.Anonymous contradict each other: keep one")
	case cfg.Anonymous:
		cfg.Principal = func(*http.Request) (string, error) { return AnonymousPrincipal, nil }
	}
	headerKey := cfg.Key == nil
	if cfg.Require == nil {
		cfg.Require = requirePostPatch
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = defaultMaxBodyBytes
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, errors.New("idemhttp: Config.MaxBodyBytes must not be negative")
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = defaultMaxResponseBytes
	}
	if cfg.MaxResponseBytes < 0 {
		return nil, errors.New("idemhttp: Config.MaxResponseBytes must not be negative")
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = defaultMaxWait
	}
	if cfg.Store == nil {
		cfg.Store = StoreStatus
	}
	if cfg.StoreRetryAfter <= 0 {
		cfg.StoreRetryAfter = defaultStoreRetryAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Middleware{cfg: cfg, log: cfg.Logger, headerKey: headerKey, replay: map[string]bool{"Content-Type": true, "Location": true}}
	for _, h := range cfg.ReplayHeaders {
		h = http.CanonicalHeaderKey(h)
		if h == "Set-Cookie" {
			return nil, errors.New("idemhttp: Set-Cookie is never replayed: a response's cookies belong to its first client")
		}
		m.replay[h] = true
	}
	return m, nil
}

type infoKey struct{}

// Info is what a handler behind the middleware learns of the record its
// request runs under.
type Info struct {
	// Ref names the record: the operation code and its digest (HMAC of
	// principal, method, route and key, and of the request's target under
	// Config.KeyPerTarget). Its Digest.Hex is a stable, opaque name for
	// the request, fit for a workflow ID.
	Ref onceflow.Ref
	// MaxResponseBytes is Config.MaxResponseBytes: a response to be
	// stored must fit in it, body, status and replayed headers together,
	// or the request is answered 500 response-too-large.
	MaxResponseBytes int
}

// InfoFrom returns the Info of a request the middleware passed on to its
// handler.
func InfoFrom(ctx context.Context) (Info, bool) {
	s, ok := ctx.Value(infoKey{}).(Info)
	return s, ok
}

// stored is a response as Redis keeps it (Codec): its head as JSON, a
// newline, then its body as it is.
type stored struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"-"`
}

func (s stored) encode() ([]byte, error) {
	head, err := json.Marshal(s) // never a raw newline: JSON escapes it
	if err != nil {
		return nil, err
	}
	return append(append(head, '\n'), s.Body...), nil
}

func decodeStored(b []byte) (stored, error) {
	var s stored
	head, body, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return s, errors.New("idemhttp: stored response has no head")
	}
	if err := json.Unmarshal(head, &s); err != nil {
		return s, err
	}
	s.Body = body
	return s, nil
}

// Handler returns next behind the middleware. Every answer says
// X-Content-Type-Options: nosniff.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !m.cfg.Require(r) {
			next.ServeHTTP(w, r)
			return
		}
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	// Who is asking comes first: an unauthenticated client's body is not
	// read.
	principal, err := m.cfg.Principal(r)
	if err == nil && principal == "" {
		err = fmt.Errorf("%w: the request's principal is empty", ErrUnauthenticated)
	}
	if err != nil {
		refuseUnread(w, r, m.principalProblem(r.Context(), err))
		return
	}
	// The header's key is checked before the body is read: a request
	// that cannot be keyed costs no body.
	var key string
	if m.headerKey {
		if key, err = HeaderKey(r, nil); err != nil {
			refuseUnread(w, r, keyProblem(err))
			return
		}
	}
	body, p := m.readBody(w, r)
	if p != nil {
		refuseUnread(w, r, p)
		return
	}
	// The body is fingerprinted as the handler will read it, or refused:
	// before a key taken from it, so a webhook keyed by a field of a body
	// refused for its nesting hears why, not that its key is invalid.
	fingerprinted, err := canonicalBody(r, body)
	if err != nil {
		WriteProblem(w, bodyProblem(err))
		return
	}
	if !m.headerKey {
		if key, err = m.cfg.Key(r, body); err != nil {
			WriteProblem(w, keyProblem(err))
			return
		}
	}
	if m.cfg.Validate != nil {
		if p := m.cfg.Validate(r, body); p != nil {
			WriteProblem(w, p)
			return
		}
	}
	route := r.Pattern
	if route == "" {
		route = r.URL.Path
	}
	// The key is bound to the request's target: in its fingerprint (a
	// request to another target under the key is a 422), or, with
	// KeyPerTarget, in its scope (another operation).
	raw := scope.HTTP(principal, r.Method, route, key)
	fingerprint := [][]byte{[]byte(r.Method), []byte(route)}
	if target := requestTarget(r, route); target != "" {
		if m.cfg.KeyPerTarget {
			raw = append(raw, "target", target)
		} else {
			fingerprint = append(fingerprint, []byte("target:"+target))
		}
	}
	ref := onceflow.Ref{Code: m.cfg.Code, Digest: m.cfg.Digester.Digest(raw...)}
	req := idemstore.Request{
		Ref:                  ref,
		Operation:            m.cfg.Digester.Operation("http/" + ref.String()),
		Fingerprint:          onceflow.FingerprintOf(append(fingerprint, fingerprinted)...),
		Codec:                Codec,
		IdempotentDownstream: m.cfg.IdempotentHandler,
	}

	var ran *recorder // set when this request ran the handler
	action := m.handlerAction(next, r, ref, body, &ran)

	var res idemstore.Result
	waited := false
	if wait := m.preferWait(r); wait > 0 {
		res, waited, err = m.cfg.Executor.ExecuteWaiting(r.Context(), req, action, idemstore.Waiting{
			Deadline: time.Now().Add(wait), MinDelay: 20 * time.Millisecond, MaxDelay: 250 * time.Millisecond,
			OnWait: func(*onceflow.Error) {
				m.log.DebugContext(r.Context(), "idemhttp: in progress; waiting (Prefer: wait)", "ref", ref.String(), "wait", wait)
			},
		})
		if waited && r.Context().Err() != nil {
			return // the client is gone
		}
		if waited {
			w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(wait/time.Second)))
		}
	} else {
		res, err = m.cfg.Executor.Execute(r.Context(), req, action)
	}
	switch {
	case ran != nil:
		if err != nil && !isRetryable(err) {
			m.log.WarnContext(r.Context(), "idemhttp: the handler ran but its outcome is not recorded as final", "ref", ref.String(), "status", ran.statusCode(), "err", err)
		}
		ran.writeTo(w, nil)
	case err == nil:
		m.writeReplay(w, r, ref, res.Response)
	default:
		WriteProblem(w, m.problem(r.Context(), ref, err))
	}
}

// handlerAction is the action of a request: it runs next on a copy of r
// with body, records its answer in a recorder it sets *ran to, and says
// what the answer means for the record (kept, not stored, retryable,
// effect unknown).
func (m *Middleware) handlerAction(next http.Handler, r *http.Request, ref onceflow.Ref, body []byte, ran **recorder) idemstore.Action {
	return func(actx context.Context) ([]byte, error) {
		rec := newRecorder()
		*ran = rec
		hr := r.Clone(context.WithValue(actx, infoKey{}, Info{Ref: ref, MaxResponseBytes: m.cfg.MaxResponseBytes}))
		hr.Body = io.NopCloser(bytes.NewReader(body))
		hr.ContentLength = int64(len(body))
		if p := m.run(next, rec, hr); p != nil {
			*rec = *newRecorder()
			WriteProblem(rec, &Problem{Type: ProblemHandlerPanicked, Title: "Internal error", Status: http.StatusInternalServerError,
				Detail: "the server failed while handling the request; retry it with the same key"})
			if m.cfg.UnknownOn5xx {
				return nil, idemstore.EffectUnknown(fmt.Errorf("the handler panicked: %v", p))
			}
			return nil, idemstore.RetryableNoEffect(fmt.Errorf("the handler panicked: %v", p))
		}
		status := rec.statusCode()
		if m.cfg.Store(status) {
			return m.keep(r.Context(), ref, rec)
		}
		if status >= 500 && m.cfg.UnknownOn5xx {
			return nil, idemstore.EffectUnknown(fmt.Errorf("the handler answered %d", status))
		}
		if status < 400 {
			// A 202 Accepted (or a 2xx or 3xx Store refuses) is an answer,
			// not a failure: counted as not_stored, not retryable.
			return nil, idemstore.NotStored(fmt.Errorf("status %d is not stored", status))
		}
		return nil, idemstore.RetryableNoEffect(fmt.Errorf("status %d is not stored", status))
	}
}

// requestTarget is what of the request's target its route does not
// already say: the path as sent (escapes included: /a%2Fb and /a/b are
// two targets, which a route's wildcards may read apart) and the query,
// byte for byte; "" when the route's path is the request's path, with no
// query, so that such a request keeps the scope and fingerprint it had
// before targets were bound.
func requestTarget(r *http.Request, route string) string {
	path := r.URL.EscapedPath()
	routePath := route
	if i := strings.IndexByte(route, '/'); i >= 0 { // "[METHOD ][HOST]/PATH"
		routePath = route[i:]
	}
	if path == routePath && r.URL.RawQuery == "" && !r.URL.ForceQuery {
		return ""
	}
	if r.URL.RawQuery == "" && !r.URL.ForceQuery {
		return path
	}
	return path + "?" + r.URL.RawQuery
}

// refuseUnread answers p to a request whose body was not read to its end:
// the connection is closed after the answer, so that net/http does not
// first read the rest of a body nobody will use (up to 256 KiB, waiting
// for it to come: a client that declared a body and sent none would hold
// the answer until the server's read timeout).
func refuseUnread(w http.ResponseWriter, r *http.Request, p *Problem) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	WriteProblem(w, p)
}

// readBody reads the request's body up to Config.MaxBodyBytes, or says
// why it cannot. A declared body over the limit is answered before any of
// it is read, so a client that sent Expect: 100-continue gets no 100
// Continue.
func (m *Middleware) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Problem) {
	if r.ContentLength > m.cfg.MaxBodyBytes {
		return nil, m.bodyTooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.cfg.MaxBodyBytes))
	if err == nil {
		return body, nil
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, m.bodyTooLarge()
	}
	return nil, &Problem{Type: ProblemInvalidRequest, Title: "Request body unreadable", Status: http.StatusBadRequest,
		Detail: "the body could not be read: " + err.Error()}
}

func (m *Middleware) bodyTooLarge() *Problem {
	return &Problem{Type: ProblemBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
		Detail: fmt.Sprintf("the body is over %d bytes: send a smaller one", m.cfg.MaxBodyBytes)}
}

// writeReplay writes the response stored for ref.
func (m *Middleware) writeReplay(w http.ResponseWriter, r *http.Request, ref onceflow.Ref, stored []byte) {
	s, err := decodeStored(stored)
	if err != nil {
		WriteProblem(w, &Problem{Type: ProblemCorruptRecord, Title: "Stored response unreadable", Status: http.StatusInternalServerError,
			Detail: "the response stored for this key does not decode; an operator must delete record " + ref.String()})
		return
	}
	m.log.DebugContext(r.Context(), "idemhttp: replayed", "ref", ref.String(), "status", s.Status)
	for k, vs := range s.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Idempotency-Replayed", "true")
	w.WriteHeader(s.Status)
	_, _ = w.Write(s.Body)
}

// principalProblem answers a request whose principal is unknown.
func (m *Middleware) principalProblem(ctx context.Context, err error) *Problem {
	var p *Problem
	switch {
	case errors.As(err, &p):
		return p
	case errors.Is(err, ErrUnauthenticated):
		return &Problem{Type: ProblemUnauthenticated, Title: "Unauthenticated", Status: http.StatusUnauthorized,
			Detail: "this request needs the client's credentials, and the request was not processed: send them, and the same Idempotency-Key when you retry"}
	}
	m.log.WarnContext(ctx, "idemhttp: the request's principal could not be checked; refusing the request", "err", err)
	return &Problem{Type: ProblemAuthUnavailable, Title: "Authentication unavailable", Status: http.StatusServiceUnavailable, RetryAfter: m.cfg.StoreRetryAfter,
		Detail: "the client's identity could not be checked, and the request was not processed; retry it with the same key after Retry-After seconds"}
}

// keyProblem answers a request whose key is missing or invalid, or whose
// body a Config.Key refused.
func keyProblem(err error) *Problem {
	switch {
	case errors.Is(err, ErrBodyRefused):
		return bodyProblem(err)
	case errors.Is(err, ErrKeyMissing):
		detail := "this request needs an idempotency key: send an Idempotency-Key header with a unique value, such as a UUID, and the same value when you retry it"
		if err != ErrKeyMissing { // a Config.Key of its own says what it wants
			detail = "this request needs an idempotency key: " + strings.TrimPrefix(strings.TrimPrefix(err.Error(), ErrKeyMissing.Error()), ": ")
		}
		return &Problem{Type: ProblemKeyMissing, Title: "Idempotency key missing", Status: http.StatusBadRequest, Detail: detail}
	}
	return &Problem{Type: ProblemKeyInvalid, Title: "Idempotency key invalid", Status: http.StatusBadRequest,
		Detail: strings.TrimPrefix(err.Error(), "idemhttp: ") + "; send 1 to 255 printable ASCII characters, such as a UUID"}
}

// keep encodes the response rec holds for the store; one the store cannot
// keep is replaced, in rec and in the store, by a response-too-large
// problem, so the client is never sent an answer that its retry would not
// get.
func (m *Middleware) keep(ctx context.Context, ref onceflow.Ref, rec *recorder) ([]byte, error) {
	b, err := stored{Status: rec.statusCode(), Header: m.replayed(rec.header), Body: rec.body.Bytes()}.encode()
	if err != nil || len(b) <= m.cfg.MaxResponseBytes {
		return b, err
	}
	m.log.ErrorContext(ctx, "idemhttp: the handler's response is too large to keep; answering response-too-large instead",
		"ref", ref.String(), "status", rec.statusCode(), "bytes", len(b), "max_response_bytes", m.cfg.MaxResponseBytes)
	*rec = *newRecorder()
	WriteProblem(rec, &Problem{Type: ProblemResponseTooLarge, Title: "Response too large", Status: http.StatusInternalServerError,
		Detail: fmt.Sprintf("the request was processed, but its response (%d bytes) is over the %d bytes kept for replay, so it was not sent: "+
			"do not send it again under a new key, which would process it again; the service must answer it with less (an operator has the log line of record %s)",
			len(b), m.cfg.MaxResponseBytes, ref.String())})
	return stored{Status: rec.statusCode(), Header: rec.header.Clone(), Body: rec.body.Bytes()}.encode()
}

// run calls the handler and returns what it panicked with, if it did.
func (m *Middleware) run(next http.Handler, w http.ResponseWriter, r *http.Request) (panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
			m.log.ErrorContext(r.Context(), "idemhttp: handler panicked", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	next.ServeHTTP(w, r)
	return nil
}

func isRetryable(err error) bool { return errors.Is(err, onceflow.OutcomeRetryable) }

// problemSpec is how one outcome is answered.
type problemSpec struct {
	typ, title string
	status     int
	// detail says what happened and what to do.
	detail func(ref onceflow.Ref, err error) string
}

// problems maps every failure outcome to its answer.
var problems = map[onceflow.Outcome]problemSpec{
	onceflow.OutcomeInProgress: {ProblemInProgress, "Request in progress", http.StatusConflict, func(onceflow.Ref, error) string {
		return "a request with this key is being processed: retry after the Retry-After seconds, or send Prefer: wait=N to wait for its response"
	}},
	onceflow.OutcomeFingerprintMismatch: {ProblemKeyReused, "Idempotency key reused", http.StatusUnprocessableEntity, func(onceflow.Ref, error) string {
		return "this key was used for a request with another method, path, query or body: send a new key for a new request"
	}},
	onceflow.OutcomeOwnerConflict:    {ProblemKeyReused, "Idempotency key conflict", http.StatusConflict, conflictDetail},
	onceflow.OutcomeCodecMismatch:    {ProblemKeyReused, "Idempotency key conflict", http.StatusConflict, conflictDetail},
	onceflow.OutcomeEffectUnknown:    {ProblemEffectUnknown, "Effect unknown", http.StatusConflict, effectUnknownDetail},
	onceflow.OutcomeAwaitingDecision: {ProblemEffectUnknown, "Effect unknown", http.StatusConflict, effectUnknownDetail},
	onceflow.OutcomeFailed: {ProblemOperationFailed, "Operation failed", http.StatusConflict, func(_ onceflow.Ref, err error) string {
		var of *onceflow.Error
		errors.As(err, &of)
		return "an operator marked the request with this key as failed (" + of.Reason + "): send a new key"
	}},
	onceflow.OutcomeCorrupt: {ProblemCorruptRecord, "Idempotency record corrupt", http.StatusInternalServerError, func(ref onceflow.Ref, _ error) string {
		return "the record of this key does not decode; an operator must delete record " + ref.String()
	}},
	onceflow.OutcomeInvalid: {ProblemInvalidRequest, "Request cannot be checked", http.StatusBadRequest, func(_ onceflow.Ref, err error) string {
		var ve *onceflow.Error
		errors.As(err, &ve)
		return "the request's idempotency identity is invalid (" + ve.Field + " " + ve.Reason + "): it was not processed"
	}},
	onceflow.OutcomeRetryable: {ProblemStoreUnavailable, "Request not processed", http.StatusServiceUnavailable, func(onceflow.Ref, error) string {
		return "an earlier attempt with this key failed with no effect, and this request was not processed; retry it with the same key after Retry-After seconds"
	}},
	// A store call cut short by the request's own context (the client
	// went away, a server timeout): the store may be fine.
	onceflow.OutcomeNotStored: {ProblemStoreUnavailable, "Request not processed", http.StatusServiceUnavailable, func(onceflow.Ref, error) string {
		return "an earlier attempt with this key failed with no effect, and this request was not processed; retry it with the same key after Retry-After seconds"
	}},
	// A store call cut short by the request's own context (the client
	// went away, a server timeout): the store may be fine.
	onceflow.OutcomeCanceled: {ProblemStoreUnavailable, "Request not processed", http.StatusServiceUnavailable, func(onceflow.Ref, error) string {
		return "the request was cancelled or timed out before its key could be checked, and was not processed; retry it with the same key"
	}},
	// Redis unreachable or not answering within its command timeout (a
	// transport error, or the store's own deadline: never the request's).
	onceflow.OutcomeStoreUnavailable: {ProblemStoreUnavailable, "Idempotency store unavailable", http.StatusServiceUnavailable, func(onceflow.Ref, error) string {
		return "the idempotency store is unavailable, so the request's key could not be checked and the request was not processed; retry it with the same key after Retry-After seconds"
	}},
	// problem answers OutcomeIndeterminate as OutcomeStoreUnavailable: the
	// request was not processed either way.
	onceflow.OutcomeIndeterminate: {ProblemStoreUnavailable, "Idempotency store unavailable", http.StatusServiceUnavailable, func(onceflow.Ref, error) string {
		return "the idempotency store did not answer, so the request was not processed; retry it with the same key after Retry-After seconds"
	}},
	// The middleware never resolves a record, checks a business reference
	// or runs an activity: these here are a bug.
	onceflow.OutcomeResolveRefused:  internalProblem,
	onceflow.OutcomeNoRecord:        internalProblem,
	onceflow.OutcomeReferenceReused: internalProblem,
	onceflow.OutcomeMisconfigured:   internalProblem,
	onceflow.OutcomeError:           internalProblem,
}

// internalProblem answers an outcome the middleware does not classify.
var internalProblem = problemSpec{ProblemInternal, "Internal error", http.StatusInternalServerError, func(onceflow.Ref, error) string {
	return "the idempotency layer failed in a way it does not classify (a bug: the server's log has the error); retry it with the same key"
}}

func conflictDetail(_ onceflow.Ref, err error) string {
	var ce *onceflow.Error
	errors.As(err, &ce)
	return "the response stored for this key was written by another version of the service (" + ce.Reason + "); send a new key"
}

func effectUnknownDetail(ref onceflow.Ref, _ error) string {
	return "an earlier request with this key may or may not have taken effect, and its response was not recorded: " +
		"an operator must resolve record " + ref.String() + " (worker reopen -record " + ref.String() + " once it is known to have had no effect) before the key can be used again"
}

// problem maps an Execute error to the answer, through its outcome and
// problems. A store that did not answer because the client went away
// is the client's cancellation, not an unavailable store.
func (m *Middleware) problem(ctx context.Context, ref onceflow.Ref, err error) *Problem {
	o := onceflow.OutcomeError
	var oe *onceflow.Error
	if errors.As(err, &oe) {
		o = oe.Outcome
	}
	if o == onceflow.OutcomeIndeterminate {
		o = onceflow.OutcomeStoreUnavailable // the request was not processed either way: its key is still held
	}
	if o == onceflow.OutcomeStoreUnavailable && ctx.Err() != nil {
		o = onceflow.OutcomeCanceled
	}
	spec := problems[o]
	p := &Problem{Type: spec.typ, Title: spec.title, Status: spec.status, Detail: spec.detail(ref, err)}
	switch o {
	case onceflow.OutcomeInProgress:
		var ip *onceflow.Error
		errors.As(err, &ip)
		p.RetryAfter = max(ip.RetryAfter, time.Second)
	case onceflow.OutcomeStoreUnavailable, onceflow.OutcomeCanceled, onceflow.OutcomeRetryable, onceflow.OutcomeNotStored:
		p.RetryAfter = m.cfg.StoreRetryAfter
	}
	switch o {
	case onceflow.OutcomeStoreUnavailable:
		m.log.Warn("idemhttp: the idempotency store is unavailable; refusing the request", "ref", ref.String(), "err", err)
	case onceflow.OutcomeError, onceflow.OutcomeCorrupt:
		m.log.Error("idemhttp: refusing the request", "ref", ref.String(), "outcome", string(o), "err", err)
	}
	return p
}

// preferWait returns the wait the client asked for with Prefer: wait=N,
// capped by MaxWait.
func (m *Middleware) preferWait(r *http.Request) time.Duration {
	if m.cfg.MaxWait < 0 {
		return 0
	}
	for _, v := range r.Header.Values("Prefer") {
		for _, pref := range strings.Split(v, ",") {
			pref, _, _ = strings.Cut(pref, ";")
			name, val, ok := strings.Cut(strings.TrimSpace(pref), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`))
			if err != nil || n <= 0 {
				continue
			}
			return min(time.Duration(n)*time.Second, m.cfg.MaxWait)
		}
	}
	return 0
}

// replayed keeps the headers that are replayed.
func (m *Middleware) replayed(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		if m.replay[http.CanonicalHeaderKey(k)] {
			out[http.CanonicalHeaderKey(k)] = vs
		}
	}
	return out
}

// canonicalBody is the body as fingerprinted: canonical JSON when it is
// JSON (by Content-Type, or, when there is none, when it parses as JSON),
// else the bytes. A body declared JSON that is not JSON, or that
// CanonicalJSON refuses (ErrBodyRefused: duplicate or case-variant member
// names, invalid UTF-8, too deep, data after the value), is an error: two
// such bodies that a handler reads differently could share a fingerprint.
func canonicalBody(r *http.Request, body []byte) ([]byte, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	declared := ct == "application/json" || strings.HasSuffix(ct, "+json")
	if declared || (ct == "" && json.Valid(body)) {
		c, err := CanonicalJSON(body)
		switch {
		case err == nil:
			return append([]byte("json:"), c...), nil
		case errors.Is(err, ErrBodyRefused):
			return nil, err
		}
		return nil, fmt.Errorf("%w: the body is declared JSON (Content-Type %s) but is not JSON: %s", ErrBodyRefused, ct, strings.TrimPrefix(err.Error(), "idemhttp: "))
	}
	return append([]byte("raw:"), body...), nil
}

// bodyProblem answers a body CanonicalJSON refused: nothing was claimed,
// so a corrected body may reuse the key.
func bodyProblem(err error) *Problem {
	return &Problem{Type: ProblemInvalidRequest, Title: "Invalid request body", Status: http.StatusBadRequest,
		Detail: strings.TrimPrefix(err.Error(), ErrBodyRefused.Error()+": ") + " (the request was not processed: fix the body and send it again, with the same key if you like)"}
}

// recorder captures a handler's response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (r *recorder) writeTo(w http.ResponseWriter, extra http.Header) {
	for k, vs := range r.header {
		w.Header()[k] = vs
	}
	for k, vs := range extra {
		w.Header()[k] = vs
	}
	w.WriteHeader(r.statusCode())
	_, _ = w.Write(r.body.Bytes())
}
