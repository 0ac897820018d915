package console

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// minTokenBytes is the entropy a console token must be able to carry, in
// bytes: CheckToken's rule.
const minTokenBytes = 32

// CheckToken refuses a console token that cannot carry 32 bytes of
// entropy. A token is made of the characters hex, base64 and base64url
// encoders write (A–Z, a–z, 0–9 and - . _ ~ + / =), so that it
// travels unchanged in a cookie, a URL and a header, and is at least 64
// characters long when it is hex digits only (4 bits each), else at least
// 43 (6 bits each). `openssl rand -hex 32` (64 hex digits) and
// `openssl rand -base64 32` (44 characters) make one.
func CheckToken(token string) error {
	hex := true
	for _, r := range token {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'f', r >= 'A' && r <= 'F':
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', strings.ContainsRune("-._~+/=", r):
			hex = false
		default:
			return fmt.Errorf("console: the console token has a character other than A-Z, a-z, 0-9 and - . _ ~ + / =: make one with `openssl rand -hex 32`")
		}
	}
	need := (minTokenBytes*8 + 5) / 6 // 43
	if hex {
		need = minTokenBytes * 2 // 64
	}
	if len(token) < need {
		return fmt.Errorf("console: the console token is %d characters, too short to hold %d random bytes (at least 64 hex digits, or 43 base64 characters): "+
			"make one with `openssl rand -hex 32`", len(token), minTokenBytes)
	}
	return nil
}

// The limit on failed token attempts: a client address gets
// failedTokenBurst wrong tokens at once, then one every
// failedTokenInterval; beyond that, 429 with Retry-After, and its tokens
// are not even compared.
const (
	failedTokenBurst    = 10
	failedTokenInterval = 6 * time.Second
)

// maxTrackedClients bounds the addresses the limit keeps a bucket for;
// beyond them, the new addresses share one bucket.
const maxTrackedClients = 4096

// failures is the per-client-address limit on failed token attempts.
type failures struct {
	mu       sync.Mutex
	byClient map[string]*rate.Limiter
	overflow *rate.Limiter
}

func newFailures() *failures {
	return &failures{byClient: make(map[string]*rate.Limiter), overflow: newBucket()}
}

func newBucket() *rate.Limiter {
	return rate.NewLimiter(rate.Every(failedTokenInterval), failedTokenBurst)
}

// bucket is client's bucket; f.mu is held.
func (f *failures) bucket(client string, now time.Time) *rate.Limiter {
	if b, ok := f.byClient[client]; ok {
		return b
	}
	if len(f.byClient) >= maxTrackedClients {
		for c, b := range f.byClient { // forget the addresses whose buckets are full again
			if b.TokensAt(now) >= failedTokenBurst {
				delete(f.byClient, c)
			}
		}
		if len(f.byClient) >= maxTrackedClients {
			return f.overflow
		}
	}
	b := newBucket()
	f.byClient[client] = b
	return b
}

// wait is how long client must wait before its next attempt, or 0 when it
// may try now.
func (f *failures) wait(client string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	tokens := f.bucket(client, now).TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(failedTokenInterval))
}

// fail counts a failed attempt of client; true when it used the last one
// the client had.
func (f *failures) fail(client string, now time.Time) (exhausted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.bucket(client, now)
	b.AllowN(now, 1)
	return b.TokensAt(now) < 1
}

// retryAfter is the Retry-After value of d: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return fmt.Sprint(max(1, int(math.Ceil(d.Seconds()))))
}
