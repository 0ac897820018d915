package wire_test

// The decoder-based CanonicalJSON that the one-pass scanner replaced, kept
// as the oracle FuzzCanonicalJSON compares the scanner with: the same
// documents accepted, the same canonical forms, the same refusals. It
// copied every nested value once per level of nesting (depth × size), which
// is why it was replaced.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/onceflow/onceflow/idemhttp/internal/wire"
)

func refCanonicalJSON(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	c := refCanonicaliser{doc: doc, dec: dec}
	var out bytes.Buffer
	if err := c.value(&out, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("idemhttp: trailing data after the JSON value")
	}
	return out.Bytes(), nil
}

type refMember struct {
	key   string
	value []byte
}

type refCanonicaliser struct {
	doc []byte
	dec *json.Decoder
}

// token reads the next token; a string's literal, as it is in the
// document, is checked for invalid UTF-8 and unpaired surrogates, which
// the decoder would have replaced with U+FFFD.
func (c *refCanonicaliser) token() (json.Token, error) {
	start := c.dec.InputOffset()
	tok, err := c.dec.Token()
	if err != nil {
		return nil, err
	}
	if _, ok := tok.(string); ok {
		lit := c.doc[start:c.dec.InputOffset()] // separators and spaces, then the literal
		q := bytes.IndexByte(lit, '"')
		if err := refCheckStringLiteral(lit[q:], int(start)+q); err != nil {
			return nil, err
		}
	}
	return tok, nil
}

func (c *refCanonicaliser) value(out *bytes.Buffer, depth int) error {
	tok, err := c.token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= wire.MaxJSONDepth {
			return fmt.Errorf("%w: the JSON is nested deeper than %d levels", wire.ErrBodyRefused, wire.MaxJSONDepth)
		}
		switch t {
		case '{':
			var members []refMember
			seen := map[string]string{} // folded name → the name as sent
			for c.dec.More() {
				k, err := c.token()
				if err != nil {
					return err
				}
				key, ok := k.(string)
				if !ok {
					return errors.New("idemhttp: object key is not a string")
				}
				folded := refFoldName(key)
				if prev, dup := seen[folded]; dup {
					if prev == key {
						return fmt.Errorf("%w: the member name %q appears twice in one object; send each member once", wire.ErrBodyRefused, key)
					}
					return fmt.Errorf("%w: the member names %q and %q differ only in case, and are read as one; send each member once", wire.ErrBodyRefused, prev, key)
				}
				seen[folded] = key
				var v bytes.Buffer
				if err := c.value(&v, depth+1); err != nil {
					return err
				}
				members = append(members, refMember{key, v.Bytes()})
			}
			if _, err := c.dec.Token(); err != nil {
				return err
			}
			sort.Slice(members, func(i, j int) bool { return members[i].key < members[j].key })
			out.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					out.WriteByte(',')
				}
				refWriteString(out, m.key)
				out.WriteByte(':')
				out.Write(m.value)
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			for i := 0; c.dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := c.value(out, depth+1); err != nil {
					return err
				}
			}
			if _, err := c.dec.Token(); err != nil {
				return err
			}
			out.WriteByte(']')
		default:
			return fmt.Errorf("idemhttp: unexpected %v", t)
		}
	case string:
		refWriteString(out, t)
	case json.Number:
		n, err := refCanonicalNumber(string(t))
		if err != nil {
			return err
		}
		out.WriteString(n)
	case bool:
		out.WriteString(strconv.FormatBool(t))
	case nil:
		out.WriteString("null")
	}
	return nil
}

// foldName folds a member name as encoding/json folds names to match
// them to struct fields (bytes.EqualFold: each rune to the smallest of its
// simple case folding orbit, so "K", "k" and the Kelvin sign are one):
// two names with the same fold are one field.
func refFoldName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b.WriteRune(r)
	}
	return b.String()
}

// checkStringLiteral refuses a JSON string literal (quotes included, at
// offset off of the document) that holds invalid UTF-8 or a \u escape of
// an unpaired surrogate. The literal is otherwise well formed: the
// decoder has read it.
func refCheckStringLiteral(lit []byte, off int) error {
	if !utf8.Valid(lit) {
		for i := 0; i < len(lit); {
			r, n := utf8.DecodeRune(lit[i:])
			if r == utf8.RuneError && n == 1 {
				return fmt.Errorf("%w: the body is not valid UTF-8 (byte %d)", wire.ErrBodyRefused, off+i)
			}
			i += n
		}
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if lit[i] != 'u' {
			continue
		}
		r := refHex4(lit[i+1 : i+5])
		switch {
		case r >= 0xd800 && r < 0xdc00: // high: a low must follow
			if i+10 < len(lit) && lit[i+5] == '\\' && lit[i+6] == 'u' {
				if lo := refHex4(lit[i+7 : i+11]); lo >= 0xdc00 && lo < 0xe000 {
					i += 10
					continue
				}
			}
			fallthrough
		case r >= 0xdc00 && r < 0xe000:
			return fmt.Errorf("%w: a string holds an unpaired UTF-16 surrogate escape \\u%04x (byte %d), which is no character", wire.ErrBodyRefused, r, off+i-1)
		}
		i += 4
	}
	return nil
}

// hex4 reads four hex digits (the decoder checked them).
func refHex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

func refWriteString(out *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	out.Write(b)
}

// refCanonicalNumber writes a JSON number literal exactly as
// [-]D[.DDD]e<exponent> with no leading or trailing zeros in the digits:
// "0" for zero.
func refCanonicalNumber(lit string) (string, error) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, expPart, _ := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	exp := 0
	if expPart != "" {
		e := strings.TrimPrefix(expPart, "+")
		if len(strings.TrimLeft(strings.TrimPrefix(e, "-"), "0")) > 9 {
			return "", fmt.Errorf("%w: a number's exponent has more than %d digits", wire.ErrBodyRefused, 9)
		}
		var err error
		if exp, err = strconv.Atoi(e); err != nil {
			return "", fmt.Errorf("idemhttp: JSON number %q: %w", lit, err)
		}
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	// d.ddd × 10^(exp + len-1)
	exp += len(trimmed) - 1
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteByte(trimmed[0])
	if len(trimmed) > 1 {
		b.WriteByte('.')
		b.WriteString(trimmed[1:])
	}
	b.WriteString("e")
	b.WriteString(strconv.Itoa(exp))
	return b.String(), nil
}
