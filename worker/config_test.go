package worker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/harness/redisproc"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/worker"
)

func TestConfigValidationNamesTheSetting(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		cfg  worker.Config
		want string
	}{
		"no secret":                             {worker.Config{}, "openssl rand -hex 32"},
		"a secret shorter than 32 bytes":        {worker.Config{Secret: []byte("short")}, "openssl rand -hex 32"},
		"31 bytes":                              {worker.Config{Secret: []byte(strings.Repeat("s", 31))}, "ONCEFLOW_SECRET"},
		"bad redis url":                         {worker.Config{Secret: secret, RedisURL: "http://x"}, "RedisURL"},
		"lease":                                 {worker.Config{Secret: secret, Lease: 2 * time.Hour, ReplayTTL: time.Hour}, "-lease"},
		"lease too short for the redis timeout": {worker.Config{Secret: secret, Lease: time.Second}, "-redis-timeout"},
		"negative stop timeout":                 {worker.Config{Secret: secret, StopTimeout: -time.Second}, "StopTimeout"},
		"certificate without its key":           {worker.Config{Dev: true, TemporalTLSCertFile: "c.pem"}, "-temporal-tls-key"},
		"negative read timeout":                 {worker.Config{Dev: true, HTTPReadTimeout: -time.Second}, "-http-read-timeout"},
		"negative idle timeout":                 {worker.Config{Dev: true, HTTPIdleTimeout: -time.Second}, "-http-idle-timeout"},
		"header timeout over the read timeout":  {worker.Config{Dev: true, HTTPReadHeaderTimeout: 2 * time.Second, HTTPReadTimeout: time.Second}, "-http-read-header-timeout"},
		"negative connection limit":             {worker.Config{Dev: true, HTTPMaxConns: -1}, "-http-max-conns"},
		"negative idle budget":                  {worker.Config{Dev: true, HTTPMaxIdleConns: -1}, "-http-max-idle-conns"},
		"negative per-client limit":             {worker.Config{Dev: true, HTTPMaxConnsPerClient: -1}, "-http-max-conns-per-client"},
		"negative header limit":                 {worker.Config{Dev: true, HTTPMaxHeaderBytes: -1}, "-http-max-header-bytes"},
		"negative body limit":                   {worker.Config{Dev: true, HTTPMaxBodyBytes: -1}, "-http-max-body-bytes"},
		"negative active requests":              {worker.Config{Dev: true, HTTPMaxActiveRequests: -1}, "HTTPMaxActiveRequests"},
		"a client's active requests over all":   {worker.Config{Dev: true, HTTPMaxActiveRequests: 4, HTTPMaxActiveRequestsPerClient: 8}, "HTTPMaxActiveRequestsPerClient"},
		"negative body rate":                    {worker.Config{Dev: true, HTTPMinBodyRate: -1}, "HTTPMinBodyRate"},
		"negative body start timeout":           {worker.Config{Dev: true, HTTPBodyStartTimeout: -time.Second}, "HTTPBodyStartTimeout"},
		"unknown durability":                    {worker.Config{Dev: true, RedisDurability: "quorum"}, "-redis-durability"},
		"replicas without durability":           {worker.Config{Dev: true, RedisDurableReplicas: 2}, "-redis-durable-replicas"},
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
	// The defaults New fills in are the ones the fields' comments state,
	// and DefaultConfig returns them.
	if c := w.Config(); c.TemporalAddress != "localhost:7233" || c.Namespace != "default" || c.TaskQueue != "onceflow" || string(c.Secret) != worker.DevSecret ||
		c.RedisURL != "redis://localhost:6379/0" || c.KeyNamespace != "onceflow" || c.HTTPAddr != "127.0.0.1:8080" || c.SecretVersion != 1 ||
		c.Lease != 30*time.Second || c.ReplayTTL != 24*time.Hour || c.FailureRetention != 24*time.Hour || c.RedisCommandTimeout != 200*time.Millisecond ||
		c.StopTimeout != 30*time.Second || c.OutcomeTimeout != 10*time.Second || c.Logger == nil ||
		c.HTTPReadHeaderTimeout != 5*time.Second || c.HTTPReadTimeout != 30*time.Second ||
		c.HTTPIdleTimeout != 60*time.Second || c.HTTPMaxConns != 512 || c.HTTPMaxBodyBytes != 1<<20 ||
		c.HTTPMaxIdleConns != 256 || c.HTTPMaxHeaderBytes != 64<<10 || c.HTTPMaxConnsPerClient != 0 {
		t.Fatalf("defaults = %+v", c)
	}
	if c := w.Config(); c.HTTPBodyStartTimeout != 2*time.Second || c.HTTPMinBodyRate != 1024 ||
		c.HTTPMaxActiveRequests != 256 || c.HTTPMaxActiveRequestsPerClient != 64 ||
		!slices.Equal(c.HTTPProbeRoutes, []string{"GET /healthz", "GET /readyz", "GET /metrics"}) {
		t.Fatalf("the HTTP guards' defaults = %+v", c)
	}
	got, want := worker.DefaultConfig(), w.Config()
	if got.Logger == nil || got.Secret != nil || got.Dev {
		t.Fatalf("DefaultConfig: Logger %v, Secret %q, Dev %v; want a Logger, no Secret, not Dev", got.Logger, got.Secret, got.Dev)
	}
	got.Logger, want.Logger, want.Secret, want.Dev = nil, nil, nil, false
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DefaultConfig() = %+v\nwant what New fills in: %+v", got, want)
	}
	// Each call returns its own probe routes: changing one's changes no
	// other Config's.
	worker.DefaultConfig().HTTPProbeRoutes[0] = "GET /changed"
	if r := worker.DefaultConfig().HTTPProbeRoutes[0]; r != "GET /healthz" {
		t.Fatalf("DefaultConfig's probe routes are shared: %q", r)
	}
	// A smaller HTTPMaxConns lowers the active requests' defaults, which
	// leave connections free for new clients.
	if w, err := worker.New(worker.Config{Dev: true, HTTPMaxConns: 40}); err != nil || w.Config().HTTPMaxActiveRequests != 20 || w.Config().HTTPMaxActiveRequestsPerClient != 20 {
		t.Fatalf("HTTPMaxConns 40: %v %+v", err, w)
	}
	// A read timeout shorter than the header timeout's default bounds the
	// headers too; a short secret is a -dev worker's business; 32 bytes
	// are enough outside it.
	if w, err := worker.New(worker.Config{Dev: true, Secret: []byte("short"), HTTPReadTimeout: time.Second}); err != nil || w.Config().HTTPReadHeaderTimeout != time.Second {
		t.Fatalf("read timeout 1s: %v", err)
	}
	if _, err := worker.New(worker.Config{Secret: secret}); err != nil {
		t.Fatalf("a 32-byte secret: %v", err)
	}
}

// secret is a secret of the documented minimum length.
var secret = []byte(strings.Repeat("s", 32))

// Without a Logger the worker logs JSON lines on standard error at Info and
// above, as a worker's user expects (not nothing).
func TestDefaultLoggerIsJSONOnStderrAtInfo(t *testing.T) {
	// Not parallel: it replaces os.Stderr while no other test runs.
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = wr
	w, err := worker.New(worker.Config{Dev: true})
	os.Stderr = saved
	if err != nil {
		t.Fatal(err)
	}
	log := w.Config().Logger
	log.Debug("onceflow test: not shown")
	log.Info("onceflow test: shown", "n", 1)
	_ = wr.Close()
	sc := bufio.NewScanner(r)
	var lines []map[string]any
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		lines = append(lines, line)
	}
	_ = r.Close()
	if len(lines) != 1 || lines[0]["msg"] != "onceflow test: shown" || lines[0]["level"] != "INFO" || lines[0]["n"] != 1.0 {
		t.Fatalf("stderr got %v, want the Info line only, as JSON", lines)
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
			Secret: secret, RedisURL: "redis://" + srv.Addr() + "/0", AllowEviction: allow,
			TemporalAddress: "127.0.0.1:1", HTTPAddr: "off", // Temporal is never reached
			Logger: slog.New(slog.DiscardHandler),
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

// TestWorkerWarnsOrRefusesByPersistence: on a Redis with appendonly no,
// which loses every record on a restart, the worker starts with a warning
// that names the setting, or, with RequirePersistence, refuses to start.
func TestWorkerWarnsOrRefusesByPersistence(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // appendonly no
	run := func(require bool) (string, error) {
		var logs strings.Builder
		w, err := worker.New(worker.Config{
			Secret: secret, RedisURL: "redis://" + srv.Addr() + "/0", RequirePersistence: require,
			TemporalAddress: "127.0.0.1:1", HTTPAddr: "off", // Temporal is never reached
			Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		err = w.Run(ctx)
		return logs.String(), err
	}
	if _, err := run(true); !errors.Is(err, redisstore.ErrPersistence) || !strings.Contains(err.Error(), "appendonly") ||
		!strings.Contains(err.Error(), "-require-persistence") {
		t.Fatalf("err = %v, want a refusal naming appendonly and -require-persistence", err)
	}
	logs, err := run(false)
	if err == nil || errors.Is(err, redisstore.ErrPersistence) {
		t.Fatalf("without RequirePersistence: err = %v, want it to go on (and fail to reach Temporal)", err)
	}
	if !strings.Contains(logs, "Redis may lose acknowledged idempotency records") || !strings.Contains(logs, "appendonly") {
		t.Fatalf("without RequirePersistence the log has no warning naming appendonly:\n%s", logs)
	}
}

// TestWorkerRefusesARedisWithoutScripting: a server without Lua scripting
// is refused at startup, naming what is missing; before, the worker
// started and every operation failed.
func TestWorkerRefusesARedisWithoutScripting(t *testing.T) {
	t.Parallel()
	srv, err := redisproc.StartArgs(t.TempDir(), 0, "rename-command EVAL eval-disabled-for-the-test\nrename-command EVALSHA evalsha-disabled-for-the-test\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	w, err := worker.New(worker.Config{
		Secret: secret, RedisURL: "redis://" + srv.Addr() + "/0",
		TemporalAddress: "127.0.0.1:1", HTTPAddr: "off", // Temporal is never reached
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := w.Run(ctx); !errors.Is(err, redisstore.ErrMissingCapability) || !strings.Contains(err.Error(), "Lua scripting (EVAL)") {
		t.Fatalf("err = %v; want a refusal naming Lua scripting", err)
	}
}

// syncWriter serializes the writes of concurrent log calls.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestMain checks that no goroutine (a server, a poller) outlived the
// tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.MainM(m)) }
