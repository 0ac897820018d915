package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/idemhttp"
)

// Roles of the clients of a key.
const (
	roleClient    = "client"    // the key's first client
	roleDuplicate = "duplicate" // a second client, started at the same time
	roleVerify    = "verify"    // the settle's last ask
)

// orderKey is one order: its Idempotency-Key, its body, and every answer
// any client got for it.
type orderKey struct {
	idx     int
	key     string
	body    []byte
	clients int

	mu      sync.Mutex
	phase   string
	answers []answer
}

// snapshot copies the key's answers.
func (k *orderKey) snapshot() []answer {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.answers)
}

// answer is one request and what came back.
type answer struct {
	Key         string  `json:"key"`
	Role        string  `json:"role"`
	Client      int     `json:"client"`
	Attempt     int     `json:"attempt"`
	Worker      int     `json:"worker"`
	Phase       string  `json:"phase"`
	At          float64 `json:"at_s"`
	Millis      int64   `json:"ms"`
	Status      int     `json:"status,omitempty"`
	Problem     string  `json:"problem,omitempty"`
	Detail      string  `json:"detail,omitempty"`
	Record      string  `json:"record,omitempty"`
	OrderID     string  `json:"order_id,omitempty"`
	OrderStatus string  `json:"order_status,omitempty"`
	WorkflowID  string  `json:"workflow_id,omitempty"`
	Replayed    bool    `json:"replayed,omitempty"`
	Err         string  `json:"err,omitempty"`
	Final       bool    `json:"final"`
}

// load places the orders.
type load struct {
	c     *cluster
	keys  []*orderKey
	hc    *http.Client
	slots chan struct{}
	wg    sync.WaitGroup

	mu   sync.Mutex
	file *os.File
	w    *bufio.Writer
}

// newLoad makes the orders, from rng: -orders keys, -duplicates of them
// sent by two clients.
func newLoad(c *cluster, rng *rand.Rand) (*load, error) {
	f, err := os.Create(filepath.Join(c.out, "answers.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("create answers.jsonl (check -out): %w", err)
	}
	l := &load{
		c: c, file: f, w: bufio.NewWriter(f), slots: make(chan struct{}, c.cfg.concurrency),
		hc: &http.Client{
			// Prefer: wait=3 and the order wait, and some room.
			Timeout: c.cfg.orderWait + 10*time.Second,
			Transport: &http.Transport{
				Proxy:               nil, // loopback only, whatever HTTP_PROXY says
				DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
				MaxIdleConnsPerHost: c.cfg.concurrency,
			},
		},
	}
	run := strconv.FormatUint(uint64(c.cfg.seed)&0xffffff, 16)
	for i := range c.cfg.orders {
		body, err := json.Marshal(randomOrder(rng))
		if err != nil {
			return nil, err
		}
		k := &orderKey{idx: i, key: fmt.Sprintf(`"chaos-%s-%04d"`, run, i), body: body, clients: 1}
		if rng.Float64() < c.cfg.duplicates {
			k.clients = 2
		}
		l.keys = append(l.keys, k)
	}
	return l, nil
}

// randomOrder is an order of one or two distinct SKUs. The stock (1000 of
// each SKU) outlasts any run.
func randomOrder(rng *rand.Rand) order.OrderRequest {
	skus := []string{"A-1", "A-2", "B-1", "B-2", "C-1", "C-2", "D-1", "D-2"}
	rng.Shuffle(len(skus), func(i, j int) { skus[i], skus[j] = skus[j], skus[i] })
	items := []ledger.Item{{SKU: skus[0], Qty: 1 + rng.IntN(2)}}
	if rng.IntN(2) == 0 {
		items = append(items, ledger.Item{SKU: skus[1], Qty: 1})
	}
	return order.OrderRequest{
		CustomerID: fmt.Sprintf("c-%d", rng.IntN(50)), Items: items,
		AmountCents: 100 + rng.Int64N(9900), Currency: []string{"USD", "EUR", "GBP"}[rng.IntN(3)],
	}
}

// close flushes answers.jsonl.
func (l *load) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.w.Flush()
	if cerr := l.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// dispatch starts the orders as the budgets ask, each key's clients
// together (at most -concurrency requests are in flight at once); once
// budgets is closed the rest start at once.
func (l *load) dispatch(ctx context.Context, budgets <-chan budget) {
	next := 0
	for next < len(l.keys) {
		var b budget
		var ok bool
		select {
		case b, ok = <-budgets:
		case <-ctx.Done():
			return
		}
		if !ok {
			break
		}
		began := time.Now()
		for j := 0; j < b.n && next < len(l.keys); j++ {
			if !sleepUntil(ctx, began.Add(b.over*time.Duration(j)/time.Duration(b.n))) || !l.launch(ctx, l.keys[next]) {
				return
			}
			next++
		}
	}
	for ; next < len(l.keys); next++ {
		if !l.launch(ctx, l.keys[next]) {
			return
		}
	}
}

// launch starts the clients of k. A client holds a slot only while a
// request is in flight (see drive), so clients that wait to retry (an
// order waiting on an operator until the settle) do not starve the
// phases that follow of new orders.
func (l *load) launch(ctx context.Context, k *orderKey) bool {
	if ctx.Err() != nil {
		return false
	}
	k.mu.Lock()
	k.phase = l.c.tl.current()
	k.mu.Unlock()
	l.c.tl.orderStarted()
	deadline := time.Now().Add(l.c.cfg.orderDeadline)
	for i := range k.clients {
		role := roleClient
		if i > 0 {
			role = roleDuplicate
		}
		l.wg.Go(func() { l.drive(ctx, k, role, i, deadline) })
	}
	return true
}

// verify asks every key once more, until a final answer or deadline.
func (l *load) verify(ctx context.Context, deadline time.Time) {
	for _, k := range l.keys {
		if ctx.Err() != nil {
			return
		}
		l.wg.Go(func() { l.drive(ctx, k, roleVerify, 0, deadline) })
	}
}

// wait waits until every client has finished, or ctx is done: it reports
// whether they all finished.
func (l *load) wait(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// drive sends k until a final answer, or until deadline. Clients take
// turns over the workers, so a dead worker costs one attempt.
func (l *load) drive(ctx context.Context, k *orderKey, role string, client int, deadline time.Time) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// A duplicate client asks the middleware to wait for the first one's
	// answer instead of answering 409 at once.
	prefer := role == roleDuplicate
	for attempt := 1; ; attempt++ {
		w := (k.idx + client + attempt) % len(l.c.workers)
		select {
		case l.slots <- struct{}{}: // -concurrency requests in flight at most
		case <-ctx.Done():
			return
		}
		a, retryAfter := l.post(ctx, k, w, prefer)
		<-l.slots
		if a.Err != "" && ctx.Err() != nil {
			return // the deadline, or the run stops: no answer
		}
		a.Role, a.Client, a.Attempt, a.Phase = role, client, attempt, l.c.tl.current()
		final, wait := classify(a, retryAfter, attempt)
		a.Final = final
		l.record(k, a)
		if final || !sleepCtx(ctx, wait) {
			return
		}
	}
}

// record keeps an answer with its key and in answers.jsonl.
func (l *load) record(k *orderKey, a answer) {
	k.mu.Lock()
	k.answers = append(k.answers, a)
	k.mu.Unlock()
	b, _ := json.Marshal(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(b, '\n'))
}

var reopenRecord = regexp.MustCompile(`reopen -record (\S+)`)

// post sends one POST /orders to worker w and reads the answer and its
// Retry-After.
func (l *load) post(ctx context.Context, k *orderKey, w int, prefer bool) (answer, time.Duration) {
	a := answer{Key: k.key, Worker: w, At: time.Since(l.c.tl.start).Seconds()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+l.c.workers[w].addr+"/orders", bytes.NewReader(k.body))
	if err != nil {
		a.Err = err.Error()
		return a, 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.c.apiKey)
	req.Header.Set("Idempotency-Key", k.key)
	if prefer {
		req.Header.Set("Prefer", "wait=3")
	}
	began := time.Now()
	resp, err := l.hc.Do(req)
	a.Millis = time.Since(began).Milliseconds()
	if err != nil {
		a.Err = err.Error()
		return a, 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		a.Err = "read the answer: " + err.Error()
		return a, 0
	}
	a.Status = resp.StatusCode
	a.Replayed = resp.Header.Get("Idempotency-Replayed") == "true"
	retryAfter := time.Duration(0)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case ct == "application/problem+json":
		var p struct {
			Type   string `json:"type"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(body, &p)
		a.Problem, a.Detail = p.Type, truncate(p.Detail, 300)
		if m := reopenRecord.FindStringSubmatch(p.Detail); m != nil {
			a.Record = m[1]
		}
	case a.Status >= 200 && a.Status < 300:
		var r order.OrderResponse
		if err := json.Unmarshal(body, &r); err != nil {
			a.Err = "the answer does not decode: " + err.Error()
		}
		a.OrderID, a.OrderStatus, a.WorkflowID = r.OrderID, r.Status, r.WorkflowID
	default:
		a.Detail = truncate(string(body), 300)
	}
	return a, retryAfter
}

// classify says whether a is a final answer for its client and, if not,
// how long to wait before the next attempt.
func classify(a answer, retryAfter time.Duration, attempt int) (final bool, wait time.Duration) {
	backoff := min(time.Duration(attempt)*250*time.Millisecond, 2*time.Second)
	clamp := func(d time.Duration) time.Duration { return min(max(d, 200*time.Millisecond), 3*time.Second) }
	switch {
	case a.Status == 0: // network error, or an answer that did not read
		return false, backoff
	case a.Status == http.StatusCreated || a.Status == http.StatusOK:
		return a.OrderStatus != order.StatusProcessing, clamp(retryAfter)
	case a.Status == http.StatusAccepted: // processing: not stored, ask again
		return false, clamp(max(retryAfter, 500*time.Millisecond))
	case a.Status == http.StatusConflict && a.Problem == idemhttp.ProblemInProgress:
		return false, clamp(retryAfter)
	case a.Status == http.StatusTooManyRequests: // a rate limit: not processed, ask again
		return false, clamp(max(retryAfter, backoff))
	case a.Status == http.StatusInternalServerError && a.Problem == order.ProblemOrderFailed:
		return true, 0 // the workflow ended without a result: the check says so
	case a.Status >= 500:
		return false, clamp(max(retryAfter, backoff))
	}
	// 409 effect unknown (a stuck key), 409 operation failed, 422 (the
	// key reused for another body: must not happen), other 4xx.
	return true, 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
