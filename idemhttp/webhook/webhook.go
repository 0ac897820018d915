package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/idemhttp"
)

// Defaults and bounds.
const (
	// SignatureHeader is the default header of the signature.
	SignatureHeader = "Webhook-Signature"
	// defaultTolerance is how far a delivery's timestamp may be from the
	// receiver's clock, either way: 5 minutes, as the large payment
	// providers use.
	defaultTolerance = 5 * time.Minute
	// defaultMaxBytes is the largest body a Verifier reads: 64 KiB.
	defaultMaxBytes = 64 << 10
	// MinSecretLen is the shortest secret: 16 bytes (128 bits).
	MinSecretLen = 16
	// MaxSignatures is the most v1 signatures one header may carry; more
	// is refused (a sender signs with one or two secrets).
	MaxSignatures = 8
)

// Errors of Verify. Each is answered 401 by Handler.
var (
	// ErrUnsigned: the delivery has no signature header.
	ErrUnsigned = errors.New("webhook: the delivery is not signed")
	// ErrMalformed: the header is not t=<unix seconds>,v1=<hex>[,v1=…].
	ErrMalformed = errors.New("webhook: the signature header is malformed")
	// ErrTimestamp: the timestamp is further than the tolerance from the
	// receiver's clock (a replayed delivery, or a clock far off).
	ErrTimestamp = errors.New("webhook: the signature's timestamp is outside the tolerance")
	// ErrMismatch: no signature matches any secret of any sender.
	ErrMismatch = errors.New("webhook: no signature matches a known sender's secret")
)

// Config configures a Verifier. Empty fields take their defaults.
type Config struct {
	// Secrets are each sender's secrets, by the sender's name (the
	// principal that scopes its event IDs): during a rotation, the old
	// secret and the new one. Each secret is at least MinSecretLen bytes,
	// and no two senders share one. Without any sender (and without
	// UnsignedSender) every delivery is refused: New accepts that, so a
	// receiver that takes no webhooks yet still starts.
	Secrets map[string][][]byte
	// Tolerance is how far a timestamp may be from the clock, either way.
	// Default 5 minutes, as the large payment providers use; it must be
	// positive.
	Tolerance time.Duration
	// MaxBytes is the largest body Handler reads: a larger one is
	// answered 413. Default 64 KiB.
	MaxBytes int64
	// Header is the signature's header. Default SignatureHeader.
	Header string
	// UnsignedSender, when set, is the sender every delivery without a
	// signature header is taken to come from. Default empty: an unsigned
	// delivery is answered 401. Set it only for a sender that cannot
	// sign, on a network only it reaches: anyone who can send to the
	// endpoint then speaks as this sender.
	UnsignedSender string
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

type secret struct {
	sender string
	key    []byte
}

// Verifier checks signed deliveries. It is safe for concurrent use.
type Verifier struct {
	cfg     Config
	secrets []secret
}

// New validates cfg and returns its Verifier.
func New(cfg Config) (*Verifier, error) {
	switch {
	case cfg.Tolerance == 0:
		cfg.Tolerance = defaultTolerance
	case cfg.Tolerance < 0:
		return nil, errors.New("webhook: Config.Tolerance must be positive")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = defaultMaxBytes
	}
	if cfg.MaxBytes < 0 {
		return nil, errors.New("webhook: Config.MaxBytes must be positive")
	}
	if cfg.Header == "" {
		cfg.Header = SignatureHeader
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if _, ok := cfg.Secrets[cfg.UnsignedSender]; ok && cfg.UnsignedSender != "" {
		return nil, fmt.Errorf("webhook: Config.UnsignedSender %q is also a signing sender: unsigned deliveries would speak as it; name them another sender", cfg.UnsignedSender)
	}
	v := &Verifier{cfg: cfg}
	owner := map[string]string{}
	for sender, keys := range cfg.Secrets {
		if sender == "" {
			return nil, errors.New("webhook: a sender in Config.Secrets has an empty name")
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("webhook: sender %q has no secret", sender)
		}
		for _, k := range keys {
			if len(k) < MinSecretLen {
				return nil, fmt.Errorf("webhook: sender %q has a secret of %d bytes; use at least %d random bytes", sender, len(k), MinSecretLen)
			}
			if o, ok := owner[string(k)]; ok && o != sender {
				return nil, fmt.Errorf("webhook: senders %q and %q share a secret: a delivery could not say which one sent it; give each its own", o, sender)
			}
			owner[string(k)] = sender
			v.secrets = append(v.secrets, secret{sender: sender, key: bytes.Clone(k)})
		}
	}
	return v, nil
}

// mac is the hex HMAC-SHA256 of "<t>.<body>" under key.
func mac(key []byte, t string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(t))
	h.Write([]byte{'.'})
	h.Write(body)
	sum := h.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// Sign is the signature header's value of body, sent at t, under each of
// secrets (one v1 each): what a sender puts in SignatureHeader.
func Sign(t time.Time, body []byte, secrets ...[]byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.Write(mac(s, ts, body))
	}
	return b.String()
}

// Verify checks a delivery's signature header against its raw body and
// returns its sender. An empty header is ErrUnsigned (or, with
// Config.UnsignedSender, that sender).
func (v *Verifier) Verify(header string, body []byte) (sender string, err error) {
	if strings.TrimSpace(header) == "" {
		if v.cfg.UnsignedSender != "" {
			return v.cfg.UnsignedSender, nil
		}
		return "", ErrUnsigned
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return "", ErrMalformed
		}
		switch k {
		case "t":
			if ts != "" {
				return "", fmt.Errorf("%w: two timestamps", ErrMalformed)
			}
			ts = val
		case "v1":
			if len(sigs) == MaxSignatures {
				return "", fmt.Errorf("%w: more than %d signatures", ErrMalformed, MaxSignatures)
			}
			sigs = append(sigs, []byte(strings.ToLower(val)))
		default: // another scheme (v0, a later v2): not ours to check
		}
	}
	if len(sigs) == 0 {
		return "", fmt.Errorf("%w: no v1 signature", ErrMalformed)
	}
	// At most 11 digits: a unix time in seconds until the year 5138.
	unix, perr := strconv.ParseInt(ts, 10, 64)
	if perr != nil || len(ts) > 11 || unix < 0 {
		return "", fmt.Errorf("%w: the timestamp t must be unix seconds", ErrMalformed)
	}
	if d := v.cfg.Now().Sub(time.Unix(unix, 0)); d > v.cfg.Tolerance || d < -v.cfg.Tolerance {
		return "", fmt.Errorf("%w (%v off, tolerance %v): sign each delivery when it is sent", ErrTimestamp, d.Round(time.Second), v.cfg.Tolerance)
	}
	// Every secret against every signature, without stopping at a match:
	// the time taken says nothing of which one matched.
	sender = ""
	for _, s := range v.secrets {
		want := mac(s.key, ts, body)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) && sender == "" {
				sender = s.sender
			}
		}
	}
	if sender == "" {
		return "", ErrMismatch
	}
	return sender, nil
}

// Handler returns next behind the verifier: it reads the body (at most
// Config.MaxBytes: 413 beyond), verifies its signature (401 problem when
// it does not verify, before next runs), names the sender in the
// request's context (idemhttp.WithPrincipal) and gives next the body as
// it was read.
func (v *Verifier) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tooLarge := &idemhttp.Problem{Type: idemhttp.ProblemBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("a webhook delivery's body is at most %d bytes", v.cfg.MaxBytes)}
		if r.ContentLength > v.cfg.MaxBytes {
			idemhttp.WriteProblem(w, tooLarge)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, v.cfg.MaxBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				idemhttp.WriteProblem(w, tooLarge)
				return
			}
			idemhttp.WriteProblem(w, &idemhttp.Problem{Type: idemhttp.ProblemInvalidRequest, Title: "Request body unreadable", Status: http.StatusBadRequest,
				Detail: "the body could not be read: " + err.Error()})
			return
		}
		sender, err := v.Verify(r.Header.Get(v.cfg.Header), body)
		if err != nil {
			idemhttp.WriteProblem(w, &idemhttp.Problem{Type: idemhttp.ProblemUnauthenticated, Title: "Unauthenticated", Status: http.StatusUnauthorized,
				Detail: err.Error() + "; sign each delivery: " + v.cfg.Header + ": t=UNIX_SECONDS,v1=HEX, the hex HMAC-SHA256 of UNIX_SECONDS, a dot and the raw body, under your secret"})
			return
		}
		r = r.WithContext(idemhttp.WithPrincipal(r.Context(), sender))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// MaxBytes is the largest body Handler reads (Config.MaxBytes).
func (v *Verifier) MaxBytes() int64 { return v.cfg.MaxBytes }

// Senders is the number of senders v knows by a secret.
func (v *Verifier) Senders() int { return len(v.cfg.Secrets) }
