package onceflow

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// MaxOperationIDLen is the longest OperationID a store accepts, in bytes.
const MaxOperationIDLen = 1024

// Digest is the opaque, versioned identity of a record within its
// operation code (Ref.Digest): the HMAC-SHA256 of the raw scope (principal
// + method + route + key, or a Temporal-derived scope) under a configured
// secret. The raw scope never reaches the store.
type Digest struct {
	// Version is the digest (secret) version, a positive integer. Rotating
	// the secret means bumping the version, which changes every record key.
	Version int
	// Hex is the digest: exactly 64 lowercase hex characters.
	Hex string
}

// Validate reports whether d is a positive version and 64 lowercase hex
// characters.
func (d Digest) Validate() error {
	if d.Version <= 0 {
		return invalid("Digest.Version", "must be a positive integer, got %d", d.Version)
	}
	if !isLowerHex(d.Hex, 64) {
		return invalid("Digest.Hex", "must be 64 lowercase hex characters (HMAC-SHA256), got %q", truncate(d.Hex))
	}
	return nil
}

// String returns "d<version>:<hex>".
func (d Digest) String() string { return "d" + strconv.Itoa(d.Version) + ":" + d.Hex }

// Digester turns raw scopes into Digests and derives owner tokens. It
// holds the secret; it is safe for concurrent use.
type Digester struct {
	secret  []byte
	version int
}

// NewDigester returns a Digester for secret at the given version. The secret
// must not be empty: an unkeyed digest of a guessable key (an order number,
// a workflow ID) would let anyone who can read Redis recover it.
func NewDigester(secret []byte, version int) (*Digester, error) {
	if len(secret) == 0 {
		return nil, invalid("secret", "must not be empty; set a random secret of at least 32 bytes")
	}
	if version <= 0 {
		return nil, invalid("version", "must be a positive integer, got %d", version)
	}
	return &Digester{secret: append([]byte(nil), secret...), version: version}, nil
}

// Digest returns the digest of the scope made of parts. Parts are length
// prefixed, so ("ab", "c") and ("a", "bc") differ.
func (g *Digester) Digest(parts ...string) Digest {
	return Digest{Version: g.version, Hex: g.mac("scope", parts)}
}

// Operation returns the OperationID to store for a raw operation identity
// that may name a workflow, a customer or an order ("namespace/workflow
// ID/run ID/activity ID"): 32 lowercase hex characters, a keyed digest, so
// the raw identity never reaches the store. The same raw identity always
// gives the same OperationID under one secret.
func (g *Digester) Operation(raw string) OperationID {
	return OperationID(g.mac("operation", []string{raw})[:32])
}

// Owner derives the owner token of one retained attempt of an operation: the
// same operation and attempt always give the same owner, so a re-sent claim
// of that attempt is recognised as its own, and another attempt is another
// owner.
func (g *Digester) Owner(op OperationID, attempt int) Owner {
	return Owner(g.mac("owner", []string{string(op), strconv.Itoa(attempt)}))
}

func (g *Digester) mac(domain string, parts []string) string {
	m := hmac.New(sha256.New, g.secret)
	writePart(m, domain)
	for _, p := range parts {
		writePart(m, p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

func writePart(w interface{ Write([]byte) (int, error) }, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = w.Write(n[:])
	_, _ = w.Write([]byte(s))
}

// OperationCode is the short code of a use case, such as "charge-payment":
// 1 to 64 characters of [a-z0-9-]. It is part of the record key.
type OperationCode string

// ParseOperationCode validates s as an OperationCode.
func ParseOperationCode(s string) (OperationCode, error) {
	c := OperationCode(s)
	return c, c.Validate()
}

// Validate reports whether c is 1 to 64 characters of [a-z0-9-].
func (c OperationCode) Validate() error {
	if len(c) == 0 || len(c) > 64 {
		return invalid("OperationCode", "must be 1 to 64 characters of [a-z0-9-], got %d characters", len(c))
	}
	for i := 0; i < len(c); i++ {
		b := c[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
			return invalid("OperationCode", "must be 1 to 64 characters of [a-z0-9-], got %q", truncate(string(c)))
		}
	}
	return nil
}

// OperationID is the caller's identity of one logical operation: every retry
// of the operation uses the same OperationID; a claim by the same owner with
// another OperationID is an OWNER_OPERATION_CONFLICT. The store keeps it as
// given (the record's "op" field), so when the raw identity names a
// workflow, a customer or an order, pass Digester.Operation of it instead,
// as the Temporal binding does.
type OperationID string

// Validate reports whether id is 1 to MaxOperationIDLen bytes and holds no
// NUL byte. A store keeps the OperationID as given, and a NUL in a stored
// field breaks the record's schema (the Redis store separates a reply's
// fields with NUL), so such an ID is refused before anything is sent.
func (id OperationID) Validate() error {
	if len(id) == 0 || len(id) > MaxOperationIDLen {
		return invalid("OperationID", "must be 1 to %d bytes, got %d", MaxOperationIDLen, len(id))
	}
	if i := strings.IndexByte(string(id), 0); i >= 0 {
		return invalid("OperationID", "must not contain a NUL byte, found one at byte %d", i)
	}
	return nil
}

// Fingerprint is the SHA-256 of a request, 64 lowercase hex characters. A
// claim whose fingerprint differs from the stored one is refused before any
// mutation.
type Fingerprint string

// FingerprintOf returns the SHA-256 fingerprint of the given parts, each
// length prefixed.
func FingerprintOf(parts ...[]byte) Fingerprint {
	h := sha256.New()
	for _, p := range parts {
		writePart(h, string(p))
	}
	return Fingerprint(hex.EncodeToString(h.Sum(nil)))
}

// Validate reports whether f is 64 lowercase hex characters.
func (f Fingerprint) Validate() error {
	if !isLowerHex(string(f), 64) {
		return invalid("Fingerprint", "must be 64 lowercase hex characters (SHA-256), got %q", truncate(string(f)))
	}
	return nil
}

// Owner is the token of one claimant: 32 bytes as 64 lowercase hex
// characters. Only the owner may move the record on.
type Owner string

// NewOwner returns a random owner token.
func NewOwner() Owner { return Owner(randomHex(32)) }

// Validate reports whether o is 64 lowercase hex characters.
func (o Owner) Validate() error {
	if !isLowerHex(string(o), 64) {
		return invalid("Owner", "must be 64 lowercase hex characters (32 bytes), got %d characters", len(o))
	}
	return nil
}

// Nonce identifies one invocation of the executor. START records it, so that
// two invocations of the same owner (a duplicate delivery of one attempt)
// can tell which of them may run the action.
type Nonce string

// NewNonce returns a random invocation nonce.
func NewNonce() Nonce { return Nonce(randomHex(16)) }

// Validate reports whether n is 32 lowercase hex characters.
func (n Nonce) Validate() error {
	if !isLowerHex(string(n), 32) {
		return invalid("Nonce", "must be 32 lowercase hex characters, got %d characters", len(n))
	}
	return nil
}

// Ref names one record: the use case and the digested scope.
type Ref struct {
	Code   OperationCode
	Digest Digest
}

// Validate validates both parts.
func (r Ref) Validate() error {
	if err := r.Code.Validate(); err != nil {
		return err
	}
	return r.Digest.Validate()
}

// String returns "<code>:d<version>:<digest>", safe to log: it holds no
// raw key. ParseRef reads it back.
func (r Ref) String() string { return string(r.Code) + ":" + r.Digest.String() }

// ParseRef reads a Ref from its String form, "<code>:d<version>:<digest>"
// (the record key operators see in logs and in EffectUnknown details).
func ParseRef(s string) (Ref, error) {
	code, rest, ok1 := strings.Cut(s, ":")
	version, hexDigest, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || !strings.HasPrefix(version, "d") {
		return Ref{}, invalid("record key", "must be <code>:d<version>:<digest>, such as charge-payment:d1:9f86…, got %q", truncate(s))
	}
	v, err := strconv.Atoi(version[1:])
	if err != nil {
		return Ref{}, invalid("record key", "has digest version %q, not d<number>", version)
	}
	r := Ref{Code: OperationCode(code), Digest: Digest{Version: v, Hex: hexDigest}}
	return r, r.Validate()
}

// NewOwnerAndNonce returns a random owner and a random nonce, from one
// read of the system's randomness into one string.
func NewOwnerAndNonce() (Owner, Nonce) {
	var b [48]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("idemstore: crypto/rand: %v", err))
	}
	var h [96]byte
	hex.Encode(h[:], b[:])
	s := string(h[:])
	return Owner(s[:64]), Nonce(s[64:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand.Read never returns an error on supported platforms
		// (Go 1.24+ crashes the program instead).
		panic(fmt.Sprintf("idemstore: crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// isLowerHex reports whether s is n characters of 0-9 and a-f. It runs on
// every request (identities are checked by the executor and the store), so
// it checks eight bytes at a time, without a branch per byte (hex digits
// come in random order, and a branch on digit or letter mispredicts). For
// bytes below 0x80 (hi checks that), adding 0x80-lo to each sets its top
// bit exactly when it is at least lo, and adding 0x7f-hi exactly when it is
// above hi, with no carry into the next byte: a byte is in lo..hi when the
// first sets its top bit and the second does not.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	var bad uint64
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		digit := (x + (0x80-'0')*ones) &^ (x + (0x7f-'9')*ones)
		letter := (x + (0x80-'a')*ones) &^ (x + (0x7f-'f')*ones)
		bad |= x&tops | ^(digit|letter)&tops
	}
	for ; i < len(s); i++ {
		b := s[i]
		if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
			return false
		}
	}
	return bad == 0
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
