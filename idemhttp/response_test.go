package idemhttp_test

import (
	"bytes"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/onceflow/onceflow/idemhttp"
)

// A response the store cannot keep is never sent behind a record left
// ABANDONED. Before, a 200 of about 768 KiB or more (base64 in the stored
// JSON) reached its client, the record was left effect-unknown, and every
// retry got 409 until an operator reopened it.
func TestLargeResponseIsKeptOrRefusedNeverLeftAbandoned(t *testing.T) {
	t.Parallel()
	a := newAPI(t, "")
	var limit atomic.Int64 // what the handler learnt
	answer := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			s, _ := idemhttp.InfoFrom(r.Context())
			limit.Store(int64(s.MaxResponseBytes))
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(bytes.Repeat([]byte{0xff}, n))
		}
	}

	// 900 KiB of bytes that are not UTF-8: kept as they are, replayed.
	a.handler.Store(answer(900 << 10))
	first := a.do("POST", "/things", "k-900k", `{}`)
	again := a.do("POST", "/things", "k-900k", `{}`)
	if first.status != http.StatusOK || len(first.body) != 900<<10 || again.status != http.StatusOK || again.body != first.body ||
		again.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("900 KiB: %d (%d bytes), then %d (%d bytes) replayed %q", first.status, len(first.body), again.status, len(again.body), again.header.Get("Idempotency-Replayed"))
	}
	const defaultLimit = 1 << 20 // Config.MaxResponseBytes' documented default, 1 MiB
	if limit.Load() != defaultLimit {
		t.Fatalf("the handler learnt the limit %d; want %d", limit.Load(), defaultLimit)
	}

	// Over the limit: the first client and every retry get one answer.
	a.handler.Store(answer(defaultLimit))
	over := a.do("POST", "/things", "k-over", `{}`)
	p := problem(t, over, http.StatusInternalServerError, idemhttp.ProblemResponseTooLarge)
	for range 2 {
		r := a.do("POST", "/things", "k-over", `{}`)
		if r.header.Get("Idempotency-Replayed") != "true" || r.body != over.body {
			t.Fatalf("a retry of the large response: %d %s; want %+v replayed", r.status, r.body, p)
		}
	}
	if a.runs.Load() != 2 {
		t.Fatalf("%d runs; want one per key", a.runs.Load())
	}
}
