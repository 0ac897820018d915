package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/record.lua
	recordLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/transition.lua
	transitionLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/resolve.lua
	resolveLua string
)

// script is one embedded Lua script with the shared helpers prepended.
type script struct {
	name string
	*redis.Script
}

// scriptSet is every script, built one way.
type scriptSet struct {
	claim, transition, renew, release, inspect, resolve script
}

func (ss *scriptSet) all() []script {
	return []script{ss.claim, ss.transition, ss.renew, ss.release, ss.inspect, ss.resolve}
}

// newScriptSet builds the scripts, with or without their shebang lines.
func newScriptSet(shebang bool) *scriptSet {
	mk := func(name, body string) script {
		return script{name: name, Script: redis.NewScript(scriptSource(body, shebang))}
	}
	return &scriptSet{
		claim:      mk("claim", claimLua),
		transition: mk("transition", transitionLua),
		renew:      mk("renew", renewLua),
		release:    mk("release", releaseLua),
		inspect:    mk("inspect", inspectLua),
		resolve:    mk("resolve", resolveLua),
	}
}

// scriptSource is what the server runs for a script body: its shebang line
// (the Redis 7 "#!lua" header, with its flags; left out for servers that
// do not know it), then the code generated from the schema and the helpers
// of record.lua, which go where the body says "--@prelude" (code above runs
// without paying for them) or first, then the body, with the macros
// expanded and the reply codes inlined.
func scriptSource(body string, shebang bool) string {
	_, helpers := splitShebang(recordLua)
	prelude := luaSchema() + helpers
	line, rest := splitShebang(body)
	src := "local find = string.find\n"
	if head, tail, ok := strings.Cut(rest, "\n--@prelude\n"); ok {
		src += head + "\n" + prelude + "\n" + tail
	} else {
		src += prelude + "\n" + rest
	}
	src = inlineReplyCodes(expandMacros(src))
	if shebang {
		src = line + "\n" + src
	}
	return src
}

// splitShebang returns a script's "#!lua…" first line and the script with
// that line turned into a comment.
func splitShebang(src string) (line, rest string) {
	line, body, _ := strings.Cut(src, "\n")
	if !strings.HasPrefix(line, "#!") {
		return "", src
	}
	return line, "-- " + line + "\n" + body
}

var (
	redis7Scripts = newScriptSet(true)
	legacyScripts = newScriptSet(false)
)

// LoadScripts loads every script into the server's script cache (on every
// shard of a Cluster). It is optional: a call that finds its script missing
// loads it then. Call it at startup to surface a misconfigured server early.
func (s *Store) LoadScripts(ctx context.Context) error {
	for _, sc := range s.scripts.all() {
		if err := sc.Load(ctx, s.client).Err(); err != nil {
			return fmt.Errorf("redisstore: load script %s: %w", sc.name, err)
		}
	}
	return nil
}

// run calls EVALSHA and, when the server does not know the script (restart,
// failover, SCRIPT FLUSH), sends it whole with EVAL once. NOSCRIPT proves the
// script did not run, so the retry cannot apply anything twice.
func (s *Store) run(ctx context.Context, sc script, key string, args ...any) (any, error) {
	v, err := sc.EvalSha(ctx, s.client, []string{key}, args...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		s.reloads.Add(1)
		s.logger.DebugContext(ctx, "onceflow: script not cached on the server; sending it whole", "script", sc.name)
		v, err = sc.Eval(ctx, s.client, []string{key}, args...).Result()
	}
	return v, err
}
