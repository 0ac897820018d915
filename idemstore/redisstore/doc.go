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
// The store takes a redis.UniversalClient, so a standalone server,
// Sentinel and Cluster all work: every script touches exactly one key.
package redisstore
