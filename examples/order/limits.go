package order

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/time/rate"

	"github.com/onceflow/onceflow/idemhttp"
)

// RateLimit is a token bucket: Burst requests at once, then Rate a second
// on average. The zero RateLimit takes its field's default; a negative
// Rate turns the limit off.
type RateLimit struct {
	Rate  float64
	Burst int
}

// ParseRateLimit reads a RateLimit written RATE/BURST (requests a
// second, and at once: "10/20"), or "off" (no limit); "" is the zero
// RateLimit, its default.
func ParseRateLimit(v string) (RateLimit, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "":
		return RateLimit{}, nil
	case "off":
		return RateLimit{Rate: -1}, nil
	}
	r, b, ok := strings.Cut(v, "/")
	rate, err := strconv.ParseFloat(r, 64)
	burst, berr := strconv.Atoi(b)
	if !ok || err != nil || berr != nil || rate <= 0 || math.IsInf(rate, 0) || burst < 1 {
		return RateLimit{}, fmt.Errorf("a rate limit is RATE/BURST, requests a second (above 0) and at once (at least 1), such as 10/20, or off; got %q", v)
	}
	return RateLimit{Rate: rate, Burst: burst}, nil
}

// The order API's default rate limits (APIConfig).
var (
	// DefaultAccountLimit bounds one account's requests, every key and
	// route of it together: 20 at once, then 10 a second.
	DefaultAccountLimit = RateLimit{Rate: 10, Burst: 20}
	// DefaultAPIKeyLimit bounds the requests that present one API key,
	// known or not, before it is looked up: 20 at once, then 10 a second.
	DefaultAPIKeyLimit = RateLimit{Rate: 10, Burst: 20}
	// DefaultFailedAuthLimit bounds the requests of one client address
	// (an IPv4 address, an IPv6 /64) that present no valid API key: 10,
	// then 1 a second.
	DefaultFailedAuthLimit = RateLimit{Rate: 1, Burst: 10}
)

// ProblemRateLimited (429, with Retry-After) is the problem type of a
// request over a rate limit: it was not processed.
const ProblemRateLimited = "urn:onceflow:problem:rate-limited"

// MetricRateLimited counts the order API's requests refused over a rate
// limit, by "limit": "account", "api_key" or "failed_auth".
const MetricRateLimited = "onceflow.api.rate_limited"

// MetricWebhookEventsLimited counts the payment events the order API
// bounded, by "limit": "order" (refused 429: the order had
// MaxEventsPerOrder events) or "sender" (recorded, not signalled: its
// sender had MaxSignalledEventsPerSender signalled into the order's
// workflow).
const MetricWebhookEventsLimited = "onceflow.api.webhook_events_limited"

// maxLimited bounds the buckets one limit keeps (accounts, keys or
// addresses); beyond them, the new ones share one bucket.
const maxLimited = 1 << 16

// limiter is a RateLimit per name (an account, a key's digest, an
// address).
type limiter struct {
	limit    RateLimit
	mu       sync.Mutex
	byName   map[string]*rate.Limiter
	overflow *rate.Limiter
}

func newLimiter(l RateLimit) *limiter {
	if l.Rate < 0 {
		return nil
	}
	return &limiter{limit: l, byName: map[string]*rate.Limiter{}, overflow: rate.NewLimiter(rate.Limit(l.Rate), l.Burst)}
}

// take spends a request of name: 0 when it may go on, else how long until
// it may.
func (l *limiter) take(name string, now time.Time) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.byName[name]
	if !ok {
		if len(l.byName) >= maxLimited {
			for n, b := range l.byName { // forget the names whose buckets are full again
				if b.TokensAt(now) >= float64(l.limit.Burst) {
					delete(l.byName, n)
				}
			}
		}
		b = l.overflow
		if len(l.byName) < maxLimited {
			b = rate.NewLimiter(rate.Limit(l.limit.Rate), l.limit.Burst)
			l.byName[name] = b
		}
	}
	if b.AllowN(now, 1) {
		return 0
	}
	return time.Duration((1 - b.TokensAt(now)) / l.limit.Rate * float64(time.Second))
}

// limits are the API's rate limits and its counters of what they refused.
type limits struct {
	accounts, keys, failures *limiter
	refused, events          metric.Int64Counter
}

// withDefault is l, or d when l is the zero RateLimit.
func withDefault(l, d RateLimit) RateLimit {
	if l == (RateLimit{}) {
		return d
	}
	return l
}

func newLimits(cfg APIConfig) (*limits, error) {
	for name, l := range map[string]RateLimit{"AccountLimit": cfg.AccountLimit, "APIKeyLimit": cfg.APIKeyLimit, "FailedAuthLimit": cfg.FailedAuthLimit} {
		if l.Rate > 0 && l.Burst < 1 || l.Rate == 0 && l.Burst != 0 {
			return nil, fmt.Errorf("order: APIConfig.%s: a Rate above 0 needs a Burst of at least 1 (got %+v); a negative Rate turns the limit off", name, l)
		}
	}
	ls := &limits{
		accounts: newLimiter(withDefault(cfg.AccountLimit, DefaultAccountLimit)),
		keys:     newLimiter(withDefault(cfg.APIKeyLimit, DefaultAPIKeyLimit)),
		failures: newLimiter(withDefault(cfg.FailedAuthLimit, DefaultFailedAuthLimit)),
	}
	if cfg.MeterProvider == nil {
		return ls, nil
	}
	m := cfg.MeterProvider.Meter("github.com/onceflow/onceflow/examples/order")
	var err error
	if ls.refused, err = m.Int64Counter(MetricRateLimited,
		metric.WithDescription("Order API requests refused 429 over a rate limit, by limit: account, api_key (one presented key) or failed_auth (one address's requests without a valid key).")); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	if ls.events, err = m.Int64Counter(MetricWebhookEventsLimited,
		metric.WithDescription("Payment events bounded, by limit: order (refused 429, the order had its MaxEventsPerOrder) or sender (recorded, not signalled: the sender had its MaxSignalledEventsPerSender signalled into the order).")); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	return ls, nil
}

func (ls *limits) count(ctx context.Context, c metric.Int64Counter, limit string) {
	if c != nil {
		c.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", limit)))
	}
}

// tooMany answers a request over limit: 429 with Retry-After, before the
// body is read.
func (ls *limits) tooMany(w http.ResponseWriter, r *http.Request, limit string, wait time.Duration) {
	ls.count(r.Context(), ls.refused, limit)
	what := map[string]string{
		"account":     "your account's requests",
		"api_key":     "the requests with this API key",
		"failed_auth": "the requests from your address without a valid API key",
	}[limit]
	refuse(w, r, &idemhttp.Problem{Type: ProblemRateLimited, Title: "Too many requests", Status: http.StatusTooManyRequests,
		RetryAfter: time.Duration(math.Ceil(wait.Seconds())) * time.Second,
		Detail:     what + " are over their rate limit, and this one was not processed: send it again after Retry-After seconds, with the same Idempotency-Key"})
}

// refuse answers p to a request whose body is unread: the connection is
// closed after the answer, so that the server does not wait for a body
// nobody will read.
func refuse(w http.ResponseWriter, r *http.Request, p *idemhttp.Problem) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	idemhttp.WriteProblem(w, p)
}

// keyDigest names an API key in the per-key limit: its SHA-256.
func keyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// clientAddr is the address the failed-authentication limit counts by,
// from a request's RemoteAddr: the IP of an IPv4 client, the /64 of an
// IPv6 one. Behind a proxy it is the proxy's.
func clientAddr(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String()
}
