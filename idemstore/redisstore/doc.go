// Package redisstore implements idemstore.Store on Redis: one hash per
// record under
//
//	<namespace>:idem:v1:d<digestVersion>:<operationCode>:{<scopeDigest>}
//
// and one embedded Lua script per operation (lua/*.lua, each with a header
// listing its KEYS, ARGV and replies). Every lease decision uses the Redis
// server's clock (TIME), never the client's. Replies are decoded in one
// function into idemstore's typed outcomes; an unexpected reply is an
// error, never a guess.
//
// Certainty follows the seed design: any transport error from a script
// that may write is idemstore.Indeterminate, from INSPECT
// idemstore.Unavailable. go-redis re-sends a command after EOF (MaxRetries,
// 3 by default), which can run a script again after its reply was lost;
// every script is safe to re-run, so that costs no second effect. A
// NOSCRIPT answer (restart, failover, SCRIPT FLUSH) sends the script whole
// once.
//
// Every script checks the whole record against one schema (schema.go,
// rendered into the scripts and used by the decoder) before it decides or
// writes anything: a corrupt record is refused with an
// *idemstore.CorruptRecordError naming the field, never changed. A stored
// response carries a CRC-32C that every replay checks. INSPECT is declared
// no-writes, so it runs on replicas and while writes are paused.
//
// The store takes a redis.UniversalClient, so a standalone server,
// Sentinel and Cluster all work: every script touches exactly one key.
// Build the client with ContextTimeoutEnabled; a client without it is
// guarded so that no call outlives its context (see Config.Client). Run
// Redis with maxmemory-policy noeviction (CheckEvictionPolicy).
package redisstore
