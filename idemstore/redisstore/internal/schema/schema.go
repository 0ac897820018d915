// Package schema states, once, what a stored record holds and what the
// scripts answer: the record's fields, where the hash keeps each and the
// rules every reader checks, and the reply codes. Package redisstore
// decodes replies with it; the generator (../gen) renders it into the Lua
// scripts (lua/gen/*.lua), which validate a record with it before they
// decide anything. A record that breaks a rule is refused by both sides,
// never changed.
//
// Where idemstore states a rule (an owner's form, a codec, a reason's
// length), the Go check here is idemstore's, on the form the record keeps
// (the owner, fingerprint and nonce as the raw bytes their hex encodes);
// the Lua check is its twin, rendered by the generator.
//
// Cross-field rules, checked the same way on both sides (the generated
// load and redisstore's decodeRecord): a CLAIMED or EXECUTING record has a
// leaseUntil; an EXECUTING record has a nonce; a COMPLETED record has a
// resp and its sum. Checked by the scripts' load alone, since a reply
// carries the response joined rather than its fields: only a COMPLETED
// record holds a response, and a response's chunk fields (ChunkField) are
// resp, resp2, … up to its last chunk, none missing and none beyond it,
// every chunk but the last ChunkSize bytes (a stray resp3 of an EXECUTING
// record would otherwise be joined into the response a later COMPLETE
// writes); and the hash holds no field but the record's and its
// response's chunks: any other is refused by name (a record of another
// layout lives under another key version, redisstore.KeyLayoutVersion,
// which a store never reads).
package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
)

// Field is one field of a record and its rule.
type Field struct {
	// Name names the field in errors, replies and the documentation.
	Name string
	// Key is the hash field that keeps it; "" for a part of MetaField.
	Key      string
	Kind     Kind
	Required bool
}

// Fields is the record, in the order a reply lists it.
var Fields = [NumFields]Field{
	{"state", "", KindState, true},
	{"owner", "o", KindOwner, true},
	{"attempt", "", KindCount, true},
	{"rev", "", KindCount, true},
	{"op", "op", KindOperation, true},
	{"fp", "f", KindFingerprint, true},
	{"codec", "", KindCodec, true},
	{"policy", "", KindCount, true},
	{"leaseUntil", "l", KindMillis, false},
	{"nonce", "n", KindNonce, false},
	{"uncertain", "", KindFlag, false},
	{"reason", "r", KindText, false},
	{"createdAt", "", KindMillis, true},
	{"updatedAt", "", KindMillis, true},
	{"sum", "", KindChecksum, false},
}

// The indexes of Fields.
const (
	FState = iota
	FOwner
	FAttempt
	FRev
	FOp
	FFp
	FCodec
	FPolicy
	FLeaseUntil
	FNonce
	FEffectUnknown
	FReason
	FCreatedAt
	FUpdatedAt
	FSum
	NumFields
)

// The stored layout. A record is one hash: the fields of StoredFields
// under their keys (Field.Key, one or two letters), the fields of
// MetaParts packed into the one field MetaField, and the response's
// chunks (ChunkField). Fewer and shorter fields make a smaller listpack,
// which Redis also searches linearly for every field a command names: an
// EXECUTING record is 6 fields, and a script reads a record with one HMGET
// of 9 fields and checks the packed ones with one pattern match. The
// owner, the fingerprint and the nonce are kept as the raw bytes of
// their hex (RawLen), half the bytes.
const MetaField = "m"

// NumMeta is how many fields MetaField packs.
const NumMeta = 9

// MetaParts are the fields MetaField packs, in order, separated by ':'
// (no valid value of theirs holds one; codec is last all the same). In
// MetaField, uncertain is always "0" or "1" and a missing sum is empty;
// every other part is required.
var MetaParts = [NumMeta]int{FState, FAttempt, FRev, FPolicy, FCreatedAt, FUpdatedAt, FEffectUnknown, FSum, FCodec}

// StoredFields are the fields stored under their own keys.
var StoredFields = [...]int{FOwner, FOp, FFp, FNonce, FLeaseUntil, FReason}

// MetaSep separates the parts of MetaField.
const MetaSep = ':'

// RawLen is how many bytes the record keeps of a field of a raw kind
// (KindOwner, KindFingerprint, KindNonce), the bytes its hex encodes; 0
// for any other kind.
func RawLen(k Kind) int {
	switch k {
	case KindOwner, KindFingerprint:
		return 32
	case KindNonce:
		return 16
	}
	return 0
}

// ParseMeta checks a MetaField value and splits it: the values of
// MetaParts, at their indexes of Fields (the others empty), with
// uncertain "0" given as empty (not uncertain) like an absent field. bad
// names the first part that breaks its rule, or is MetaField when the
// value does not have NumMeta parts.
func ParseMeta(m string) (vals [NumFields]string, bad string) {
	for n, i := range MetaParts {
		part, rest, more := strings.Cut(m, string(MetaSep))
		if more == (n == NumMeta-1) {
			return vals, MetaField
		}
		m = rest
		rule := &Fields[i]
		switch {
		case i == FSum && part == "":
		case i == FEffectUnknown && part == "0":
		case !rule.Kind.Valid(part):
			return vals, rule.Name
		default:
			vals[i] = part
		}
	}
	return vals, ""
}

// FormatMeta packs the MetaParts of vals (indexed like Fields; an empty
// uncertain is "0", an empty sum stays empty) into a MetaField value.
func FormatMeta(vals [NumFields]string) string {
	var b strings.Builder
	for n, i := range MetaParts {
		if n > 0 {
			b.WriteByte(MetaSep)
		}
		v := vals[i]
		if i == FEffectUnknown && v == "" {
			v = "0"
		}
		b.WriteString(v)
	}
	return b.String()
}

// Kind is what a field's value must look like.
type Kind string

// The kinds.
const (
	KindState       Kind = "state"       // one of the six states (onceflow.State.Valid)
	KindOwner       Kind = "owner"       // onceflow.Owner's 32 bytes, raw (the 64 hex characters it is)
	KindFingerprint Kind = "fingerprint" // onceflow.Fingerprint's 32 bytes, raw
	KindNonce       Kind = "nonce"       // onceflow.Nonce's 16 bytes, raw
	KindChecksum    Kind = "checksum"    // 8 lowercase hex characters, the CRC-32C of resp (ParseChecksum)
	KindCount       Kind = "count"       // a decimal integer from 1, at most MaxIntegerDigits digits
	KindMillis      Kind = "millis"      // a decimal integer from 0, at most MaxIntegerDigits digits
	KindOperation   Kind = "operation"   // onceflow.OperationID: 1 to onceflow.MaxOperationIDLen bytes, no NUL
	KindCodec       Kind = "codec"       // driver.ValidCodec
	KindFlag        Kind = "flag"        // "0" or "1"
	KindText        Kind = "text"        // a onceflow.ValidateReason reason of at least 1 byte: 1 to onceflow.MaxReasonLen bytes, no NUL
)

// MaxIntegerDigits bounds an integer field: 15 decimal digits, so every
// value is exact in a Lua number (a double, exact to 2^53).
const MaxIntegerDigits = 15

// A response of up to MaxChunks × ChunkSize bytes is stored in chunks of
// ChunkSize bytes, in the fields resp, resp2, resp3, …: Redis keeps a hash
// whose every value is at most 64 bytes (hash-max-listpack-value) as one
// compact listpack, and one longer value turns it into a hash table that
// costs twice the memory and a cache miss per field. A longer response is
// stored whole in resp.
const (
	ChunkSize = 64
	MaxChunks = 32
)

// ChunkField names chunk i (1-based) of a response.
func ChunkField(i int) string {
	if i == 1 {
		return "resp"
	}
	return "resp" + strconv.Itoa(i)
}

// Valid reports whether v, as the record keeps it, satisfies the kind.
func (k Kind) Valid(v string) bool {
	switch k {
	case KindState:
		return onceflow.State(v).Valid()
	case KindOwner, KindFingerprint, KindNonce:
		return len(v) == RawLen(k)
	case KindChecksum:
		_, ok := ParseChecksum(v)
		return ok
	case KindCount:
		n, ok := ParseInteger(v)
		return ok && n >= 1
	case KindMillis:
		_, ok := ParseInteger(v)
		return ok
	case KindOperation:
		return onceflow.OperationID(v).Validate() == nil
	case KindCodec:
		return driver.ValidCodec(v)
	case KindFlag:
		return v == "0" || v == "1"
	case KindText:
		return len(v) >= 1 && onceflow.ValidateReason(v) == nil
	}
	return false
}

// ParseInteger parses a canonical decimal integer: digits only, no sign, no
// leading zero, at most MaxIntegerDigits digits.
func ParseInteger(s string) (int64, bool) {
	if len(s) == 0 || len(s) > MaxIntegerDigits || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int64(b-'0')
	}
	return n, true
}

// ParseChecksum reads a stored checksum: 8 lowercase hex characters.
func ParseChecksum(s string) (uint32, bool) {
	if len(s) != 8 {
		return 0, false
	}
	var v uint32
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b >= '0' && b <= '9':
			v = v<<4 | uint32(b-'0')
		case b >= 'a' && b <= 'f':
			v = v<<4 | uint32(b-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// ReplyCode is the first element of every script reply. The hand-written
// scripts name them R.<NAME>, which the generator turns into these numbers.
type ReplyCode int64

// The reply codes.
const (
	Acquired ReplyCode = iota + 1
	TakenOver
	ReplayedAcquire
	CompletedReplay
	InProgress
	FingerprintMismatch
	AwaitingDecision
	OwnerOperationConflict
	CodecMismatch
	Transitioned
	Already
	NotFound
	NotOwner
	OpConflict
	StaleRev
	WrongState
	NonceMismatch
	StaleAttempt
	Renewed
	Released
	Found
	Resolved
	Corrupt
	OperationFailed
	Late
)

// Replies names every reply code as the scripts do.
var Replies = []struct {
	Code ReplyCode
	Name string
}{
	{Acquired, "ACQUIRED"}, {TakenOver, "TAKEN_OVER"}, {ReplayedAcquire, "REPLAYED_ACQUIRE"},
	{CompletedReplay, "COMPLETED_REPLAY"}, {InProgress, "IN_PROGRESS"},
	{FingerprintMismatch, "FINGERPRINT_MISMATCH"}, {AwaitingDecision, "AWAITING_DECISION"},
	{OwnerOperationConflict, "OWNER_OPERATION_CONFLICT"}, {CodecMismatch, "CODEC_MISMATCH"},
	{Transitioned, "TRANSITIONED"}, {Already, "ALREADY"}, {NotFound, "NOT_FOUND"},
	{NotOwner, "NOT_OWNER"}, {OpConflict, "OP_CONFLICT"}, {StaleRev, "STALE_REV"},
	{WrongState, "WRONG_STATE"}, {NonceMismatch, "NONCE_MISMATCH"}, {StaleAttempt, "STALE_ATTEMPT"},
	{Renewed, "RENEWED"}, {Released, "RELEASED"}, {Found, "FOUND"}, {Resolved, "RESOLVED"},
	{Corrupt, "CORRUPT"}, {OperationFailed, "OPERATION_FAILED"}, {Late, "LATE"},
}

func (c ReplyCode) String() string {
	for _, r := range Replies {
		if r.Code == c {
			return r.Name
		}
	}
	return fmt.Sprintf("reply code %d", int64(c))
}
