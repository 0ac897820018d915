// Package worker assembles a onceflow worker: the Redis client (standalone,
// Sentinel or Cluster), the idempotency store and executor, the activity
// wrapper, a Temporal client and worker, and the /healthz and /readyz
// endpoints. Config documents every setting and its default; ParseFlags
// reads it from flags and environment variables as cmd/worker does.
//
// Its tests include the end-to-end suite, which runs against a real
// in-process Temporal server and a real redis-server.
package worker
