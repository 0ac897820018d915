package redisproc

import (
	"context"
	"errors"
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
