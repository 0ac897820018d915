package idemhttp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/idemhttp"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`8e03978e-40d5-43e8-bc93-6894a57f9324`:   "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`  "with space and \"quote\" \\ "  `:     `with space and "quote" \ `,
		`"` + strings.Repeat("a", 255) + `"`:     strings.Repeat("a", 255),
	} {
		got, err := idemhttp.ParseKey(in)
		if err != nil || got != want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{``, ` `, `""`, `"open`, `"a"b`, `"a";x=1`, `"\n"`, `"é"`, `a b`, `a"b`, `a\b`, strings.Repeat("a", 256), "\"a\x7f\""} {
		if got, err := idemhttp.ParseKey(in); err == nil {
			t.Errorf("ParseKey(%q) = %q; want an error", in, got)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"k"`, `k`, `"a\"b"`, `"a\\b"`, `"`, `""`, `a b`, `"x";y`, strings.Repeat("z", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := idemhttp.ParseKey(in)
		if err != nil {
			return
		}
		if len(key) == 0 || len(key) > idemhttp.MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %q: bad length", in, key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: not printable ASCII", in, key)
			}
		}
		// Quoting it as an sf-string parses back to it.
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if back, err := idemhttp.ParseKey(quoted); err != nil || back != key {
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
		{`{"a":1,"a":2}`, `{"a":1, "a":2}`},
	} {
		want, err := idemhttp.CanonicalJSON([]byte(group[0]))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range group[1:] {
			got, err := idemhttp.CanonicalJSON([]byte(doc))
			if err != nil || string(got) != string(want) {
				t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", doc, got, err, want)
			}
		}
	}
	for _, pair := range [][2]string{{`1`, `2`}, {`{"a":1,"a":2}`, `{"a":2,"a":1}`}, {`123456789012345678901`, `123456789012345678902`}, {`[1,2]`, `[2,1]`}} {
		a, _ := idemhttp.CanonicalJSON([]byte(pair[0]))
		b, _ := idemhttp.CanonicalJSON([]byte(pair[1]))
		if string(a) == string(b) {
			t.Errorf("%s and %s canonicalise alike: %s", pair[0], pair[1], a)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1}x`, `1e9999999999`, strings.Repeat("[", 1002) + strings.Repeat("]", 1002)} {
		if _, err := idemhttp.CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%.20q) succeeded", bad)
		}
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.0,2e3,"x"]}`, `-0.0`, `1e-7`, `{"a":{"a":null}}`, `[true,false]`, `"\ud800"`, `12345678901234567890e-30`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := idemhttp.CanonicalJSON(doc)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("CanonicalJSON(%q) = %q: not JSON", doc, c)
		}
		if !json.Valid(doc) {
			t.Fatalf("CanonicalJSON accepted invalid JSON %q", doc)
		}
		again, err := idemhttp.CanonicalJSON(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", doc, c, again, err)
		}
	})
}
