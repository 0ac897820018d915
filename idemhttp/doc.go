// Package idemhttp is an HTTP Idempotency-Key middleware on
// idemstore.Executor (draft-ietf-httpapi-idempotency-key-header): a POST
// retried with the same key runs its handler once and replays the stored
// response.
//
//	mw, err := idemhttp.New(idemhttp.Config{Executor: exec, Digester: digester, Code: "orders-api",
//		Principal: idemhttp.ContextPrincipal})
//	mux.Handle("POST /orders", authenticate(mw.Handler(createOrder)))
//
// For each request that needs a key (Config.Require; POST and PATCH by
// default):
//
//   - its principal is who the service authenticated (Config.Principal:
//     an account or client ID, which authenticate put in the context with
//     WithPrincipal), never the bytes of a credential, so a retry with a
//     re-formatted or rotated credential of the same account meets the same
//     record; none: 401, before the body is read. Without a Principal,
//     New refuses the Config unless Config.Anonymous says every client
//     shares one scope;
//   - the key is the Idempotency-Key header, an RFC 8941 sf-string or a bare
//     token (letters, digits and !#$%&'*+-.^_`|~:/), 1–255 printable ASCII,
//     checked before the body is read (Config.Key may take it from the
//     body instead, such as a webhook's event ID); missing or malformed:
//     400;
//   - its scope is principal + method + route pattern + key, digested with
//     the Digester's secret: no raw key or principal reaches Redis;
//   - its fingerprint is the SHA-256 of method, route, the request's target
//     (the path with its wildcards' values, and the query) and body, so
//     the key is bound to the concrete request: the same key sent to
//     /accounts/B/charge after /accounts/A/charge, or with another query,
//     is a 422, never A's stored answer (Config.KeyPerTarget makes each
//     target an operation of its own instead); a JSON body is
//     canonicalised first (CanonicalJSON), so the same JSON with its keys
//     reordered or other whitespace is the same request; a JSON body that
//     has no faithful canonical form is a 400 invalid request body before
//     any claim (ErrBodyRefused): a member name twice in one object or two
//     that differ only in case (RFC 7493 I-JSON; encoding/json reads them
//     as one field), invalid UTF-8 or an unpaired surrogate escape (read as
//     U+FFFD), nesting deeper than MaxJSONDepth (1000), an exponent of more
//     than 9 digits, data after the value, or a body declared JSON that is
//     not; canonicalising takes time and memory linear in the body's size
//     whatever its depth;
//   - the same key with another fingerprint: 422; in progress: 409 with
//     Retry-After (the lease left, at least 1 s), or, with Prefer: wait=N
//     (RFC 7240), a wait of up to N seconds (capped by Config.MaxWait) for
//     the stored response;
//   - final 2xx and 4xx answers but 202, 408, 409, 425 and 429 are stored
//     and replayed byte for byte, with Content-Type, Location and
//     Config.ReplayHeaders (never Set-Cookie) and Idempotency-Replayed: true;
//     a response to be stored over Config.MaxResponseBytes (1 MiB, the
//     store's limit; the handler learns it from InfoFrom) is not sent:
//     the request is answered 500 response-too-large, and that answer is
//     stored and replayed, so a retry never finds the key stuck;
//     anything else, a 5xx and a panic leave the key retryable, or, with
//     Config.UnknownOn5xx, effect-unknown: later requests get a 409 until an
//     operator resolves the record;
//   - a body over Config.MaxBodyBytes (1 MiB): 413 before any claim; Redis
//     unreachable or a claim whose outcome is unknown: 503 "Idempotency
//     store unavailable" with Retry-After, and the handler does not run (a
//     request whose own context ended first: 503 "Request not processed");
//   - every error is an RFC 9457 application/problem+json with a type, a
//     title, the status and a detail that says what to do; every answer
//     says X-Content-Type-Options: nosniff; a refusal before the body is
//     read to its end (401, 400 on the key, 413) closes the connection
//     after it, so it is answered at once even when the declared body
//     never comes, behind otelhttp too.
//
// The handler runs under the executor's lease: its context is cancelled if
// the lease cannot be kept. A handler's response that cannot be recorded
// (the store's reply lost) is still sent to its client; a retry then finds
// the record in flight and, once its lease has run out, effect-unknown: it
// never runs the handler a second time, unless Config.IdempotentHandler
// declares that a second run is harmless (the order API's handler attaches
// to the order's workflow by ID), and then it runs it again.
package idemhttp
