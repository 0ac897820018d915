package refmodel

import (
	"github.com/onceflow/onceflow"
)

// Clone returns a copy of the model that shares nothing with it, for
// checkers (porcupine) that need a model's states to be values.
func (m *Model) Clone() *Model {
	c := &Model{recs: make(map[onceflow.Ref]*rec, len(m.recs))}
	for ref, r := range m.recs {
		cp := *r
		cp.resp = append([]byte(nil), r.resp...)
		c.recs[ref] = &cp
	}
	return c
}
