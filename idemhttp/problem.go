package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Problem types (RFC 9457 "type" URIs) of the middleware's errors. They
// are stable: clients may match on them.
const (
	ProblemKeyMissing       = "urn:onceflow:problem:idempotency-key-missing"
	ProblemKeyInvalid       = "urn:onceflow:problem:idempotency-key-invalid"
	ProblemKeyReused        = "urn:onceflow:problem:idempotency-key-reused"
	ProblemInProgress       = "urn:onceflow:problem:request-in-progress"
	ProblemEffectUnknown    = "urn:onceflow:problem:effect-unknown"
	ProblemOperationFailed  = "urn:onceflow:problem:operation-failed"
	ProblemBodyTooLarge     = "urn:onceflow:problem:body-too-large"
	ProblemInvalidRequest   = "urn:onceflow:problem:invalid-request"
	ProblemStoreUnavailable = "urn:onceflow:problem:store-unavailable"
	ProblemCorruptRecord    = "urn:onceflow:problem:corrupt-record"
	ProblemHandlerPanicked  = "urn:onceflow:problem:handler-panicked"
	ProblemInternal         = "urn:onceflow:problem:internal-error"
	// ProblemResponseTooLarge (500): the request was processed, but its
	// response was over Config.MaxResponseBytes; this answer is kept and
	// replayed in its place.
	ProblemResponseTooLarge = "urn:onceflow:problem:response-too-large"
	// ProblemUnauthenticated (401): Config.Principal found no identity.
	ProblemUnauthenticated = "urn:onceflow:problem:unauthenticated"
	// ProblemAuthUnavailable (503): Config.Principal could not check the
	// identity (its own store failed).
	ProblemAuthUnavailable = "urn:onceflow:problem:authentication-unavailable"
)

// ContentTypeProblem is the media type of a Problem.
const ContentTypeProblem = "application/problem+json"

// Problem is an RFC 9457 problem detail: every error the middleware
// answers is one.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	// Detail says what to do.
	Detail string `json:"detail"`
	// RetryAfter, when positive, is sent as the Retry-After header, in
	// whole seconds (at least 1).
	RetryAfter time.Duration `json:"-"`
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// WriteProblem writes p as application/problem+json.
func WriteProblem(w http.ResponseWriter, p *Problem) {
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(p.RetryAfter)))
	}
	w.Header().Set("Content-Type", ContentTypeProblem)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// retrySeconds rounds d up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
