package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/worker"
)

// Dial connects to Temporal with c's TemporalClientOptions; the error,
// prefixed with command, says which flags to check.
func Dial(ctx context.Context, c worker.Config, command string) (client.Client, error) {
	opts, err := c.TemporalClientOptions()
	if err != nil {
		return nil, err
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: Temporal at %s is not reachable (check -temporal-address and the TLS flags): %w", command, opts.HostPort, err)
	}
	return tc, nil
}

// OpenStore connects to c's Redis (RedisURL, KeyNamespace) for an
// operator command, and returns the store and the function that closes
// its client.
func OpenStore(c worker.Config) (*redisstore.Store, func() error, error) {
	opts, err := worker.ParseRedisURL(c.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewUniversalClient(opts)
	store, err := redisstore.New(redisstore.Config{Client: rdb, Namespace: c.KeyNamespace, CommandTimeout: 5 * time.Second})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return store, rdb.Close, nil
}

// Digester is the digester of the operator commands: the secret of
// ONCEFLOW_SECRET (and ONCEFLOW_SECRET_VERSION), or with dev a -dev
// worker's public worker.DevSecret.
func Digester(getenv func(string) string, dev bool) (*onceflow.Digester, error) {
	secret, version := getenv("ONCEFLOW_SECRET"), 1
	if v := getenv("ONCEFLOW_SECRET_VERSION"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("ONCEFLOW_SECRET_VERSION must be a positive integer, got %q", v)
		}
		version = n
	}
	if secret == "" {
		if !dev {
			return nil, errors.New("set ONCEFLOW_SECRET to the workers' secret (or pass -dev for a -dev worker's records): keys are digested with it")
		}
		secret = worker.DevSecret
	}
	return onceflow.NewDigester([]byte(secret), version)
}
