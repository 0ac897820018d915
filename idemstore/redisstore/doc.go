// Package redisstore implements driver.Store on Redis: one hash per
// record under
//
//	<namespace>:idem:v1:d<digestVersion>:<operationCode>:{<scopeDigest>}
//
// and one Lua script per operation. Every lease decision uses the Redis
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
//	redis-cli --eval lua/gen/inspect.lua 'onceflow:idem:v1:d1:charge-payment:{<scope digest>}'
//
// answers "12\0<now ms>\0-2\0" (NOT_FOUND) for a key that holds no record.
// The reply format is described in lua/record.lua.
//
// Certainty follows the seed design: any transport error from a script
// that may write is driver.Indeterminate, from INSPECT
// driver.Unavailable. go-redis re-sends a command after EOF (MaxRetries,
// 3 by default), which can run a script again after its reply was lost;
// every script is safe to re-run, so that costs no second effect. A
// NOSCRIPT answer (restart, failover, SCRIPT FLUSH) sends the script whole
// once.
//
// Every script checks the whole record against one schema
// (internal/schema, rendered into the scripts and used by the decoder;
// where package driver states a rule, such as an owner's form, a codec or
// driver.MaxReasonLen, the schema uses driver's) before it decides or
// writes anything: a corrupt record is refused with an
// *driver.CorruptRecordError naming the field, never changed. A stored
// response carries a CRC-32C that every replay checks. INSPECT is declared
// no-writes, so it runs on replicas and while writes are paused.
//
// The store takes a redis.UniversalClient, so a standalone server,
// Sentinel and Cluster all work: every script touches exactly one key.
// Build the client with ContextTimeoutEnabled; a client without it is
// guarded so that no call outlives its context (see Config.Client). Run
// Redis with maxmemory-policy noeviction (CheckEvictionPolicy).
package redisstore
