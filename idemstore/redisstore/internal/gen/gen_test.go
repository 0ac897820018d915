package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/redisstore/internal/schema"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// The store's directory, where go generate runs the generator.
const (
	srcDir = "../../lua"
	outDir = "../../lua/gen"
)

// TestGeneratedScriptsAreUpToDate regenerates the scripts in memory: the
// checked-in lua/gen/*.lua, which the store embeds and runs, must be
// exactly what the sources generate.
func TestGeneratedScriptsAreUpToDate(t *testing.T) {
	t.Parallel()
	files, err := generate(os.DirFS(srcDir))
	if err != nil {
		t.Fatal(err)
	}
	const fix = "run go generate ./idemstore/redisstore"
	var want []string
	for _, f := range files {
		want = append(want, f.name)
		got, err := os.ReadFile(filepath.Join(outDir, f.name))
		if err != nil {
			t.Errorf("lua/gen/%s: %v: %s", f.name, err, fix)
			continue
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("lua/gen/%s is not what its sources generate (%s): %s", f.name, firstDiff(got, f.data), fix)
		}
	}
	present, err := filepath.Glob(filepath.Join(outDir, "*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range present {
		if name := filepath.Base(path); !slices.Contains(want, name) {
			t.Errorf("lua/gen/%s has no source: %s", name, fix)
		}
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		if i >= len(g) || i >= len(w) || g[i] != w[i] {
			return fmt.Sprintf("line %d: %.60q, want %.60q", i+1, line(g, i), line(w, i))
		}
	}
	return "they differ"
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// TestBadSourcesAreErrors: a macro naming an unknown field, an unknown
// macro and an unknown reply code stop the generator.
func TestBadSourcesAreErrors(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		"if @invalid(color, x) then end",
		"return @pack(state = 'CLAIMED', color = 'red')",
		"return @frobnicate(x)",
		"return R.NO_SUCH_REPLY",
	} {
		if s, err := script("bad.lua", "#!lua\n-- bad.lua\n"+body+"\n", ""); err == nil {
			t.Errorf("%q generated without an error:\n%s", body, s)
		}
	}
}

// TestLuaChecksMatchGo runs the generated valid(field, x) on Redis and
// schema's Kind.Valid on the same values: the Lua twin of every rule
// answers as the Go one.
func TestLuaChecksMatchGo(t *testing.T) {
	t.Parallel()
	hex := func(n int, c string) string { return strings.Repeat(c, n) }
	values := []string{
		"", "x", "!", " 1", "0", "1", "2", "01", "-1", "1.5", "1e+20", "true", "a\x00b",
		"999999999999999", "9999999999999999", "9007199254740993", "99999999999999999999",
		"CLAIMED", "EXECUTING", "COMPLETED", "FAILED_RETRYABLE", "ABANDONED", "FAILED", "claimed", "RUNNING",
		hex(8, "a"), hex(8, "A"), hex(7, "a"), "0123456g", hex(32, "f"), hex(32, "F"), hex(33, "f"),
		hex(64, "0"), hex(64, "Z"), hex(63, "0"), hex(65, "0"),
		"json-v2", "proto.v1", "JSON", "a_b", "a b", hex(32, "c"), hex(33, "c"),
		hex(onceflow.MaxReasonLen, "r"), hex(onceflow.MaxReasonLen+1, "r"),
		hex(onceflow.MaxOperationIDLen, "o"), hex(onceflow.MaxOperationIDLen+1, "o"),
		// Raw owners, fingerprints and nonces: any bytes, NUL among them.
		hex(16, "\x00"), hex(15, "\xff"), hex(17, "\x01"), hex(32, "\x00"), hex(31, "\xfe"), hex(33, ":"), hex(16, "\xff"),
	}
	src, err := expandMacros("local find = string.find\n" + luaSchema() +
		"local out = {}\nfor i = 2, #ARGV do out[i - 1] = valid(ARGV[1], ARGV[i]) and 1 or 0 end\nreturn out\n")
	if err != nil {
		t.Fatal(err)
	}
	client := redistest.Client(t)
	for _, f := range schema.Fields {
		args := []any{f.Name}
		for _, v := range values {
			args = append(args, v)
		}
		got, err := client.Eval(t.Context(), src, nil, args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range values {
			if lua, goValid := got[i] == 1, f.Kind.Valid(v); lua != goValid {
				t.Errorf("%s (%s) = %.40q: Lua says valid %v, Go %v", f.Name, f.Kind, v, lua, goValid)
			}
		}
	}
}

// TestLuaMetaMatchesGo runs the generated unpack_m, and the fast path's
// @metamatch and @metaclean, on Redis and schema.ParseMeta on the same
// values of m: all three accept the same values, and unpack_m names the
// same bad part as ParseMeta.
func TestLuaMetaMatchesGo(t *testing.T) {
	t.Parallel()
	sum := "0a1b2c3d"
	// m's values but the state's, each after every state (and a few
	// that are none).
	tails := []string{
		"1:1:1:0:0:0::json", "1:2:3:1764460030000:1764460030001:1:" + sum + ":json-v2",
		"999999999999999:1:1:0:0:0::a", "9999999999999999:1:1:0:0:0::a", "1:1:1:999999999999999:0:0::a",
		"1:1:1:9999999999999999:0:0::a", "0:1:1:0:0:0::json", "01:1:1:0:0:0::json", "1:0:1:0:0:0::json",
		"1:1:0:0:0:0::json", "1:1:1:01:0:0::json", "1:1:1:0:00:0::json", "1:1:1:-1:0:0::json",
		"1:1:1:0:0:2::json", "1:1:1:0:0:::json", "1:1:1:0:0:0:0a1b2c3:json", "1:1:1:0:0:0:0A1B2C3D:json",
		"1:1:1:0:0:0:0a1b2c3d0:json", "1:1:1:0:0:0::", "1:1:1:0:0:0::JSON", "1:1:1:0:0:0::" + strings.Repeat("c", 32),
		"1:1:1:0:0:0::" + strings.Repeat("c", 33), "1:1:1:0:0:0::json:x", "1:1:1:0:0:0", "", ":::::::",
		"1:1:1:0:0:0::a b", "1:1:1:0:0:0::a\x00b", " 1:1:1:0:0:0::json", "1e+20:1:1:0:0:0::json", "1.5:1:1:0:0:0::json",
	}
	values := []string{"", "::::::::", "EXECUTING", "EXECUTING:", "1:1:1:0:0:0::json"}
	for _, state := range []string{"CLAIMED", "EXECUTING", "COMPLETED", "FAILED_RETRYABLE", "ABANDONED", "FAILED", "RUNNING", "claimed", "", "EXECUTING "} {
		for _, tail := range tails {
			values = append(values, state+":"+tail)
		}
	}
	vars := strings.Join(metaVars[:], ", ")
	src, err := expandMacros("local find = string.find\n" + strings.ReplaceAll(luaMeta(), "\t", "  ") +
		"local out = {}\nfor i = 1, #ARGV do\n" +
		"  local " + vars + " = unpack_m(ARGV[i])\n" +
		"  local name = m_state and '' or m_attempt\n" +
		"  local " + vars + " = @metamatch(ARGV[i])\n" +
		"  local fast = m_state and @metaclean(" + vars + ") and 1 or 0\n" +
		"  out[#out + 1] = name\n  out[#out + 1] = fast\nend\nreturn out\n")
	if err != nil {
		t.Fatal(err)
	}
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	got, err := redistest.Client(t).Eval(t.Context(), src, nil, args...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		_, bad := schema.ParseMeta(v)
		if name := got[2*i]; name != bad {
			t.Errorf("m = %q: unpack_m names %q, ParseMeta %q", v, name, bad)
		}
		if fast := got[2*i+1] == int64(1); fast != (bad == "") {
			t.Errorf("m = %q: the fast path's match says clean %v, ParseMeta names %q", v, fast, bad)
		}
	}
}
