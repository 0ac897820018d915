package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrMissingCapability: the server refuses a command the store needs. A
// server without Lua scripting (Valkey 9.1 and newer with its Lua module
// unloaded, a managed service that disables or renames EVAL) or an ACL
// user without @scripting would fail on the first operation instead.
var ErrMissingCapability = errors.New("redisstore: the Redis server lacks a capability the store needs")

// CapabilityError names what a server refused in CheckCapabilities. It
// matches ErrMissingCapability.
type CapabilityError struct {
	Addr string // the server, as the client names it
	// Missing lists each refused capability: the command, the server's
	// answer and what to do.
	Missing []string
}

func (e *CapabilityError) Error() string {
	return fmt.Sprintf("redisstore: Redis at %s cannot run the idempotency store: %s", e.Addr, strings.Join(e.Missing, "; "))
}

// Is reports whether target is ErrMissingCapability.
func (e *CapabilityError) Is(target error) bool { return target == ErrMissingCapability }

// capability is one command the store sends, tried harmlessly.
type capability struct {
	name string // what it is, for the error
	args []any
	// optional: "unknown command" is no fault (the store falls back),
	// but a refusal (NOPERM) is.
	optional bool
	fix      string
}

// probeScript is the script the probe runs: it reads and writes nothing.
const probeScript = "return 1"

// capabilities are the commands the store sends on every server, and the
// durability waits its Config asks for.
func (s *Store) capabilities() []capability {
	sha := redis.NewScript(probeScript).Hash()
	scripting := "the store runs every transition as a Lua script: enable Lua scripting on the server " +
		"(on Valkey 9.1 and newer, load its Lua module), or use a service or plan that allows it, and grant the ACL user +@scripting"
	caps := []capability{
		{name: "Lua scripting (EVAL)", args: []any{"eval", probeScript, 0}, fix: scripting},
		{name: "EVALSHA", args: []any{"evalsha", sha, 0}, fix: scripting},
		{name: "EVALSHA_RO", args: []any{"evalsha_ro", sha, 0}, optional: true, fix: "grant the ACL user +@scripting (read-only scripts use EVALSHA_RO and EVAL_RO)"},
		{name: "HMGET", args: []any{"hmget", s.ns + ":idem:probe", "state"}, fix: "grant the ACL user +hmget on the namespace's keys (" + s.ns + ":*): the replay read uses it"},
	}
	if _, cluster := s.client.(*redis.ClusterClient); s.durable.mode != DurabilityNone && !cluster {
		caps = append(caps, capability{name: "PUBLISH", args: []any{"publish", s.ns + durableChannel, ""},
			fix: "grant the ACL user +publish on the channel " + s.ns + durableChannel + ": the durability wait covers the record's last write through it"})
	}
	switch s.durable.mode {
	case DurabilityReplicas:
		caps = append(caps, capability{name: "WAIT", args: []any{"wait", 0, 1}, fix: "grant the ACL user +wait, or leave out Config.Durability"})
	case DurabilityAOF:
		caps = append(caps, capability{name: "WAITAOF", args: []any{"waitaof", 0, 0, 1}, fix: "use Redis 7.2 or newer (or Valkey) and grant the ACL user +waitaof, or Config.Durability " + string(DurabilityReplicas)})
	}
	return caps
}

// CheckCapabilities tries, harmlessly, each command the store sends: a
// script (EVAL, EVALSHA, and EVALSHA_RO where the server knows it), the
// replay read's HMGET, and the durability wait its Config asks for (WAIT
// or WAITAOF, after a PUBLISH), on the
// server (on every primary of a Cluster). It returns a *CapabilityError
// naming each one the server does not know or refuses, with what to do,
// so that a server without scripting is refused at startup instead of on
// the first operation. Other errors mean the server could not be asked.
func (s *Store) CheckCapabilities(ctx context.Context) error {
	check := func(ctx context.Context, c redis.UniversalClient, addr string) error {
		var missing []string
		for _, cp := range s.capabilities() {
			err := c.Do(ctx, cp.args...).Err()
			switch {
			case err == nil || errors.Is(err, redis.Nil):
			case cp.optional && redis.HasErrorPrefix(err, "unknown command"):
			case isNoScript(err): // EVAL failed to cache it: reported there
			default:
				var re redis.Error
				if !errors.As(err, &re) {
					return fmt.Errorf("redisstore: check the capabilities of %s: %w", addr, err)
				}
				missing = append(missing, fmt.Sprintf("%s: the server answered %q: %s", cp.name, err.Error(), cp.fix))
			}
		}
		if len(missing) > 0 {
			return &CapabilityError{Addr: addr, Missing: missing}
		}
		return nil
	}
	return s.forEachPrimary(ctx, check)
}
