// Package doclink checks the relative links of Markdown files: that every
// linked file exists and every anchor names a heading of its file, slugged
// as GitHub slugs it. Links with a scheme (https:, mailto:) are not
// followed.
package doclink

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// A Problem is one broken link.
type Problem struct {
	File   string // the Markdown file, as given to Check
	Line   int    // 1-based
	Target string // the link as written
	Why    string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Target, p.Why)
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineLink = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// Check reads each Markdown file and returns its broken relative links and
// anchors. A missing file is a Problem too.
func Check(files ...string) []Problem {
	var problems []Problem
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := Anchors(string(src))
		anchors[path] = a
		return a, nil
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			problems = append(problems, Problem{File: file, Why: err.Error()})
			continue
		}
		for _, l := range Links(string(src)) {
			path, anchor, _ := strings.Cut(l.Target, "#")
			target := filepath.Clean(file)
			if path != "" {
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					problems = append(problems, Problem{file, l.Line, l.Target, "no such file: " + target})
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(strings.ToLower(target), ".md") {
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				problems = append(problems, Problem{file, l.Line, l.Target, err.Error()})
				continue
			}
			if !a[anchor] {
				problems = append(problems, Problem{file, l.Line, l.Target, "no heading with anchor #" + anchor + " in " + target})
			}
		}
	}
	return problems
}

// A Link is a relative link found in a Markdown file.
type Link struct {
	Line   int
	Target string
}

// Links returns the relative links of src: inline links and images, and
// reference definitions, outside fenced code blocks and code spans. Links
// with a scheme, and protocol-relative ones, are left out.
func Links(src string) []Link {
	var links []Link
	inFence := false
	for i, line := range strings.Split(src, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "``")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[2])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if t == "" || scheme.MatchString(t) || strings.HasPrefix(t, "//") {
				continue
			}
			links = append(links, Link{Line: i + 1, Target: t})
		}
	}
	return links
}

// Anchors returns the anchors of src's headings as GitHub makes them
// (Slug, with -1, -2, … for repeats), and the ids of <a id="…"> and
// <a name="…"> tags.
func Anchors(src string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(src, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

var (
	linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag  = regexp.MustCompile(`<[^>]*>`)
)

// Slug is GitHub's anchor for a heading's text: the text as rendered
// (links by their text, no code or emphasis marks, no HTML tags),
// lower-cased, every character that is not a letter, a digit, a mark, a
// space, '-' or '_' dropped, and each space a '-'.
func Slug(text string) string {
	text = linkText.ReplaceAllString(text, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
