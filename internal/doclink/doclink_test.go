package doclink

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The documents a reader of the repository follows links in.
func documents(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	files := []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		files[i] = filepath.Join(root, f)
	}
	return append(files, docs...)
}

// TestDocLinks fails on a broken relative link or anchor in the README,
// the top-level documents and docs/.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	files := documents(t)
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	for _, p := range Check(files...) {
		t.Error(p)
	}
}

func TestSlugIsGitHubs(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"Quick start":         "quick-start",
		"Chaos (`cmd/chaos`)": "chaos-cmdchaos",
		"The HTTP door (`idemhttp`, the order API)":    "the-http-door-idemhttp-the-order-api",
		"Walk-through: a charge whose fate is unknown": "walk-through-a-charge-whose-fate-is-unknown",
		"`-dev-reset` and `ONCEFLOW_DEV_RESET`":        "-dev-reset-and-onceflow_dev_reset",
		"Redis 7.0+ for production":                    "redis-70-for-production",
		"The console (`/console`)":                     "the-console-console",
		"A [linked](other.md#x) **bold** heading":      "a-linked-bold-heading",
		"Ünïcode – and dashes":                         "ünïcode--and-dashes",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestAnchorsNumberRepeatsAndSkipCode(t *testing.T) {
	t.Parallel()
	src := "# Top\n## Usage\n## Usage\n```sh\n# not a heading\n```\n<a id=\"custom\"></a>\n"
	got := Anchors(src)
	for _, a := range []string{"top", "usage", "usage-1", "custom"} {
		if !got[a] {
			t.Errorf("anchor %q missing from %v", a, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block became an anchor")
	}
}

// TestCheckFindsBrokenLinks is the checker on deliberately broken input:
// a missing file, a missing anchor in another file and in its own, each
// reported with its line; good links, external ones and links in code are
// not.
func TestCheckFindsBrokenLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("docs/guide.md", "# Guide\n\n## Set up (`-dev`)\n")
	write("main.go", "package main\n")
	readme := write("README.md", strings.Join([]string{
		"# Project",                                  // 1
		"[good](docs/guide.md#set-up--dev)",          // 2
		"[good too](#project) and [a file](main.go)", // 3
		"[missing file](docs/nope.md)",               // 4
		"[missing anchor](docs/guide.md#setup)",      // 5
		"[missing own anchor](#no-such-heading)",     // 6
		"[external](https://example.com/x.md#y)",     // 7
		"`[in code](nowhere.md)`",                    // 8
		"```",                                        // 9
		"[in a block](nowhere.md)",                   // 10
		"```",                                        // 11
		"![image](img/missing.png)",                  // 12
		"[ref]: docs/gone.md",                        // 13
		"[a directory](docs)",                        // 14
	}, "\n"))
	var got []int
	for _, p := range Check(readme) {
		got = append(got, p.Line)
		t.Log(p)
	}
	if want := []int{4, 5, 6, 12, 13}; !slices.Equal(got, want) {
		t.Fatalf("broken links reported on lines %v, want %v", got, want)
	}
	if p := Check(filepath.Join(dir, "absent.md")); len(p) != 1 {
		t.Fatalf("a missing document: %v", p)
	}
}

// TestEveryDocIsLinkedFromTheREADME: a page in docs/ that the README does
// not link is a page a newcomer never finds.
func TestEveryDocIsLinkedFromTheREADME(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range Links(string(readme)) {
		path, _, _ := strings.Cut(l.Target, "#")
		linked[path] = true
	}
	for _, d := range docs {
		if name := "docs/" + filepath.Base(d); !linked[name] {
			t.Errorf("README.md does not link %s", name)
		}
	}
}
