package doclink

import (
	"strings"
)

// A Table is a Markdown (GitHub) table: the cells of its header and of
// each row, trimmed, code spans kept as written.
type Table struct {
	Line   int // 1-based, of the header
	Header []string
	Rows   [][]string
}

// Tables returns the tables of a Markdown document, outside fenced code,
// in order. A table is a header row, a delimiter row (|---|…) and the
// rows that follow it up to the first line that is no row.
func Tables(src string) []Table {
	var (
		tables []Table
		cur    *Table
		code   bool
	)
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if fence.MatchString(line) {
			code = !code
		}
		row := !code && strings.HasPrefix(strings.TrimSpace(line), "|")
		switch {
		case !row:
			cur = nil
		case cur != nil:
			cur.Rows = append(cur.Rows, cells(line))
		case i+1 < len(lines) && delimiter(lines[i+1]):
			tables = append(tables, Table{Line: i + 1, Header: cells(line)})
			cur = &tables[len(tables)-1]
			i++ // the delimiter row
		}
	}
	return tables
}

// Column returns the index of the header cell named name, or -1.
func (t Table) Column(name string) int {
	for i, h := range t.Header {
		if h == name {
			return i
		}
	}
	return -1
}

func delimiter(line string) bool {
	c := cells(line)
	if len(c) == 0 {
		return false
	}
	for _, s := range c {
		s = strings.Trim(s, ":")
		if s == "" || strings.Trim(s, "-") != "" {
			return false
		}
	}
	return true
}

// cells splits a row at the pipes outside code spans (a pipe escaped as
// \| stays in its cell).
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var (
		out  []string
		cell strings.Builder
		code bool
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case c == '`':
			code = !code
			cell.WriteByte(c)
		case c == '|' && !code:
			out = append(out, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(c)
		}
	}
	return append(out, strings.TrimSpace(cell.String()))
}
