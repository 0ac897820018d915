package redisstore

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/idemstore"
)

// The record's fields and the rules every reader checks. This list is the
// only one: the Lua scripts get it rendered as tables (luaSchema, prepended
// to every script) and validate a record with it before they decide
// anything, and decode.go validates replies with it. A record that breaks a
// rule is refused by both sides, never changed.
//
// Cross-field rules, checked the same way on both sides (record.lua's
// load and decodeRecord): a CLAIMED or EXECUTING record has a leaseUntil;
// an EXECUTING record has a nonce; a COMPLETED record has a resp and its
// sum.
var fieldRules = []fieldRule{
	{"state", kindState, true},
	{"owner", kindHex64, true},
	{"attempt", kindCount, true},
	{"rev", kindCount, true},
	{"op", kindOperation, true},
	{"fp", kindHex64, true},
	{"codec", kindCodec, true},
	{"policy", kindCount, true},
	{"leaseUntil", kindMillis, false},
	{"nonce", kindHex32, false},
	{"uncertain", kindFlag, false},
	{"reason", kindText, false},
	{"createdAt", kindMillis, true},
	{"updatedAt", kindMillis, true},
	{"sum", kindChecksum, false},
}

// The indexes of fieldRules, for the decoder.
const (
	fState = iota
	fOwner
	fAttempt
	fRev
	fOp
	fFp
	fCodec
	fPolicy
	fLeaseUntil
	fNonce
	fUncertain
	fReason
	fCreatedAt
	fUpdatedAt
	fSum
	numFields
)

// fieldKind is what a field's value must look like.
type fieldKind string

const (
	kindState     fieldKind = "state"     // one of the five states
	kindHex64     fieldKind = "hex64"     // 64 lowercase hex characters
	kindHex32     fieldKind = "hex32"     // 32 lowercase hex characters
	kindChecksum  fieldKind = "hex8"      // 8 lowercase hex characters (CRC-32C of resp)
	kindCount     fieldKind = "count"     // a decimal integer from 1 to maxInteger
	kindMillis    fieldKind = "millis"    // a decimal integer from 0 to maxInteger
	kindOperation fieldKind = "operation" // 1 to idemstore.MaxOperationIDLen bytes
	kindCodec     fieldKind = "codec"     // 1 to 32 characters of [a-z0-9.-]
	kindFlag      fieldKind = "flag"      // "0" or "1"
	kindText      fieldKind = "text"      // at most maxReasonLen bytes
)

// maxInteger is the largest integer a field may hold: 15 decimal digits,
// so every value is exact in a Lua number (a double, exact to 2^53).
const (
	maxIntegerDigits = 15
	maxReasonLen     = 4096
)

type fieldRule struct {
	name     string
	kind     fieldKind
	required bool
}

// valid reports whether v satisfies the rule's kind.
func (k fieldKind) valid(v string) bool {
	switch k {
	case kindState:
		switch v {
		case "CLAIMED", "EXECUTING", "COMPLETED", "FAILED_RETRYABLE", "ABANDONED":
			return true
		}
		return false
	case kindHex64:
		return isLowerHex(v, 64)
	case kindHex32:
		return isLowerHex(v, 32)
	case kindChecksum:
		return isLowerHex(v, 8)
	case kindCount:
		n, ok := parseInteger(v)
		return ok && n >= 1
	case kindMillis:
		_, ok := parseInteger(v)
		return ok
	case kindOperation:
		return len(v) >= 1 && len(v) <= idemstore.MaxOperationIDLen
	case kindCodec:
		if len(v) < 1 || len(v) > 32 {
			return false
		}
		for i := 0; i < len(v); i++ {
			b := v[i]
			if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '.') {
				return false
			}
		}
		return true
	case kindFlag:
		return v == "0" || v == "1"
	case kindText:
		return len(v) <= maxReasonLen
	}
	return false
}

// parseInteger parses a canonical decimal integer: digits only, no sign, no
// leading zero, at most maxIntegerDigits digits.
func parseInteger(s string) (int64, bool) {
	if len(s) == 0 || len(s) > maxIntegerDigits || len(s) > 1 && s[0] == '0' {
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

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
			return false
		}
	}
	return true
}

// replyCode is the first element of every script reply. The scripts name
// them R.<NAME>; luaSchema renders this list for them.
type replyCode int64

const (
	codeAcquired replyCode = iota + 1
	codeTakenOver
	codeReplayedAcquire
	codeCompletedReplay
	codeInProgress
	codeFingerprintMismatch
	codeRecoveryRequired
	codeOwnerOperationConflict
	codeCodecMismatch
	codeTransitioned
	codeAlready
	codeNotFound
	codeNotOwner
	codeOpConflict
	codeStaleRev
	codeWrongState
	codeNonceMismatch
	codeStaleAttempt
	codeRenewed
	codeReleased
	codeFound
	codeResolved
	codeCorrupt
)

var replyNames = []struct {
	code replyCode
	name string
}{
	{codeAcquired, "ACQUIRED"}, {codeTakenOver, "TAKEN_OVER"}, {codeReplayedAcquire, "REPLAYED_ACQUIRE"},
	{codeCompletedReplay, "COMPLETED_REPLAY"}, {codeInProgress, "IN_PROGRESS"},
	{codeFingerprintMismatch, "FINGERPRINT_MISMATCH"}, {codeRecoveryRequired, "RECOVERY_REQUIRED"},
	{codeOwnerOperationConflict, "OWNER_OPERATION_CONFLICT"}, {codeCodecMismatch, "CODEC_MISMATCH"},
	{codeTransitioned, "TRANSITIONED"}, {codeAlready, "ALREADY"}, {codeNotFound, "NOT_FOUND"},
	{codeNotOwner, "NOT_OWNER"}, {codeOpConflict, "OP_CONFLICT"}, {codeStaleRev, "STALE_REV"},
	{codeWrongState, "WRONG_STATE"}, {codeNonceMismatch, "NONCE_MISMATCH"}, {codeStaleAttempt, "STALE_ATTEMPT"},
	{codeRenewed, "RENEWED"}, {codeReleased, "RELEASED"}, {codeFound, "FOUND"}, {codeResolved, "RESOLVED"},
	{codeCorrupt, "CORRUPT"},
}

func (c replyCode) String() string {
	for _, r := range replyNames {
		if r.code == c {
			return r.name
		}
	}
	return fmt.Sprintf("reply code %d", int64(c))
}

// luaSchema renders fieldRules and the reply codes as the Lua tables
// record.lua reads: FIELDS (the names, in order), KIND (name → kind),
// REQUIRED, the limits, and R (reply name → code).
func luaSchema() string {
	var b strings.Builder
	b.WriteString("-- Generated from schema.go: the one list of field rules and reply codes.\n")
	b.WriteString("local FIELDS = {")
	for i, f := range fieldRules {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "'%s'", f.name)
	}
	b.WriteString("}\nlocal KIND = {")
	for i, f := range fieldRules {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = '%s'", f.name, f.kind)
	}
	b.WriteString("}\nlocal REQUIRED = {")
	first := true
	for _, f := range fieldRules {
		if !f.required {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s = true", f.name)
	}
	fmt.Fprintf(&b, "}\nlocal MAX_DIGITS, MAX_REASON, MAX_OP = %d, %d, %d\n", maxIntegerDigits, maxReasonLen, idemstore.MaxOperationIDLen)
	b.WriteString("local R = {")
	for i, r := range replyNames {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = %d", r.name, int64(r.code))
	}
	b.WriteString("}\n")
	return b.String()
}
