package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// TestRingIsRefused: New refuses a *redis.Ring, saying why and what to
// use instead.
func TestRingIsRefused(t *testing.T) {
	t.Parallel()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
	t.Cleanup(func() { _ = ring.Close() })
	_, err := redisstore.New(redisstore.Config{Client: ring})
	require.ErrorIs(t, err, redisstore.ErrUnsupportedClient)
	for _, want := range []string{"*redis.Ring", "membership", "runs the effect again", "*redis.ClusterClient", "NewFailoverClient"} {
		require.Contains(t, err.Error(), want)
	}
}
