package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore/driver"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// Leases run on Redis' clock, never on the worker's (issue 35, "Skewed
// clocks"). The tests below prove it of the store; docs/chaos.md#skewed-clocks
// says what they do not prove.

// clockWords are what an ARGV line of a script's header would say if the
// argument were a reading of the client's clock.
var clockWords = regexp.MustCompile(`(?i)\b(time|now|clock|timestamp|epoch|deadline|until|expires?|at)\b`)

// TestScriptHeadersTakeNoClientTime: no script takes the client's time
// as an argument. Every ARGV of every script's header is an identity, a
// state, a payload, a duration (a lease, a retention, a TTL, in ms, a
// bounded call's budget in µs) or a reading of Redis' own clock that TIME
// served (a bounded call's, "served:"); the only clock a script reads is
// redis.call('TIME'), inside it.
func TestScriptHeadersTakeNoClientTime(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	argv := regexp.MustCompile(`ARGV\[\d+\]\s+(.*?)(\s{2,}ARGV\[|$)`)
	scripts, described := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		header := 0
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "-- ARGV[") {
				continue
			}
			header++
			for rest := strings.TrimPrefix(line, "-- "); rest != ""; {
				m := argv.FindStringSubmatchIndex(rest)
				if m == nil {
					break
				}
				desc := rest[m[2]:m[3]]
				described++
				// A "served:" argument is a reading of Redis' own clock
				// that TIME returned to the store (a bounded call's, see
				// bound.go): TestScriptArgumentsCarryNoClientTime checks
				// that every one sent was served.
				if clockWords.MatchString(desc) && !strings.HasPrefix(desc, "served: ") {
					t.Errorf("%s: ARGV %q reads like a time: a script must read the clock with TIME, not take the client's", f, desc)
				}
				rest = rest[m[3]:]
				rest = strings.TrimLeft(rest, " ")
			}
		}
		if header > 0 {
			scripts++
		}
		for _, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "--")
			if strings.Contains(code, "ARGV") && clockWords.MatchString(code) {
				t.Errorf("%s: %q takes an argument into a clock computation", f, strings.TrimSpace(line))
			}
		}
	}
	if scripts != 5 || described < 35 {
		t.Fatalf("%d scripts with an ARGV header, %d ARGV descriptions read; want claim, transition, renew, release and resolve (inspect takes none) and at least 35", scripts, described)
	}
}

// argHook records every argument of every script call.
type argHook struct {
	mu      sync.Mutex
	scripts map[string]bool
	args    []string
	// served holds the numbers of nine digits or more the server's
	// replies carried (its times among them): an argument may send one
	// back for a script to compare (a renewal's and a completion's m, as
	// the start left it), which is the server's clock, not the client's.
	served map[string]bool
	// times holds the readings TIME served, and bounded counts the
	// script arguments that sent one back (a bounded call's).
	times   map[string]bool
	bounded int
}

// longNumber finds the numbers a time could be.
var longNumber = regexp.MustCompile(`\d{9,}`)

func (h *argHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *argHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		err := next(ctx, cmd)
		h.serve(cmd)
		return err
	}
}
func (h *argHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.note(c)
		}
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.serve(c)
		}
		return err
	}
}

// serve notes the long numbers of a reply.
func (h *argHook) serve(cmd redis.Cmder) {
	var texts []string
	switch c := cmd.(type) {
	case *redis.Cmd:
		switch v := c.Val().(type) {
		case string:
			texts = append(texts, v)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					texts = append(texts, s)
				}
			}
		}
	case *redis.StringSliceCmd:
		texts = c.Val()
	case *redis.TimeCmd:
		// The reading a bounded call sends back (bound.go).
		if c.Err() == nil {
			us := strconv.FormatInt(c.Val().UnixMicro(), 10)
			texts = append(texts, us)
			h.mu.Lock()
			h.times[us] = true
			h.mu.Unlock()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range texts {
		for _, n := range longNumber.FindAllString(t, -1) {
			h.served[n] = true
		}
	}
}

func (h *argHook) note(cmd redis.Cmder) {
	args := cmd.Args()
	switch cmd.Name() {
	case "evalsha", "evalsha_ro", "eval", "eval_ro":
	default:
		return
	}
	if len(args) < 3 {
		return
	}
	n, _ := strconv.Atoi(fmt.Sprint(args[2]))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scripts[fmt.Sprint(args[1])] = true
	for _, a := range args[3+n:] {
		var v string
		switch a := a.(type) {
		case string:
			v = a
		case []byte:
			v = string(a)
		default:
			v = fmt.Sprint(a)
		}
		// A number the server sent before this call is its own time
		// sent back, not a reading of the client's clock.
		h.args = append(h.args, longNumber.ReplaceAllStringFunc(v, func(n string) string {
			if h.served[n] {
				if h.times[n] {
					h.bounded++
				}
				return "(served)"
			}
			return n
		}))
	}
}

// TestScriptArgumentsCarryNoClientTime runs the whole store contract
// suite (every script, every path) and checks every script argument it
// sent: none is a reading of the client's clock (a number within two days
// of now, in seconds, milliseconds or microseconds), but for a number the
// server sent in an earlier reply (the times in the m a renewal or a
// completion sends back for the script to compare with the stored one).
func TestScriptArgumentsCarryNoClientTime(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	hook := &argHook{scripts: map[string]bool{}, served: map[string]bool{}, times: map[string]bool{}}
	client.AddHook(hook)
	s, err := redisstore.New(redisstore.Config{Client: client, OmitShebang: true, CommandTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	t.Run("contract", func(t *testing.T) {
		storetest.Run(t, storetest.Harness{NewStore: func(*testing.T) driver.Store { return s }})
	})
	ended := time.Now()
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.scripts) < 6 {
		t.Fatalf("the suite sent %d scripts, fewer than the store's 6", len(hook.scripts))
	}
	if hook.bounded == 0 {
		t.Fatal("no script call sent a reading of Redis' clock back: the claims and transitions went unbounded")
	}
	window := 48 * time.Hour
	lo, hi := began.Add(-window), ended.Add(window)
	for _, a := range hook.args {
		for _, digits := range longNumber.FindAllString(a, -1) {
			v, err := strconv.ParseInt(digits, 10, 64)
			if err != nil {
				continue
			}
			for _, unit := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
				at := time.Unix(0, 0).Add(time.Duration(v) * unit)
				if v <= int64(time.Duration(1<<62)/unit) && at.After(lo) && at.Before(hi) {
					t.Errorf("a script argument carries %s, a reading of the client's clock (%v): scripts must read TIME instead", digits, at)
				}
			}
		}
	}
}

// TestLeaseRunsOnServerTime: with the server's clock minutes off the
// client's, a lease is exactly as long as asked on the server's clock,
// lives and expires by it alone, and what the store tells the executor
// (LeaseRemaining) is a duration on that clock, whatever the client's
// reads.
func TestLeaseRunsOnServerTime(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-10 * time.Minute, 10 * time.Minute} {
		t.Run("server "+skew.String(), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			mr := miniredis.RunT(t)
			client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = client.Close() })
			s, err := redisstore.New(redisstore.Config{Client: client, OmitShebang: true, CommandTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// miniredis' TIME reads this and stands still until set again:
			// the server's clock is in the test's hands.
			t0 := time.Now().Add(skew).Truncate(time.Millisecond)
			mr.SetTime(t0)
			f := storetest.NewFixture()
			f.Lease = 3 * time.Second

			nonce := onceflow.NewNonce()
			out, err := s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), nonce))
			acq, ok := out.(driver.Acquired)
			if err != nil || !ok {
				t.Fatalf("claim = %T, %v", out, err)
			}
			if !acq.Record.ServerTime.Equal(t0) || !acq.Record.LeaseUntil.Equal(t0.Add(f.Lease)) {
				t.Fatalf("ServerTime %v, LeaseUntil %v; want the server's clock %v and it plus the lease", acq.Record.ServerTime, acq.Record.LeaseUntil, t0)
			}
			if got := acq.Record.LeaseRemaining(); got != f.Lease {
				t.Fatalf("LeaseRemaining = %v, want %v: the lease left is not measured on the server's clock", got, f.Lease)
			}

			// A second owner: refused while the server's clock is inside
			// the lease, whatever the client's clock says ...
			mr.SetTime(t0.Add(f.Lease - time.Millisecond))
			out, err = s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
			in, ok := out.(driver.InProgress)
			if err != nil || !ok || in.Record.LeaseRemaining() != time.Millisecond {
				t.Fatalf("claim inside the lease by the server's clock = %T %+v, %v; want InProgress with 1ms left", out, out, err)
			}

			// ... renewing moves it on the server's clock ...
			ren, err := s.Renew(ctx, driver.RenewRequest{Ref: f.Ref, Operation: f.Operation, Owner: acq.Ownership.Owner,
				Nonce: nonce, Lease: f.Lease, Retention: f.TTL})
			renewed, ok := ren.(driver.Renewed)
			if err != nil || !ok || renewed.Record.LeaseRemaining() != f.Lease {
				t.Fatalf("renew = %T %+v, %v; want Renewed with the whole lease left", ren, ren, err)
			}

			// ... and it is taken over once the server's clock passes it.
			mr.SetTime(t0.Add(2 * f.Lease))
			out, err = s.ClaimStart(ctx, f.ClaimStart(onceflow.NewOwner(), onceflow.NewNonce()))
			took, ok := out.(driver.TakenOver)
			if err != nil || !ok || !took.EffectUnknown {
				t.Fatalf("claim past the lease by the server's clock = %T %+v, %v; want an uncertain TakenOver", out, out, err)
			}
		})
	}
}
