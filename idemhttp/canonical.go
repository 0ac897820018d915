package idemhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// maxDepth bounds the nesting CanonicalJSON follows.
const maxDepth = 1000

// CanonicalJSON returns a canonical form of a JSON document, so that two
// documents that mean the same have the same bytes: object members sorted
// by key (members with the same key keep their order), no insignificant
// whitespace, strings re-escaped one way, and numbers in one form (1, 1.0,
// 10e-1 and 0.1e1 are all 1e0; -0 is 0), exact whatever their size. It
// fails on anything that is not one JSON value.
func CanonicalJSON(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var out bytes.Buffer
	if err := canonicalValue(dec, &out, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("idemhttp: trailing data after the JSON value")
	}
	return out.Bytes(), nil
}

type member struct {
	key   string
	value []byte
}

func canonicalValue(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	if depth > maxDepth {
		return errors.New("idemhttp: JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var members []member
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key, ok := k.(string)
				if !ok {
					return errors.New("idemhttp: object key is not a string")
				}
				var v bytes.Buffer
				if err := canonicalValue(dec, &v, depth+1); err != nil {
					return err
				}
				members = append(members, member{key, v.Bytes()})
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			sort.SliceStable(members, func(i, j int) bool { return members[i].key < members[j].key })
			out.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					out.WriteByte(',')
				}
				writeString(out, m.key)
				out.WriteByte(':')
				out.Write(m.value)
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := canonicalValue(dec, out, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			out.WriteByte(']')
		default:
			return fmt.Errorf("idemhttp: unexpected %v", t)
		}
	case string:
		writeString(out, t)
	case json.Number:
		n, err := canonicalNumber(string(t))
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

func writeString(out *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	out.Write(b)
}

// canonicalNumber writes a JSON number literal exactly as
// [-]D[.DDD]e<exponent> with no leading or trailing zeros in the digits:
// "0" for zero.
func canonicalNumber(lit string) (string, error) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, expPart, _ := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	exp := 0
	if expPart != "" {
		e := strings.TrimPrefix(expPart, "+")
		if len(strings.TrimLeft(strings.TrimPrefix(e, "-"), "0")) > 9 {
			return "", errors.New("idemhttp: JSON number exponent out of range")
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
