package redisstore

import (
	"strings"
	"time"
)

// MutateScript makes s send a copy of the generated script name
// ("transition" or "claim") with the first of each old replaced by the
// new after it (oldNew is old, new, old, new, …): a broken script, for
// the tests that prove a check catches one.
func MutateScript(s *Store, name string, oldNew ...string) {
	var src string
	switch name {
	case "transition":
		src = transitionLua
	case "claim":
		src = claimLua
	}
	if src == "" || len(oldNew)%2 != 0 {
		panic("redisstore: MutateScript: only transition or claim, with pairs of old and new")
	}
	for i := 0; i < len(oldNew); i += 2 {
		if !strings.Contains(src, oldNew[i]) {
			panic("redisstore: MutateScript: no " + oldNew[i] + " in " + name)
		}
		src = strings.Replace(src, oldNew[i], oldNew[i+1], 1)
	}
	ss := *s.scripts
	if name == "claim" {
		ss.claim = newScript(name, src, ss.claim.readOnly)
	} else {
		ss.transition = newScript(name, src, ss.transition.readOnly)
	}
	s.scripts = &ss
}

// PipelinedScripts counts the bounded script calls s sent through the
// auto-pipeliner.
func PipelinedScripts(s *Store) int64 { return s.pipelinedScripts.Load() }

// BoundedCalls and UnboundedCalls count the claims and transitions s
// sent with and without a bound (bound.go).
func BoundedCalls(s *Store) int64   { return s.clock.bounded.Load() }
func UnboundedCalls(s *Store) int64 { return s.clock.unbounded.Load() }

// ClockSteps counts the steps s's clock saw: of the local wall clock, of
// Redis' against its last reading, or an early LATE.
func ClockSteps(s *Store) int64 { return s.clock.steps.Load() }

// SetWallClock makes s read the local wall clock from wall (its monotonic
// clock stays the process'), as if it had started so: it drops the
// reading LoadScripts took. Call it before s is used.
func SetWallClock(s *Store, wall func() time.Time) {
	s.clock.wall = wall
	s.clock.last.Store(nil)
}
