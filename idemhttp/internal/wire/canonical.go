package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONDepth is the deepest nesting of arrays and objects CanonicalJSON
// accepts: a document nested deeper is refused (ErrBodyRefused).
const MaxJSONDepth = 1000

// maxExponentDigits bounds the digits of a number's exponent.
const maxExponentDigits = 9

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
var ErrBodyRefused = errors.New("idemhttp: request body refused")

// CanonicalJSON returns a canonical form of a JSON document, so that two
// documents that mean the same have the same bytes: object members sorted
// by name, no insignificant whitespace, strings re-escaped one way (as
// encoding/json escapes them), and numbers in one form (1, 1.0, 10e-1 and
// 0.1e1 are all 1e0; -0 is 0), exact whatever their size. It fails on
// anything that is not one JSON value, and refuses (ErrBodyRefused) what
// I-JSON (RFC 7493) refuses and what would let two different documents
// share a form: duplicate member names, case-folded ones included
// (encoding/json reads "Amount" and "amount" as one field, the last one
// winning), invalid UTF-8, unpaired surrogate escapes, nesting deeper
// than MaxJSONDepth, exponents of more than 9 digits, and anything but
// white space after the value (a decoder that reads one value ignores
// it, so two different bodies would be read alike).
//
// It takes time and memory linear in the document's size, whatever its
// depth: one pass reads the document and writes every value in document
// order into one buffer, noting each object's members; a second copies
// that buffer once, each object's members in order of their names.
func CanonicalJSON(doc []byte) ([]byte, error) {
	s := scanner{doc: doc, buf: make([]byte, 0, len(doc))}
	s.space()
	if err := s.value(0); err != nil {
		return nil, err
	}
	if s.space(); s.pos < len(doc) {
		return nil, fmt.Errorf("%w: data follows the JSON value (byte %d); send one JSON value", ErrBodyRefused, s.pos)
	}
	return s.emit(make([]byte, 0, len(s.buf)), 0, len(s.buf), 0), nil
}

// object is an object of the document as the first pass wrote it into
// scanner.buf: its span and its members, in document order.
type object struct {
	lo, hi  int
	members []member
	// next is the index in scanner.objects of the first object after
	// this one's span: its nested objects are those in between.
	next int
}

// member is one member of an object: its name, as decoded, and the span
// of its name and value in scanner.buf ("name":value).
type member struct {
	name   string
	lo, hi int
}

// scanner reads one JSON document (RFC 8259) in one pass.
type scanner struct {
	doc []byte
	pos int
	// buf holds the document in canonical form but for the order of
	// object members.
	buf []byte
	// objects are the document's objects in order of where they start.
	objects []object
}

func (s *scanner) space() {
	for s.pos < len(s.doc) {
		switch s.doc[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// syntax is the error of a document that is not JSON.
func (s *scanner) syntax(what string) error {
	if s.pos >= len(s.doc) {
		return errors.New("idemhttp: invalid JSON: unexpected end of the document")
	}
	return fmt.Errorf("idemhttp: invalid JSON: %s at byte %d", what, s.pos)
}

// value reads the value at pos (no white space before it) into buf.
func (s *scanner) value(depth int) error {
	if s.pos >= len(s.doc) {
		return s.syntax("")
	}
	switch c := s.doc[s.pos]; {
	case c == '{' || c == '[':
		if depth >= MaxJSONDepth {
			return fmt.Errorf("%w: the JSON is nested deeper than %d levels", ErrBodyRefused, MaxJSONDepth)
		}
		if c == '{' {
			return s.object(depth)
		}
		return s.array(depth)
	case c == '"':
		_, err := s.str(false)
		return err
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.syntax("invalid character " + strconv.QuoteRune(rune(s.doc[s.pos])) + " looking for a value")
}

func (s *scanner) literal(lit string) error {
	if len(s.doc)-s.pos < len(lit) || string(s.doc[s.pos:s.pos+len(lit)]) != lit {
		return s.syntax("invalid literal")
	}
	s.pos += len(lit)
	s.buf = append(s.buf, lit...)
	return nil
}

func (s *scanner) array(depth int) error {
	s.pos++ // [
	s.buf = append(s.buf, '[')
	if s.space(); s.pos < len(s.doc) && s.doc[s.pos] == ']' {
		s.pos++
		s.buf = append(s.buf, ']')
		return nil
	}
	for {
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.space()
		if s.pos >= len(s.doc) {
			return s.syntax("")
		}
		switch s.doc[s.pos] {
		case ',':
			s.pos++
			s.space()
			s.buf = append(s.buf, ',')
		case ']':
			s.pos++
			s.buf = append(s.buf, ']')
			return nil
		default:
			return s.syntax("want , or ] after an array element")
		}
	}
}

// object reads an object into buf, its members in document order, and
// notes them in objects.
func (s *scanner) object(depth int) error {
	i := len(s.objects)
	s.objects = append(s.objects, object{lo: len(s.buf)})
	s.pos++ // {
	s.buf = append(s.buf, '{')
	var members []member
	var seen map[string]string // folded name → the name as sent
	if s.space(); s.pos < len(s.doc) && s.doc[s.pos] == '}' {
		s.pos++
	} else {
		for {
			if s.pos >= len(s.doc) || s.doc[s.pos] != '"' {
				return s.syntax("want a member name")
			}
			m := member{lo: len(s.buf)}
			name, err := s.str(true)
			if err != nil {
				return err
			}
			if seen == nil {
				seen = map[string]string{}
			}
			folded := foldName(name)
			if prev, dup := seen[folded]; dup {
				if prev == name {
					return fmt.Errorf("%w: the member name %q appears twice in one object; send each member once", ErrBodyRefused, name)
				}
				return fmt.Errorf("%w: the member names %q and %q differ only in case, and are read as one; send each member once", ErrBodyRefused, prev, name)
			}
			seen[folded] = name
			if s.space(); s.pos >= len(s.doc) || s.doc[s.pos] != ':' {
				return s.syntax("want : after a member name")
			}
			s.pos++
			s.space()
			s.buf = append(s.buf, ':')
			if err := s.value(depth + 1); err != nil {
				return err
			}
			m.name, m.hi = name, len(s.buf)
			members = append(members, m)
			if s.space(); s.pos >= len(s.doc) {
				return s.syntax("")
			}
			if s.doc[s.pos] == '}' {
				s.pos++
				break
			}
			if s.doc[s.pos] != ',' {
				return s.syntax("want , or } after an object member")
			}
			s.pos++
			s.space()
			s.buf = append(s.buf, ',')
		}
	}
	s.buf = append(s.buf, '}')
	s.objects[i].hi, s.objects[i].members, s.objects[i].next = len(s.buf), members, len(s.objects)
	return nil
}

// str reads the string at pos into buf, as encoding/json writes it, and
// returns it decoded when name is set. A string that needs no escape is
// written as it is; any other is decoded and encoded again.
func (s *scanner) str(name bool) (string, error) {
	start := s.pos + 1
	plain := true // no escape in the document, and none in the canonical form
	i := start
	for ; ; i++ {
		if i >= len(s.doc) {
			s.pos = i
			return "", s.syntax("")
		}
		c := s.doc[i]
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			plain = false
			i++
			if i >= len(s.doc) {
				s.pos = i
				return "", s.syntax("")
			}
			switch s.doc[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := hex4(s.doc[i+1 : min(i+5, len(s.doc))]); !ok {
					s.pos = i
					return "", s.syntax(`invalid \u escape`)
				}
				i += 4
			default:
				s.pos = i
				return "", s.syntax("invalid escape")
			}
		case c < 0x20:
			s.pos = i
			return "", s.syntax("control character in a string")
		case c == '<' || c == '>' || c == '&': // encoding/json escapes them
			plain = false
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(s.doc[i:])
			if r == utf8.RuneError && n == 1 {
				return "", fmt.Errorf("%w: the body is not valid UTF-8 (byte %d)", ErrBodyRefused, i)
			}
			if r == '\u2028' || r == '\u2029' { // so does it these
				plain = false
			}
			i += n - 1
		}
	}
	lit := s.doc[start:i]
	s.pos = i + 1
	if plain {
		s.buf = append(s.buf, '"')
		s.buf = append(s.buf, lit...)
		s.buf = append(s.buf, '"')
		if name {
			return string(lit), nil
		}
		return "", nil
	}
	decoded, err := unescape(lit, start)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(decoded) // a valid UTF-8 string always marshals
	s.buf = append(s.buf, b...)
	return decoded, nil
}

// unescape decodes a string literal's contents (at offset off of the
// document), which str has checked but for the pairing of surrogate
// escapes: one unpaired would be read as U+FFFD, which is no character.
func unescape(lit []byte, off int) (string, error) {
	d := make([]byte, 0, len(lit))
	for j := 0; j < len(lit); {
		if lit[j] != '\\' {
			d = append(d, lit[j])
			j++
			continue
		}
		e := lit[j+1]
		j += 2
		switch e {
		case 'b':
			d = append(d, '\b')
		case 'f':
			d = append(d, '\f')
		case 'n':
			d = append(d, '\n')
		case 'r':
			d = append(d, '\r')
		case 't':
			d = append(d, '\t')
		case 'u':
			r, _ := hex4(lit[j : j+4])
			j += 4
			if utf16.IsSurrogate(r) {
				lo, ok := rune(0), false
				if r < 0xdc00 && j+6 <= len(lit) && lit[j] == '\\' && lit[j+1] == 'u' {
					lo, _ = hex4(lit[j+2 : j+6])
					ok = lo >= 0xdc00 && lo < 0xe000
				}
				if !ok {
					return "", fmt.Errorf("%w: a string holds an unpaired UTF-16 surrogate escape \\u%04x (byte %d), which is no character", ErrBodyRefused, r, off+j-6)
				}
				r = utf16.DecodeRune(r, lo)
				j += 6
			}
			d = utf8.AppendRune(d, r)
		default: // " \ /
			d = append(d, e)
		}
	}
	return string(d), nil
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) != 4 {
		return 0, false
	}
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads the number at pos (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)
// into buf in canonical form.
func (s *scanner) number() error {
	start := s.pos
	if s.doc[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.doc) && s.doc[s.pos] == '0' {
		s.pos++
	} else if s.digits() == 0 {
		return s.syntax("want a digit")
	}
	if s.pos < len(s.doc) && s.doc[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.syntax("want a digit after the decimal point")
		}
	}
	if s.pos < len(s.doc) && (s.doc[s.pos] == 'e' || s.doc[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.doc) && (s.doc[s.pos] == '+' || s.doc[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.syntax("want a digit in the exponent")
		}
	}
	var err error
	s.buf, err = appendNumber(s.buf, s.doc[start:s.pos])
	return err
}

// digits skips the digits at pos and returns how many there were.
func (s *scanner) digits() int {
	start := s.pos
	for s.pos < len(s.doc) && '0' <= s.doc[s.pos] && s.doc[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

// emit appends buf[lo:hi] to out with every object in it in canonical
// order; objects[first:] are the objects that start at lo or later. Each
// byte of buf is appended once.
func (s *scanner) emit(out []byte, lo, hi, first int) []byte {
	for i := first; i < len(s.objects) && s.objects[i].lo < hi; {
		o := &s.objects[i]
		out = append(out, s.buf[lo:o.lo]...)
		slices.SortFunc(o.members, func(a, b member) int { return strings.Compare(a.name, b.name) })
		out = append(out, '{')
		for j, m := range o.members {
			if j > 0 {
				out = append(out, ',')
			}
			out = s.emit(out, m.lo, m.hi, s.firstAt(m.lo, i+1, o.next))
		}
		out = append(out, '}')
		lo, i = o.hi, o.next
	}
	return append(out, s.buf[lo:hi]...)
}

// firstAt returns the index of the first object in objects[from:to] that
// starts at lo or later (to when none does).
func (s *scanner) firstAt(lo, from, to int) int {
	return from + sort.Search(to-from, func(k int) bool { return s.objects[from+k].lo >= lo })
}

// foldName folds a member name as encoding/json folds names to match
// them to struct fields (bytes.EqualFold: each rune to the smallest of its
// simple case folding orbit, so "K", "k" and the Kelvin sign are one):
// two names with the same fold are one field.
func foldName(name string) string {
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

// appendNumber appends a JSON number literal exactly as
// [-]D[.DDD]e<exponent> with no leading or trailing zeros in the digits:
// "0" for zero.
func appendNumber(out, lit []byte) ([]byte, error) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	mant, expPart := lit, []byte(nil)
	if k := bytes.IndexAny(lit, "eE"); k >= 0 {
		mant, expPart = lit[:k], lit[k+1:]
	}
	intPart, frac := mant, []byte(nil)
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		intPart, frac = mant[:k], mant[k+1:]
	}
	exp := 0
	if expPart != nil {
		eneg := expPart[0] == '-'
		if expPart[0] == '-' || expPart[0] == '+' {
			expPart = expPart[1:]
		}
		for len(expPart) > 1 && expPart[0] == '0' {
			expPart = expPart[1:]
		}
		if len(expPart) > maxExponentDigits {
			return nil, fmt.Errorf("%w: a number's exponent has more than %d digits", ErrBodyRefused, maxExponentDigits)
		}
		for _, c := range expPart {
			exp = exp*10 + int(c-'0')
		}
		if eneg {
			exp = -exp
		}
	}
	// The digits are intPart then frac: digit(k) is the k-th of them.
	n := len(intPart) + len(frac)
	digit := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	first, last := 0, n-1
	for first < n && digit(first) == '0' {
		first++
	}
	if first == n {
		return append(out, '0'), nil
	}
	for digit(last) == '0' {
		last--
	}
	// digits[first..last] × 10^(exp - len(frac) + n-1-last), written as
	// d.ddd × 10^(that + last-first).
	exp += n - 1 - first - len(frac)
	if neg {
		out = append(out, '-')
	}
	out = append(out, digit(first))
	if last > first {
		out = append(out, '.')
		for k := first + 1; k <= last; k++ {
			out = append(out, digit(k))
		}
	}
	out = append(out, 'e')
	return strconv.AppendInt(out, int64(exp), 10), nil
}
