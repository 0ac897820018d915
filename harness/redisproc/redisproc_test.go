package redisproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// A StartIn server keeps what it acknowledged across a stop and a kill:
// the next StartIn on the directory loads the append-only file.
func TestStartInKeepsItsData(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	ctx := context.Background()
	for i, stop := range []string{"close", "kill"} {
		srv, err := StartIn(dir)
		if errors.Is(err, ErrNotInstalled) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		if i > 0 {
			if got, err := rdb.Get(ctx, "k0").Result(); err != nil || got != "v" {
				t.Fatalf("after a %s the record is %q, %v; want it kept", stop, got, err)
			}
		}
		if err := rdb.Set(ctx, "k"+string(rune('0'+i)), "v", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		_ = rdb.Close()
		if stop == "kill" {
			srv.Kill()
		}
		srv.Close()
	}
	srv, err := StartIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	if n, err := rdb.Exists(ctx, "k0", "k1").Result(); err != nil || n != 2 {
		t.Fatalf("after a SIGKILL %d of 2 keys are left (%v): appendfsync always keeps every acknowledged write", n, err)
	}
}

// A StartArgs server runs with its config file and arguments, a later
// argument winning, and Restart brings it back on its port with them,
// empty (it keeps nothing on disk unless told to); Close keeps its
// directory, the caller's.
func TestStartArgsRestartsWithItsArguments(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	srv, err := StartArgs(dir, 0, "maxmemory-policy allkeys-lru\n", "--maxmemory-policy", "noeviction", "--hz", "17")
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	check := func(when string) {
		t.Helper()
		got, err := rdb.ConfigGet(ctx, "*").Result()
		if err != nil || got["maxmemory-policy"] != "noeviction" || got["hz"] != "17" {
			t.Fatalf("%s: maxmemory-policy %q, hz %q (%v); want the arguments' noeviction and 17", when, got["maxmemory-policy"], got["hz"], err)
		}
	}
	check("at start")
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	srv.Kill()
	if srv.PID() != 0 {
		t.Fatal("PID after Kill is not 0")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != addr {
		t.Fatalf("restarted on %s, want %s", srv.Addr(), addr)
	}
	check("after Restart")
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("after Restart k exists %d (%v); want the server empty", n, err)
	}
	srv.Close()
	if _, err := os.Stat(filepath.Join(dir, "redis.conf")); err != nil {
		t.Fatalf("Close removed the caller's directory: %v", err)
	}
}
