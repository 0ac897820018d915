package redisstore

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/idemstore"
)

// The record's fields and the rules every reader checks. This list is the
// only one: the Lua scripts get it rendered as code (luaSchema, prepended
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
	kindState     fieldKind = "state"     // one of the six states
	kindHex64     fieldKind = "hex64"     // 64 lowercase hex characters
	kindHex32     fieldKind = "hex32"     // 32 lowercase hex characters
	kindChecksum  fieldKind = "hex8"      // 8 lowercase hex characters (CRC-32C of resp)
	kindCount     fieldKind = "count"     // a decimal integer from 1 to maxInteger
	kindMillis    fieldKind = "millis"    // a decimal integer from 0 to maxInteger
	kindOperation fieldKind = "operation" // 1 to idemstore.MaxOperationIDLen bytes, no NUL
	kindCodec     fieldKind = "codec"     // 1 to 32 characters of [a-z0-9.-]
	kindFlag      fieldKind = "flag"      // "0" or "1"
	kindText      fieldKind = "text"      // 1 to maxReasonLen bytes, no NUL
)

// maxInteger is the largest integer a field may hold: 15 decimal digits,
// so every value is exact in a Lua number (a double, exact to 2^53).
const (
	maxIntegerDigits = 15
	maxReasonLen     = 4096
)

// A response of up to maxChunks × chunkSize bytes is stored in chunks of
// chunkSize bytes, in the fields resp, resp2, resp3, …: Redis keeps a hash
// whose every value is at most 64 bytes (hash-max-listpack-value) as one
// compact listpack, and one longer value turns it into a hash table that
// costs twice the memory and a cache miss per field. A longer response is
// stored whole in resp.
const (
	chunkSize = 64
	maxChunks = 32
)

// chunkField names chunk i (1-based) of a response.
func chunkField(i int) string {
	if i == 1 {
		return "resp"
	}
	return "resp" + strconv.Itoa(i)
}

// restChunksCall is the Lua call that reads chunks from to maxChunks.
func restChunksCall(key string, from int) string {
	var b strings.Builder
	b.WriteString("redis.call('HMGET', " + key)
	for i := from; i <= maxChunks; i++ {
		b.WriteString(", '" + chunkField(i) + "'")
	}
	b.WriteString(")")
	return b.String()
}

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
		case "CLAIMED", "EXECUTING", "COMPLETED", "FAILED_RETRYABLE", "ABANDONED", "FAILED":
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
		return len(v) >= 1 && len(v) <= idemstore.MaxOperationIDLen && !strings.Contains(v, "\x00")
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
		return len(v) >= 1 && len(v) <= maxReasonLen && !strings.Contains(v, "\x00")
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
// them R.<NAME>, which inlineReplyCodes turns into these numbers.
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
	codeOperationFailed
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
	{codeCorrupt, "CORRUPT"}, {codeOperationFailed, "OPERATION_FAILED"},
}

func (c replyCode) String() string {
	for _, r := range replyNames {
		if r.code == c {
			return r.name
		}
	}
	return fmt.Sprintf("reply code %d", int64(c))
}

// luaSchema renders fieldRules as Lua for record.lua: load, which reads a
// record with one HMGET and checks every field and the cross-field rules in
// straight-line code, and pack, which joins the fields with NUL bytes (no
// field may hold one). Straight-line code, not a loop over tables: Redis
// runs a script's top level on every call, and building tables and
// closures there costs more than the checks themselves.
func luaSchema() string {
	var b strings.Builder
	b.WriteString("-- Generated from fieldRules in schema.go: the one list of field rules.\n")
	b.WriteString("-- (find is string.find, the first line of every script.)\n\n")
	fmt.Fprintf(&b, `-- join_chunks joins a response stored in chunks: the first two, and the
-- rest as HMGET read them (up to the first missing one).
local function join_chunks(first, second, rest)
  local out = {first, second}
  for i = 1, #rest do
    if not rest[i] then break end
    out[#out + 1] = rest[i]
  end
  return table.concat(out)
end

-- write_resp stores a response: in chunks of %[1]d bytes when it fits in
-- %[2]d of them, so the hash stays a compact listpack; whole otherwise.
local function write_resp(key, resp)
  local n = #resp
  if n <= %[1]d or n > %[1]d * %[2]d then
    redis.call('HSET', key, 'resp', resp)
    return
  end
  local args, i = {'resp', string.sub(resp, 1, %[1]d)}, 2
  for at = %[1]d + 1, n, %[1]d do
    args[#args + 1] = 'resp' .. i
    args[#args + 1] = string.sub(resp, at, at + %[1]d - 1)
    i = i + 1
  end
  redis.call('HSET', key, unpack(args))
end

`, chunkSize, maxChunks)
	b.WriteString("-- load reads the whole record and checks every field against the schema\n")
	b.WriteString("-- and the cross-field rules, before the caller decides or writes anything.\n")
	b.WriteString("-- It returns the record (field -> string, false when absent) and its\n")
	b.WriteString("-- response (false unless COMPLETED); nil when there is none; or nil, nil\n")
	b.WriteString("-- and the name of the first field that breaks a rule. The caller may pass\n")
	b.WriteString("-- the values of its own request (already valid): a field equal to one is\n")
	b.WriteString("-- valid without its pattern being matched.\n")
	b.WriteString("local function load(key, " + strings.Join(expectParams, ", ") + ")\n  local v = redis.call('HMGET', key, 'resp', 'resp2'")
	for _, f := range fieldRules {
		fmt.Fprintf(&b, ", '%s'", f.name)
	}
	b.WriteString(")\n  if not (v[1] or v[2]")
	for i := range fieldRules {
		fmt.Fprintf(&b, " or v[%d]", i+3)
	}
	b.WriteString(") then\n    if redis.call('EXISTS', key) == 1 then return nil, nil, 'state' end\n    return nil, nil, nil\n  end\n  local x\n")
	for i, f := range fieldRules {
		fmt.Fprintf(&b, "  x = v[%d]\n", i+3)
		invalid := f.kind.luaInvalid("x")
		if slices.Contains(expectParams, f.name) {
			invalid = fmt.Sprintf("x ~= %s and (%s)", f.name, invalid)
		}
		if f.required {
			fmt.Fprintf(&b, "  if not x or %s then return nil, nil, '%s' end\n", invalid, f.name)
		} else {
			fmt.Fprintf(&b, "  if x and (%s) then return nil, nil, '%s' end\n", invalid, f.name)
		}
	}
	b.WriteString("  local r = {")
	for i, f := range fieldRules {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = v[%d]", f.name, i+3)
	}
	b.WriteString(`}
  local resp = v[1]
  if v[2] then
    if not resp then return nil, nil, 'resp' end
    resp = join_chunks(resp, v[2], ` + restChunksCall("key", 3) + `)
  end
  if (r.state == 'CLAIMED' or r.state == 'EXECUTING') and not r.leaseUntil then return nil, nil, 'leaseUntil' end
  if r.state == 'EXECUTING' and not r.nonce then return nil, nil, 'nonce' end
  if r.state == 'COMPLETED' then
    if not r.sum then return nil, nil, 'sum' end
    if not resp then return nil, nil, 'resp' end
  elseif resp then
    return nil, nil, 'resp' -- only a COMPLETED record holds a response
  end
  return r, resp, nil
end

-- pack joins the record's fields, in schema order, with NUL bytes; an
-- absent field is empty (no present field is).
local function pack(r)
  return `)
	for i, f := range fieldRules {
		if i > 0 {
			b.WriteString(" .. '\\0' .. ")
		}
		fmt.Fprintf(&b, "(r.%s or '')", f.name)
	}
	b.WriteString("\nend\n\n")
	b.WriteString("-- valid reports whether x is a valid value of field f (false when absent).\n")
	b.WriteString("local function valid(f, x)\n  if not x then return false end\n")
	for _, f := range fieldRules {
		fmt.Fprintf(&b, "  if f == '%s' then return not (%s) end\n", f.name, f.kind.luaInvalid("x"))
	}
	b.WriteString("  return false\nend\n")
	return b.String()
}

// luaInvalid is the Lua expression, over the variable x (a string), that is
// true when x is not a valid value of the kind. It is valid's twin.
func (k fieldKind) luaInvalid(x string) string {
	hexN := func(n int) string { return fmt.Sprintf("#%s ~= %d or find(%s, '[^0-9a-f]')", x, n, x) }
	switch k {
	case kindState:
		return fmt.Sprintf("not (%[1]s == 'CLAIMED' or %[1]s == 'EXECUTING' or %[1]s == 'COMPLETED' or %[1]s == 'FAILED_RETRYABLE' or %[1]s == 'ABANDONED' or %[1]s == 'FAILED')", x)
	case kindHex64:
		return hexN(64)
	case kindHex32:
		return hexN(32)
	case kindChecksum:
		return hexN(8)
	case kindCount:
		return fmt.Sprintf("#%[1]s > %[2]d or not find(%[1]s, '^[1-9]%%d*$')", x, maxIntegerDigits)
	case kindMillis:
		return fmt.Sprintf("#%[1]s > %[2]d or not (%[1]s == '0' or find(%[1]s, '^[1-9]%%d*$'))", x, maxIntegerDigits)
	case kindOperation:
		return fmt.Sprintf("#%[1]s < 1 or #%[1]s > %[2]d or find(%[1]s, '\\0', 1, true)", x, idemstore.MaxOperationIDLen)
	case kindCodec:
		return fmt.Sprintf("#%[1]s < 1 or #%[1]s > 32 or find(%[1]s, '[^a-z0-9.%%-]')", x)
	case kindFlag:
		return fmt.Sprintf("%[1]s ~= '0' and %[1]s ~= '1'", x)
	case kindText:
		return fmt.Sprintf("#%[1]s < 1 or #%[1]s > %[2]d or find(%[1]s, '\\0', 1, true)", x, maxReasonLen)
	}
	panic("redisstore: no Lua check for field kind " + string(k))
}

// expectParams are the fields load may be given the caller's own values of.
var expectParams = []string{"owner", "op", "fp", "nonce", "codec", "policy"}

// The macros a script may use where the generated functions are not
// defined yet (before its "--@prelude" line): @invalid(field, expr) is the
// Lua expression that is true when expr is not a valid value of field,
// @pack(field = expr, ...) packs the named fields (the others empty) as
// pack does, and @restchunks(key, n) reads a response's chunks from the
// n-th on.
var (
	invalidMacro = regexp.MustCompile(`@invalid\(([a-zA-Z]+), ([^)]+)\)`)
	packMacro    = regexp.MustCompile(`@pack\(([^)]*)\)`)
	chunksMacro  = regexp.MustCompile(`@restchunks\(([a-z]+), ([0-9]+)\)`)
)

// expandMacros expands @invalid and @pack. An unknown field panics: the
// scripts are embedded, so the tests catch it.
func expandMacros(src string) string {
	rule := func(name string) fieldRule {
		for _, r := range fieldRules {
			if r.name == name {
				return r
			}
		}
		panic("redisstore: a script macro names an unknown field " + name)
	}
	src = chunksMacro.ReplaceAllStringFunc(src, func(m string) string {
		g := chunksMacro.FindStringSubmatch(m)
		from, _ := strconv.Atoi(g[2])
		return restChunksCall(g[1], from)
	})
	src = invalidMacro.ReplaceAllStringFunc(src, func(m string) string {
		g := invalidMacro.FindStringSubmatch(m)
		return "(" + rule(g[1]).kind.luaInvalid(strings.TrimSpace(g[2])) + ")"
	})
	return packMacro.ReplaceAllStringFunc(src, func(m string) string {
		given := map[string]string{}
		for _, kv := range strings.Split(packMacro.FindStringSubmatch(m)[1], ",") {
			k, v, _ := strings.Cut(kv, "=")
			given[rule(strings.TrimSpace(k)).name] = strings.TrimSpace(v)
		}
		parts := make([]string, len(fieldRules))
		for i, r := range fieldRules {
			parts[i] = "''"
			if v, ok := given[r.name]; ok {
				parts[i] = "(" + v + " or '')"
			}
		}
		return strings.Join(parts, " .. '\\0' .. ")
	})
}

// replyRef is how a script names a reply code: R.NAME.
var replyRef = regexp.MustCompile(`\bR\.([A-Z_]+)\b`)

// inlineReplyCodes replaces every R.NAME in a script with its number, so no
// table of codes is built on every call. An unknown name panics: the
// scripts are embedded, so the tests catch it.
func inlineReplyCodes(src string) string {
	return replyRef.ReplaceAllStringFunc(src, func(m string) string {
		name := m[len("R."):]
		for _, r := range replyNames {
			if r.name == name {
				return strconv.FormatInt(int64(r.code), 10)
			}
		}
		panic("redisstore: script names an unknown reply R." + name)
	})
}
