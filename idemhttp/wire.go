package idemhttp

import "github.com/onceflow/onceflow/idemhttp/internal/wire"

// MaxJSONDepth is the deepest nesting of arrays and objects CanonicalJSON
// accepts: a document nested deeper is refused (ErrBodyRefused).
const MaxJSONDepth = wire.MaxJSONDepth

// MaxKeyLen is the longest idempotency key accepted, in bytes.
const MaxKeyLen = wire.MaxKeyLen

// ErrBodyRefused is what CanonicalJSON's errors match when the document
// is JSON but cannot be given one canonical form that means what every
// reader of it reads: a member name twice in one object (or two names
// that differ only in case, which encoding/json matches to one field),
// invalid UTF-8 or an unpaired UTF-16 surrogate escape (both of which a
// decoder replaces with U+FFFD, so two different bodies would read
// alike), nesting deeper than MaxJSONDepth, a number whose exponent has
// more than 9 digits, or data after the value. The middleware answers
// such a body 400 before any claim. Its other errors mean the document is
// not JSON.
var ErrBodyRefused = wire.ErrBodyRefused

// ErrInvalidKey is what ParseKey's errors match.
var ErrInvalidKey = wire.ErrInvalidKey

// CanonicalJSON returns a canonical form of a JSON document, so that two
// documents that mean the same have the same bytes: object members sorted
// by name, no insignificant whitespace, strings re-escaped one way, and
// numbers in one form (1, 1.0, 10e-1 and 0.1e1 are all 1e0; -0 is 0),
// exact whatever their size. It fails on anything that is not one JSON
// value, and refuses (ErrBodyRefused) what I-JSON (RFC 7493) refuses and
// what would let two different documents share a form: duplicate member
// names, case-folded ones included (encoding/json reads "Amount" and
// "amount" as one field, the last one winning), invalid UTF-8, unpaired
// surrogate escapes, nesting deeper than MaxJSONDepth, exponents of more
// than 9 digits, and data after the value (a decoder of one value ignores
// it). It takes time and memory linear in the document's size whatever
// its depth (TestCanonicalJSONAllocatesLinearly: at most 48 bytes
// allocated per byte of input); FuzzCanonicalJSON (internal/wire) fuzzes
// it against that budget and against the decoder-based implementation it
// replaced.
func CanonicalJSON(doc []byte) ([]byte, error) { return wire.CanonicalJSON(doc) }

// ParseKey reads the value of an Idempotency-Key header
// (draft-ietf-httpapi-idempotency-key-header): an RFC 8941 sf-string,
// such as "8e03978e-40d5-43e8-bc93-6894a57f9324" in double quotes with \"
// and \\ escapes, or, as many clients send it, the bare key without
// quotes (printable ASCII, no spaces, quotes or backslashes). The key is
// 1 to MaxKeyLen printable ASCII characters. Surrounding spaces and tabs
// are ignored; anything else around the key (parameters, a second item)
// is refused. FuzzParseKey (internal/wire) fuzzes it.
func ParseKey(v string) (string, error) { return wire.ParseKey(v) }
