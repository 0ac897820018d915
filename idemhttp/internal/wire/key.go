package wire

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLen is the longest idempotency key accepted, in bytes.
const MaxKeyLen = 255

// ErrInvalidKey is what ParseKey's errors match.
var ErrInvalidKey = errors.New("idemhttp: invalid Idempotency-Key")

// ParseKey reads the value of an Idempotency-Key header
// (draft-ietf-httpapi-idempotency-key-header): an RFC 8941 sf-string,
// such as "8e03978e-40d5-43e8-bc93-6894a57f9324" in double quotes with \"
// and \\ escapes, or, as many clients send it, the bare key without
// quotes, of the characters of an RFC 8941 token (letters, digits and
// !#$%&'*+-.^_`|~:/), so that nothing in it reads as a structured
// field's separator: a comma would make it a list, a semicolon a
// parameter. The key is 1 to MaxKeyLen printable ASCII characters.
// Surrounding spaces and tabs are ignored; anything else around the key
// (parameters, a second item) is refused.
func ParseKey(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return "", fmt.Errorf("%w: it is empty", ErrInvalidKey)
	}
	var key string
	if v[0] == '"' {
		var b strings.Builder
		i := 1
		for ; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '\\':
				i++
				if i == len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", fmt.Errorf(`%w: in a quoted key a backslash escapes only " and \`, ErrInvalidKey)
				}
				b.WriteByte(v[i])
				continue
			case c == '"':
			case c < 0x20 || c > 0x7e:
				return "", fmt.Errorf("%w: it must be printable ASCII", ErrInvalidKey)
			default:
				b.WriteByte(c)
				continue
			}
			break
		}
		if i >= len(v) {
			return "", fmt.Errorf("%w: the closing quote is missing", ErrInvalidKey)
		}
		if i != len(v)-1 {
			return "", fmt.Errorf("%w: nothing may follow the quoted key", ErrInvalidKey)
		}
		key = b.String()
	} else {
		for i := 0; i < len(v); i++ {
			if !bareKeyChar(v[i]) {
				return "", fmt.Errorf(`%w: an unquoted key holds only letters, digits and !#$%%&'*+-.^_|~:/ (no %q); quote it as an sf-string ("…") otherwise`, ErrInvalidKey, v[i])
			}
		}
		key = v
	}
	if key == "" || len(key) > MaxKeyLen {
		return "", fmt.Errorf("%w: it must be 1 to %d characters, got %d", ErrInvalidKey, MaxKeyLen, len(key))
	}
	return key, nil
}

// bareKeyChar says whether c may stand in an unquoted key: an RFC 8941
// sf-token's characters (tchar, ":" and "/").
func bareKeyChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}
