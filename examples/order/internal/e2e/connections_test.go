package e2e_test

// The worker's HTTP server against a client that hoards connections
// (issue 31): the order system's worker with its default bounds, on a real
// Temporal server and Redis.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/examples/order"
)

// TestWorkerServesAFreshClientWhileOneHoldsIdleConnections: one client
// opens 600 connections, more than -http-max-conns (512), sends a request
// on each and leaves them idle; a fresh client still gets /healthz within
// 1 s. (The first 512 used to be held for the idle timeout, 60 s, and
// every other client waited to be accepted.)
func TestWorkerServesAFreshClientWhileOneHoldsIdleConnections(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.serve(order.GatewayConfig{}, 0)
	addr := strings.TrimPrefix(a.base, "http://")

	conns := make([]net.Conn, 600)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns[i] = c
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
	}
	var answered atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return // not served within 2 s, or closed to make room
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			answered.Add(1)
		})
	}
	wg.Wait()
	t.Logf("the hoarder's 600 requests: %d answered", answered.Load())

	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Get(a.base + "/healthz")
	if err != nil {
		t.Fatalf("a fresh client while another holds 600 connections: %v after %v", err, time.Since(start))
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a fresh client: %d", resp.StatusCode)
	}
}
