package redisstore

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrUnsupportedClient: Config.Client is a kind of client the store
// cannot keep its promises on. Today that is *redis.Ring.
var ErrUnsupportedClient = errors.New("redisstore: unsupported Redis client")

// ringRefusal says why a *redis.Ring is refused and what to use instead.
const ringRefusal = "Config.Client is a *redis.Ring: a ring picks a record's server by hashing its key on the client, " +
	"so when the ring's membership changes (a shard added or removed, or marked down by the ring's health check and up again) " +
	"the same record is read and written on another server, which does not hold it, and a second attempt runs the effect again; " +
	"use a *redis.ClusterClient (the servers own the slots and redirect with MOVED/ASK), " +
	"or a *redis.Client on one server or from redis.NewFailoverClient (Sentinel)"

// checkClient refuses a client the store cannot be safe on (see
// ErrUnsupportedClient).
func checkClient(c redis.UniversalClient) error {
	if _, ok := c.(*redis.Ring); ok {
		return fmt.Errorf("%w: %s", ErrUnsupportedClient, ringRefusal)
	}
	return nil
}
