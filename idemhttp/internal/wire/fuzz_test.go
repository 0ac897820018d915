package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/onceflow/onceflow/idemhttp/internal/wire"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`8e03978e-40d5-43e8-bc93-6894a57f9324`:   "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`  "with space and \"quote\" \\ "  `:     `with space and "quote" \ `,
		`"a,b"`:                                  `a,b`, // quoted, a comma is part of the key
		"a!#$%&'*+-.^_`|~:/Z9":                   "a!#$%&'*+-.^_`|~:/Z9",
		`"` + strings.Repeat("a", 255) + `"`:     strings.Repeat("a", 255),
	} {
		got, err := wire.ParseKey(in)
		if err != nil || got != want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{``, ` `, `""`, `"open`, `"a"b`, `"a";x=1`, `"\n"`, `"é"`, `a b`, `a"b`, `a\b`, strings.Repeat("a", 256), "\"a\x7f\"",
		// what a structured field reads as a list, a parameter or an inner list
		`a,b`, `a;b`, `a=b`, `(a)`, `a@b`, `<a>`, `[a]`, `{a}`, `a?b`} {
		if got, err := wire.ParseKey(in); err == nil {
			t.Errorf("ParseKey(%q) = %q; want an error", in, got)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"k"`, `k`, `"a\"b"`, `"a\\b"`, `"`, `""`, `a b`, `"x";y`, strings.Repeat("z", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := wire.ParseKey(in)
		if err != nil {
			return
		}
		if len(key) == 0 || len(key) > wire.MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %q: bad length", in, key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: not printable ASCII", in, key)
			}
		}
		// An unquoted key holds no structured field delimiter.
		if trimmed := strings.Trim(in, " \t"); !strings.HasPrefix(trimmed, `"`) && strings.ContainsAny(key, ",;=()<>@[]{}?\"\\ ") {
			t.Fatalf("ParseKey(%q) = %q: a bare key with a delimiter", in, key)
		}
		// Quoting it as an sf-string parses back to it.
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if back, err := wire.ParseKey(quoted); err != nil || back != key {
			t.Fatalf("ParseKey(%q) = %q, %v; want %q", quoted, back, err, key)
		}
	})
}

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	for _, group := range [][]string{
		{`{"a":1,"b":[1,2]}`, ` { "b" : [ 1 , 2.0 ] , "a" : 1e0 } `, `{"b":[10e-1,0.2e1],"a":1.000}`},
		{`0`, `-0`, `0.0`, `0e10`, `-0.0e-5`},
		{`123456789012345678901234567890`, `1.23456789012345678901234567890e29`},
		{`"\u00e9"`, `"é"`},
		{`"\ud83d\ude00"`, `"😀"`},
		{`{"x":{"a":1},"y":{"A":2}}`, `{"y":{"A":2.0},"x":{"a":1}}`}, // case variants in different objects
	} {
		want, err := wire.CanonicalJSON([]byte(group[0]))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range group[1:] {
			got, err := wire.CanonicalJSON([]byte(doc))
			if err != nil || string(got) != string(want) {
				t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", doc, got, err, want)
			}
		}
	}
	for _, pair := range [][2]string{{`1`, `2`}, {`123456789012345678901`, `123456789012345678902`}, {`[1,2]`, `[2,1]`}, {`"\ufffd"`, `"\ufffe"`}} {
		a, _ := wire.CanonicalJSON([]byte(pair[0]))
		b, _ := wire.CanonicalJSON([]byte(pair[1]))
		if string(a) == string(b) {
			t.Errorf("%s and %s canonicalise alike: %s", pair[0], pair[1], a)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1`, `[1,]`} {
		if _, err := wire.CanonicalJSON([]byte(bad)); err == nil || errors.Is(err, wire.ErrBodyRefused) {
			t.Errorf("CanonicalJSON(%.20q) = %v; want a not-JSON error", bad, err)
		}
	}
	// JSON, but refused: what two readers could read differently, or
	// two documents share a form through.
	for _, bad := range []string{
		`{"a":1,"a":2}`,
		`{"x":[{"a":1,"b":2,"a":1}]}`,
		`{"Amount_Cents":100000,"amount_cents":1999}`,
		`{"amount_cents":1999,"Amount_Cents":100000}`,
		"{\"k\":1,\"\u212a\":2}", // the Kelvin sign folds to k
		`{"k":1,"\u212a":2}`,     // escaped
		"{\"s\":1,\"\u017f\":2}", // the long s folds to s
		`{"é":1,"\u00c9":2}`,     // É
		"{\"a\":\"\xff\"}",       // invalid UTF-8 in a value
		"{\"\xc3\":1}",           // in a name
		`"\ud800"`,               // an unpaired high surrogate
		`"\udc00x"`,              // an unpaired low one
		`"\ud800\u0041"`,         // a high one followed by no low one
		`"\ud800\n"`,             // by another escape
		`1e9999999999`,           // an exponent of 10 digits
		`{"a":1}]`,               // data after the value, which a decoder of one value ignores
		`{"a":1}x`,
		`{"a":1} {"a":2}`,
		"[1]\n[2]",
		strings.Repeat("[", wire.MaxJSONDepth+1) + strings.Repeat("]", wire.MaxJSONDepth+1),
		`{"a":` + strings.Repeat(`{"a":`, wire.MaxJSONDepth) + `1` + strings.Repeat("}", wire.MaxJSONDepth+1),
	} {
		if _, err := wire.CanonicalJSON([]byte(bad)); !errors.Is(err, wire.ErrBodyRefused) {
			t.Errorf("CanonicalJSON(%.40q) = %v; want ErrBodyRefused", bad, err)
		}
	}
	deepest := strings.Repeat("[", wire.MaxJSONDepth) + "1" + strings.Repeat("]", wire.MaxJSONDepth)
	if _, err := wire.CanonicalJSON([]byte(deepest)); err != nil {
		t.Errorf("%d levels refused: %v", wire.MaxJSONDepth, err)
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.0,2e3,"x"]}`, `-0.0`, `1e-7`, `{"a":{"a":null}}`, `[true,false]`, `"\ud800"`, `12345678901234567890e-30`,
		// duplicate and case-variant members, at the top and deeper
		`{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"Amount_Cents":100000,"amount_cents":1999}`, `{"x":{"id":"a","ID":"b"}}`,
		"[{\"k\":1},{\"K\":1,\"\u212a\":2}]", `{"\u0041":1,"a":2}`, `{"ß":1,"ẞ":2}`, `{"σ":1,"ς":2,"Σ":3}`, `{"a":{"b":1},"A":{"b":2}}`,
		"{\"a\":\"\xff\"}", `"\ud83d\ude00"`, `"\ude00\ud83d"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkBudget(t, doc)
		c, err := wire.CanonicalJSON(doc)
		// The scanner accepts and writes what the decoder-based oracle
		// did, and refuses the JSON it refused. (Of a document that is not
		// JSON, each may see another fault first.)
		ref, refErr := refCanonicalJSON(doc)
		switch {
		case (err == nil) != (refErr == nil):
			t.Fatalf("CanonicalJSON(%q) = %q, %v; the oracle: %q, %v", doc, c, err, ref, refErr)
		case err == nil && string(c) != string(ref):
			t.Fatalf("CanonicalJSON(%q) = %q; the oracle: %q", doc, c, ref)
		case err != nil && json.Valid(doc) && errors.Is(err, wire.ErrBodyRefused) != errors.Is(refErr, wire.ErrBodyRefused):
			t.Fatalf("CanonicalJSON(%q): %v; the oracle: %v", doc, err, refErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("CanonicalJSON(%q) = %q: not JSON", doc, c)
		}
		if !json.Valid(doc) {
			t.Fatalf("CanonicalJSON accepted invalid JSON %q", doc)
		}
		if !utf8.Valid(doc) {
			t.Fatalf("CanonicalJSON accepted invalid UTF-8 %q", doc)
		}
		again, err := wire.CanonicalJSON(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", doc, c, again, err)
		}
		// What it accepts, encoding/json reads whole: no member lost to a
		// duplicate (decoding into maps and encoding again gives the same
		// form), and no two names of one object that one struct field
		// would both match.
		var v any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("CanonicalJSON accepted %q, which does not decode: %v", doc, err)
		}
		re, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if c2, err := wire.CanonicalJSON(re); err != nil || string(c2) != string(c) {
			t.Fatalf("%q decodes to %s, whose form is %q (%v), not %q: a member was lost", doc, re, c2, err, c)
		}
		if names, ok := caseVariants(v); ok {
			t.Fatalf("CanonicalJSON accepted %q, which has names that differ only in case in one object: %s", doc, names)
		}
	})
}

// caseVariants finds two names of one object, anywhere in v, that
// bytes.EqualFold (how encoding/json matches names to fields) takes for
// one.
func caseVariants(v any) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		for a := range v {
			for b := range v {
				if a != b && bytes.EqualFold([]byte(a), []byte(b)) {
					return a + " and " + b, true
				}
			}
		}
		for _, x := range v {
			if n, ok := caseVariants(x); ok {
				return n, ok
			}
		}
	case []any:
		for _, x := range v {
			if n, ok := caseVariants(x); ok {
				return n, ok
			}
		}
	}
	return "", false
}
