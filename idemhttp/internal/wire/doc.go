// Package wire holds the middleware's parsers of what comes over the wire,
// the Idempotency-Key header and the canonical form of a JSON body, with
// no dependency beyond the standard library, so that fuzzing them builds
// only them (a fuzz build instruments every package it links). Package
// idemhttp re-exports them; use that.
package wire
