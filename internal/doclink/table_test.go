package doclink

import (
	"slices"
	"testing"
)

func TestTablesSplitRowsOutsideCode(t *testing.T) {
	t.Parallel()
	src := "# t\n\n| a | b |\n|---|:--:|\n| `x|y` | z \\| w |\n| 1 | 2 |\n\ntext\n\n```\n| c | d |\n|---|---|\n```\n| e |\n|---|\n"
	got := Tables(src)
	if len(got) != 2 {
		t.Fatalf("%d tables, want 2 (the fenced one is code): %+v", len(got), got)
	}
	if got[0].Line != 3 || !slices.Equal(got[0].Header, []string{"a", "b"}) || got[0].Column("b") != 1 || got[0].Column("c") != -1 {
		t.Errorf("first table %+v", got[0])
	}
	if len(got[0].Rows) != 2 || !slices.Equal(got[0].Rows[0], []string{"`x|y`", "z | w"}) || !slices.Equal(got[0].Rows[1], []string{"1", "2"}) {
		t.Errorf("rows %q", got[0].Rows)
	}
	if !slices.Equal(got[1].Header, []string{"e"}) || len(got[1].Rows) != 0 {
		t.Errorf("second table %+v", got[1])
	}
}
