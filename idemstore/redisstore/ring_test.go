package redisstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// TestRingIsRefused: New refuses a *redis.Ring, saying why and what to
// use instead.
func TestRingIsRefused(t *testing.T) {
	t.Parallel()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
	t.Cleanup(func() { _ = ring.Close() })
	_, err := redisstore.New(redisstore.Config{Client: ring})
	if !errors.Is(err, redisstore.ErrUnsupportedClient) {
		t.Fatalf("err = %v, want it to match %v", err, redisstore.ErrUnsupportedClient)
	}
	for _, want := range []string{"*redis.Ring", "membership", "runs the effect again", "*redis.ClusterClient", "NewFailoverClient"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not contain %q", err.Error(), want)
		}
	}
}
