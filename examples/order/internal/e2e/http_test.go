package e2e_test

// The worker's HTTP server under slow and oversized requests, on the
// order API a real worker serves.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/worker"
)

// TestOrderAPIBoundsSlowAndOversizedRequests: POST /orders with
// Expect: 100-continue and a body over the limit gets its 413 problem
// first, never a "100 Continue"; an order whose body trickles in is cut
// off at the read timeout; an idle keep-alive is closed; none of them
// places an order.
func TestOrderAPIBoundsSlowAndOversizedRequests(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "sqlite:"+t.TempDir()+"/ledger.db")
	a.configure = func(c *worker.Config) {
		c.HTTPReadTimeout, c.HTTPIdleTimeout = 500*time.Millisecond, 500*time.Millisecond
	}
	a.serve(order.GatewayConfig{}, 0)
	addr := strings.TrimPrefix(a.base, "http://")
	conn := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c, bufio.NewReader(c)
	}
	head := func(key string, length int, extra string) string {
		return fmt.Sprintf("POST /orders HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s-%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n",
			addr, a.key, key, a.sku, length, extra)
	}

	c, br := conn()
	if _, err := io.WriteString(c, head("k-expect", 2<<20, "Expect: 100-continue\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("Expect: 100-continue with 2 MiB: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	var p idemhttp.Problem
	if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(body, &p) != nil || p.Type != idemhttp.ProblemBodyTooLarge {
		t.Fatalf("Expect: 100-continue with 2 MiB: the first answer is %d %s, want the 413 problem", resp.StatusCode, body)
	}

	c, br = conn()
	text := a.orderBody()
	if _, err := io.WriteString(c, head("k-trickle", len(text), "")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go func(c net.Conn) { // a byte every 50ms: the whole body would take seconds
		for i := range len(text) {
			if _, err := c.Write([]byte{text[i]}); err != nil {
				return // cut off
			}
			time.Sleep(50 * time.Millisecond)
		}
	}(c)
	if resp, err := http.ReadResponse(br, nil); err == nil && resp.StatusCode < 300 {
		t.Fatalf("a trickled order was taken after %v: %d", time.Since(start), resp.StatusCode)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the trickled order was cut off only after %v", took)
	}

	c, br = conn()
	if _, err := fmt.Fprintf(c, "GET /orders/no-such-order HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, a.key); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET: %v %v", resp, err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	if _, err := br.Peek(1); err != io.EOF {
		t.Fatalf("an idle keep-alive: %v, want it closed by the worker", err)
	}

	if rows := a.orders(); len(rows) != 0 {
		t.Fatalf("refused requests placed orders: %+v", rows)
	}
}
