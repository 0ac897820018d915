package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/internal/redistest"
	"github.com/onceflow/onceflow/worker"
)

func TestConfigValidationNamesTheSetting(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		cfg  worker.Config
		want string
	}{
		"no secret":                             {worker.Config{}, "ONCEFLOW_SECRET"},
		"bad redis url":                         {worker.Config{Secret: []byte("s"), RedisURL: "http://x"}, "RedisURL"},
		"lease":                                 {worker.Config{Secret: []byte("s"), Lease: 2 * time.Hour, ReplayTTL: time.Hour}, "-lease"},
		"lease too short for the redis timeout": {worker.Config{Secret: []byte("s"), Lease: time.Second}, "-redis-timeout"},
		"negative stop timeout":                 {worker.Config{Secret: []byte("s"), StopTimeout: -time.Second}, "StopTimeout"},
		"certificate without its key":           {worker.Config{Dev: true, TemporalTLSCertFile: "c.pem"}, "-temporal-tls-key"},
	}
	for name, c := range cases {
		_, err := worker.New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to name %s", name, err, c.want)
		}
	}
	w, err := worker.New(worker.Config{Dev: true})
	if err != nil {
		t.Fatalf("dev config: %v", err)
	}
	if c := w.Config(); c.TemporalAddress != worker.DefaultTemporalAddress || c.TaskQueue != "onceflow" || string(c.Secret) != worker.DevSecret ||
		c.StopTimeout != worker.DefaultStopTimeout || c.OutcomeTimeout != worker.DefaultOutcomeTimeout || c.Logger == nil {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	o, err := worker.ParseRedisURL("redis://:pw@h:6379/3")
	if err != nil || len(o.Addrs) != 1 || o.Addrs[0] != "h:6379" || o.DB != 3 || o.Password != "pw" || o.IsClusterMode || o.MasterName != "" {
		t.Fatalf("standalone: %+v, %v", o, err)
	}
	o, err = worker.ParseRedisURL("redis+sentinel://s1:26379?master_name=main&addr=s2:26379")
	if err != nil || o.MasterName != "main" || len(o.Addrs) != 2 {
		t.Fatalf("sentinel: %+v, %v", o, err)
	}
	o, err = worker.ParseRedisURL("redis+cluster://c1:7000?addr=c2:7001")
	if err != nil || !o.IsClusterMode || len(o.Addrs) != 2 {
		t.Fatalf("cluster: %+v, %v", o, err)
	}
	if _, err := worker.ParseRedisURL("redis+sentinel://s1:26379"); err == nil {
		t.Fatal("sentinel without master_name accepted")
	}
}

// TestWorkerRefusesAnEvictingRedis: a Redis that may evict keys may evict a
// record, which is a lost guarantee; the worker refuses to start on it
// unless told to accept that.
func TestWorkerRefusesAnEvictingRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	if err := redistest.NewClient(t, srv.Addr()).ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	run := func(allow bool) error {
		w, err := worker.New(worker.Config{
			Secret: []byte("s"), RedisURL: "redis://" + srv.Addr() + "/0", AllowEviction: allow,
			TemporalAddress: "127.0.0.1:1", HTTPAddr: "off", // Temporal is never reached
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		return w.Run(ctx)
	}
	if err := run(false); !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), "noeviction") || !strings.Contains(err.Error(), "-allow-eviction") {
		t.Fatalf("err = %v, want a refusal naming noeviction and -allow-eviction", err)
	}
	if err := run(true); err == nil || errors.Is(err, redisstore.ErrEvictionPolicy) {
		t.Fatalf("with AllowEviction: err = %v, want it to go on (and fail to reach Temporal)", err)
	}
}

// TestMain checks that no goroutine (a server, a poller) outlived the
// tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
