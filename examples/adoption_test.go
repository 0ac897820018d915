// Package examples_test counts what adopting onceflow changed in the two
// samples written in the style of Temporal's own, the money transfer and
// the saga: each one's before directory is the service without onceflow,
// its after directory the same service with it.
package examples_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxAdoptionLines is, per sample, the most lines (added plus removed)
// adopting onceflow may change in the service's code (issue 45).
var maxAdoptionLines = map[string]int{"transfer": 10, "saga": 15}

// TestAdoptionDiff: the adopted copy differs from the original by at most
// maxAdoptionLines lines of Go, counted as `git diff --no-index --numstat`
// counts them (added plus removed), over the service's files: every .go
// file but doc.go (each copy's description of itself) and the test files
// the adoption added. The original's tests are in the copy unchanged.
// The same count by hand:
//
//	git diff --no-index --numstat -- examples/transfer/before examples/transfer/after
//	git diff --no-index --numstat -- examples/saga/before examples/saga/after
func TestAdoptionDiff(t *testing.T) {
	t.Parallel()
	for sample, most := range maxAdoptionLines {
		t.Run(sample, func(t *testing.T) {
			t.Parallel()
			adoptionDiff(t, sample, most)
		})
	}
}

func adoptionDiff(t *testing.T, sample string, most int) {
	before, after := goFiles(t, filepath.Join(sample, "before")), goFiles(t, filepath.Join(sample, "after"))
	total := 0
	for name, a := range after {
		b, existed := before[name]
		switch {
		case name == "doc.go":
			continue
		case !existed && strings.HasSuffix(name, "_test.go"):
			t.Logf("%s: a test the adoption added (%d lines)", name, len(a))
			continue
		case strings.HasSuffix(name, "_test.go"):
			if !slices.Equal(a, b) {
				t.Errorf("%s: the original's test changed; the adoption must keep the service's tests as they are", name)
			}
			continue
		}
		added, removed := diff(b, a)
		if added+removed > 0 {
			t.Logf("%s: +%d -%d", name, added, removed)
		}
		total += added + removed
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("%s: the adoption removed it", name)
		}
	}
	t.Logf("adoption of the %s sample: %d changed lines (at most %d)", sample, total, most)
	if total > most {
		t.Errorf("adopting onceflow changed %d lines of the %s sample; at most %d", total, sample, most)
	}
	if total == 0 {
		t.Error("no lines changed: the counter reads the wrong files")
	}
}

// goFiles reads dir's .go files, as lines.
func goFiles(t *testing.T, dir string) map[string][]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files in %s (%v)", dir, err)
	}
	files := map[string][]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	return files
}

// diff counts the lines added and removed from a to b: the lines outside
// their longest common subsequence.
func diff(a, b []string) (added, removed int) {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	common := lcs[0][0]
	return len(b) - common, len(a) - common
}

// TestDiffCounts checks the counter on a change it can be checked on.
func TestDiffCounts(t *testing.T) {
	t.Parallel()
	a := []string{"x", "y", "z"}
	b := []string{"x", "Y", "z", "w"}
	if added, removed := diff(a, b); added != 2 || removed != 1 {
		t.Fatalf("diff = +%d -%d, want +2 -1", added, removed)
	}
}
