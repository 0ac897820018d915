// Package redisstore implements driver.Store on Redis: one hash per
// record under
//
//	<namespace>:idem:v2:d<digestVersion>:<operationCode>:{<scopeDigest>}
//
// (the scope digest's 32 bytes in unpadded base64url; KeyLayoutVersion
// is the v2, and a store reads the records of its own layout only) and
// one Lua script per operation. Every lease decision uses the Redis
// server's clock (TIME), never the client's. Each script's reply is decoded
// by a decoder of its own into the driver package's typed outcomes (decode.go); an
// unexpected reply is an error, never a guess.
//
// # The scripts
//
// The scripts Redis runs are checked in, whole, as lua/gen/<name>.lua
// (claim, transition, renew, release, inspect, resolve); the store embeds
// them and sends exactly those bytes, turning the "#!lua" first line into
// a comment only for servers that do not know it (Config.OmitShebang).
// Each starts with its shebang line, a "Code generated … DO NOT EDIT" line,
// and a header listing its KEYS, ARGV, replies and reply codes. They are
// generated, never edited: the sources are the script bodies lua/<name>.lua,
// the helpers every script shares, lua/record.lua, and the record schema,
// internal/schema, which the decoder checks replies by too. After editing
// any of them, regenerate with
//
//	go generate ./idemstore/redisstore
//
// (it runs internal/gen); TestGeneratedScriptsAreUpToDate fails until the
// checked-in files match. A generated script runs as it is with redis-cli,
// the key before the comma and the ARGV after it, as its header lists
// them; for instance, from this directory:
//
//	redis-cli --eval lua/gen/inspect.lua 'onceflow:idem:v2:d1:charge-payment:{<scope digest>}'
//
// answers "12\0<now ms>\0-2\0" (NOT_FOUND) for a key that holds no record.
// The reply format is described in lua/record.lua.
//
// What a failed call proves follows the seed design: any transport error
// from a script that may write is onceflow.OutcomeIndeterminate, from
// INSPECT onceflow.OutcomeStoreUnavailable. go-redis re-sends a command after EOF (MaxRetries,
// 3 by default), which can run a script again after its reply was lost;
// every script is safe to re-run, so that costs no second effect. A
// NOSCRIPT answer (restart, failover, SCRIPT FLUSH) sends the script whole
// once.
//
// # What is checked where
//
// One schema, internal/schema (the field rules, the cross-field rules and
// the reply codes), is rendered into the scripts and used by the decoder;
// where package driver states a rule, such as an owner's form, a codec,
// onceflow.MaxReasonLen or no NUL byte in an operation ID or a reason, the
// schema uses driver's.
//
//   - Every request is validated before anything is sent (a
//     *onceflow.Error otherwise): an operation ID or a reason with
//     a NUL byte, which the schema refuses in a stored record, is never
//     written.
//   - A record is one hash: the owner (o), op, the fingerprint (f), the
//     nonce (n), leaseUntil (l), the reason (r) and the response chunks
//     (resp, resp2, …) under their own fields, the owner, fingerprint and
//     nonce as the raw bytes of their hex; and state, attempt, rev,
//     policy, createdAt, updatedAt, uncertain, sum and codec packed into
//     one field, m (schema.MetaField, schema.MetaParts), checked with one
//     pattern match. The hash holds no other field: any other is refused
//     by name, as a stray chunk is.
//   - Every script but the replay fast path (transition, renew, release,
//     inspect, resolve, and claim on any record it does not replay) reads
//     the whole record with one HMGET and checks every field, the
//     cross-field rules (CLAIMED and EXECUTING have a leaseUntil,
//     EXECUTING a nonce, COMPLETED a resp and its sum, no other state a
//     response) and that the hash holds no other field: no response chunk
//     field beyond the response's last chunk and nothing that is not the
//     record's (found by HLEN and, only when the count is off, HKEYS; or
//     a chunk after one shorter than 64
//     bytes), before it decides or writes anything. A record that
//     breaks a rule is answered CORRUPT, naming the field: a
//     *onceflow.Error, and the record is never changed. The
//     scripts do not compare a response with its sum.
//   - A replay is one read command, no script: Claim and ClaimStart first
//     send one HMGET of fp, m (with the state, codec, policy, attempt,
//     rev, createdAt and sum) and the first four response chunks (one more HMGET of the rest
//     for a response over 256 bytes), and check them in Go by the rules
//     the scripts use: a COMPLETED record with the caller's fingerprint,
//     codec and policy, attempt, rev, createdAt and sum valid, chunks whole
//     but the last with none after a missing one, and the response
//     matching its CRC-32C sum. Only such a record is replayed from the
//     read; on any doubt (another state, no record, an empty response,
//     a field that breaks its rule, a record without m) the claim script runs and decides, so
//     a corrupt record is refused by it as before. A read writes nothing.
//     The reply carries no TTL (driver.CompletedReplay's Record.TTL is
//     zero). A client that routes read-only commands to replicas
//     (ClusterOptions.ReadOnly, RouteByLatency, RouteRandomly) may have the
//     read answered by one: a lagging replica shows an older state, which
//     sends the claim to the primary's script, or a COMPLETED record the
//     primary wrote, which does not change until it expires. A fresh
//     operation pays for the read with a round trip that
//     finds nothing, so after 64 reads in a row found nothing to replay a
//     store reads first on every 16th claim only, until a read finds a
//     replay again; claim.lua replays in between, so no outcome changes. The read goes to the key's slot under Cluster, and go-redis
//     answers it from its client-side cache when the client has one
//     (Protocol 3 and ClientSideCacheConfig): a COMPLETED record does not
//     change until it expires, and a cached reply is replayed only when it
//     passes the same checks, so only a record that was COMPLETED when
//     cached is ever served from the cache. Unless
//     Config.NoAutoPipeline, a read that finds another in flight goes
//     through the client's deferred auto-pipeliner, which sends the reads
//     of concurrent claims as one pipeline; the store waits for it until
//     CommandTimeout itself, since go-redis runs a queued command whatever
//     its context says. Bounded claims and transitions ride it too (see
//     "A call's fate is settled at its deadline" below).
//   - The replay fast path of claim.lua (a COMPLETED record with the
//     caller's fingerprint, codec and policy) reads only what it replays:
//     fp, the state, codec and policy (compared with the caller's), m
//     (every part checked by its rule; a record without m goes on to the
//     full check, which names it), and the response
//     joined from resp, resp2, … up to the first missing chunk, refusing a
//     chunk after a missing or short one among the first four. It ignores
//     every other field, broken or not; it writes nothing.
//   - A reply that carries a record is an array: its head (code, time,
//     TTL), the record's fields in schema order as the record keeps them
//     (the owner, fingerprint and nonce raw), and the response; one that
//     carries none is the head alone, one string (lua/record.lua).
//   - The decoder checks the record of every reply by the same field rules
//     and the cross-field rules a reply shows (leaseUntil, nonce, sum; a
//     replay's and a renewal's reply carry, and are checked for, only
//     their fields), and every response a reply carries
//     (a replay, INSPECT) against its CRC-32C sum: bytes that were changed,
//     or lengthened by a stray chunk, are refused as corrupt, never
//     replayed. It cannot see the hash itself, so the chunk rule is the
//     scripts' alone.
//
// INSPECT, the one read-only script, is declared no-writes and sent with
// EVALSHA_RO / EVAL_RO (Redis 7.0+), so it runs on replicas, while writes
// are paused (CLIENT PAUSE WRITE, as a failover does) and when Redis is out
// of memory, cached or not. A server that does not know those commands
// (Redis before 7.0, miniredis) answers "unknown command" to the first
// INSPECT; the store remembers it and sends EVALSHA from then on (see
// Store.Inspect).
//
// # A call's fate is settled at its deadline
//
// CLAIM and TRANSITION carry the latest time on Redis' clock at which
// they may still take effect: a reading of Redis' clock that TIME returned
// to the store, and a budget in µs (bound.go). The budget is how long the
// store's monotonic clock has run since the reading arrived plus what the
// call has left before the store stops waiting for it, less 1,000 ppm of
// drift; Redis read the clock before its reply arrived, so the sum is no
// later than Redis' clock at the call's deadline. A script that finds
// Redis' clock past the sum answers LATE and changes nothing, so a
// bounded call whose reply never came took effect before its deadline or
// never, however late its bytes reach Redis: a stalled connection, a
// queue in go-redis' auto-pipeliner (which is why these scripts may ride
// it). The store never sends its own clock. It reads TIME at LoadScripts
// and every 10 s (one call at a time), and sends calls unbounded, and by
// themselves, while it has no reading it trusts: on a Cluster or a Ring
// (several clocks), with a client without ContextTimeoutEnabled, when
// the local wall clock steps against the monotonic one, when a reading
// disagrees with the last by more than their round trips and the drift
// (Redis' clock set by hand, another server after a failover), and after
// a LATE that the reading says Redis could not have answered yet (the
// reading was wrong: the call is sent again, unbounded). A LATE within
// the bound's margin is an answer: nothing changed
// (onceflow.OutcomeStoreUnavailable). What it rests on: Redis' clock does not
// step back between two readings by more than those allow; the leases
// already run on that clock.
//
// RENEW takes one lease or several, each fenced on its own. On a
// *redis.Client the store sends the renewals that arrive while one is in
// flight as one call of up to 64 leases (renew.go), and the executor ticks
// every lease on one grid, so a busy worker's leases are renewed in a few
// calls per RenewInterval. A Cluster, a guarded client and a durable store
// renew one lease a call.
//
// RENEW and a COMPLETE compare fp and m by equality with the record the
// caller's start left (RenewRequest.Started, CompleteRequest.Started),
// which the executor sends, instead of checking them by their rules, and
// answer without the record the caller holds; a record that differs, or
// a request without it, is checked and answered as described above. The
// store packs what it sends from that record only when the record is the
// caller's EXECUTING one and keeps the schema's rules.
//
// The calls that return only once go-redis has let go of their command
// (a client bounded by the context, not durable) come from a pool, and
// hand go-redis their key and their string arguments from buffers of the
// pooled call rather than as strings, which would each cost an
// allocation: a pointer-shaped argument that go-redis writes by
// MarshalBinary and fmt prints by String (go-redis' key routing, a
// tracing hook's db.statement). A replay read through the client-side
// cache keeps a string key, the only kind the cache caches. A go-redis
// hook that keeps a command after the call returned (to log it later)
// sees its arguments reused by the next call, and should copy what it
// keeps; go-redis' own hooks, redisotel's among them, read a command
// only while it runs.
//
// The store takes a redis.UniversalClient, so a standalone server,
// Sentinel and Cluster all work: every script but a batched RENEW touches
// exactly one key, and a batched RENEW is sent only where that is safe. A
// *redis.Ring is refused (ErrUnsupportedClient): it hashes keys to servers
// on the client, so a change of its membership sends a record to a server
// that does not hold it. Config.Durability makes the writes that matter
// wait for replicas (WAIT, or WAITAOF on Redis 7.2+) before the store
// trusts them, and CheckPersistence reports settings that can lose an
// acknowledged write (durability.go).
// Build the client with ContextTimeoutEnabled; a client without it is
// guarded so that no call outlives its context (see Config.Client). Run
// Redis with maxmemory-policy noeviction (CheckEvictionPolicy).
package redisstore
