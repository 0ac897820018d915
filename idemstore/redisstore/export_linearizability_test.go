package redisstore

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// MutateScript makes s send a copy of the generated script name
// ("transition") with the first old replaced by new: a broken script,
// for the test that proves the linearizability check catches one.
func MutateScript(s *Store, name, old, new string) {
	if name != "transition" || !strings.Contains(transitionLua, old) {
		panic("redisstore: MutateScript: no " + old + " in " + name)
	}
	ss := *s.scripts
	src := strings.Replace(transitionLua, old, new, 1)
	ss.transition = script{name: name, readOnly: ss.transition.readOnly, Script: redis.NewScript(src)}
	s.scripts = &ss
}
