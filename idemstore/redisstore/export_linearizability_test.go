package redisstore

import "strings"

// MutateScript makes s send a copy of the generated script name
// ("transition") with the first of each old replaced by the new after it
// (oldNew is old, new, old, new, …): a broken script, for the test that
// proves the linearizability check catches one.
func MutateScript(s *Store, name string, oldNew ...string) {
	if name != "transition" || len(oldNew)%2 != 0 {
		panic("redisstore: MutateScript: only transition, with pairs of old and new")
	}
	src := transitionLua
	for i := 0; i < len(oldNew); i += 2 {
		if !strings.Contains(src, oldNew[i]) {
			panic("redisstore: MutateScript: no " + oldNew[i] + " in " + name)
		}
		src = strings.Replace(src, oldNew[i], oldNew[i+1], 1)
	}
	ss := *s.scripts
	ss.transition = newScript(name, src, ss.transition.readOnly)
	s.scripts = &ss
}
