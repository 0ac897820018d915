package webhook_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemhttp/webhook"
)

var (
	oldSecret = []byte("psp-secret-2025-old-0123456789")
	newSecret = []byte("psp-secret-2026-new-0123456789")
	bobSecret = []byte("bob-secret-0123456789abcdef")
	now       = time.Unix(1_800_000_000, 0)
)

func verifier(t *testing.T, mod func(*webhook.Config)) *webhook.Verifier {
	t.Helper()
	cfg := webhook.Config{
		Secrets: map[string][][]byte{"psp": {oldSecret, newSecret}, "bob": {bobSecret}},
		Now:     func() time.Time { return now },
	}
	if mod != nil {
		mod(&cfg)
	}
	v, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVerifyNamesTheSenderWhoseSecretSigned: either of a sender's two
// secrets (a rotation) verifies and names it; another sender's secret
// names that sender; a body changed by one byte, an unknown secret, a
// stale or future timestamp, a missing or malformed header are refused.
func TestVerifyNamesTheSenderWhoseSecretSigned(t *testing.T) {
	t.Parallel()
	v := verifier(t, nil)
	const tolerance = 5 * time.Minute // Config.Tolerance's documented default
	body := []byte(`{"event_id":"evt-1","order_id":"o-1","type":"payment.captured"}`)
	for name, c := range map[string]struct {
		header string
		body   []byte
		sender string
		err    error
	}{
		"old secret":          {webhook.Sign(now, body, oldSecret), body, "psp", nil},
		"new secret":          {webhook.Sign(now, body, newSecret), body, "psp", nil},
		"both secrets":        {webhook.Sign(now, body, newSecret, oldSecret), body, "psp", nil},
		"another sender":      {webhook.Sign(now, body, bobSecret), body, "bob", nil},
		"spaces":              {strings.ReplaceAll(webhook.Sign(now, body, newSecret), ",", " , "), body, "psp", nil},
		"upper-case hex":      {"t=1800000000,v1=" + strings.ToUpper(strings.TrimPrefix(webhook.Sign(now, body, newSecret), "t=1800000000,v1=")), body, "psp", nil},
		"within tolerance":    {webhook.Sign(now.Add(-tolerance), body, oldSecret), body, "psp", nil},
		"clock ahead, within": {webhook.Sign(now.Add(tolerance), body, oldSecret), body, "psp", nil},
		"a v0 beside":         {webhook.Sign(now, body, oldSecret) + ",v0=abc", body, "psp", nil},
		"body changed":        {webhook.Sign(now, body, oldSecret), append([]byte(nil), append(body[:len(body)-1:len(body)-1], ' ', '}')...), "", webhook.ErrMismatch},
		"unknown secret":      {webhook.Sign(now, body, []byte("someone-else-0123456789")), body, "", webhook.ErrMismatch},
		"stale":               {webhook.Sign(now.Add(-tolerance-time.Second), body, oldSecret), body, "", webhook.ErrTimestamp},
		"future":              {webhook.Sign(now.Add(tolerance+time.Second), body, oldSecret), body, "", webhook.ErrTimestamp},
		"unsigned":            {"", body, "", webhook.ErrUnsigned},
		"no v1":               {"t=1800000000", body, "", webhook.ErrMalformed},
		"no t":                {"v1=00", body, "", webhook.ErrMalformed},
		"t not a number":      {"t=soon,v1=00", body, "", webhook.ErrMalformed},
		"two t":               {"t=1800000000,t=1800000000,v1=00", body, "", webhook.ErrMalformed},
		"too many v1":         {"t=1800000000" + strings.Repeat(",v1=00", webhook.MaxSignatures+1), body, "", webhook.ErrMalformed},
	} {
		sender, err := v.Verify(c.header, c.body)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Fatalf("%v: err = %v, want it to match %v", name, err, c.err)
			}
			if len(sender) != 0 {
				t.Fatalf("%v: got %q, want it empty", name, sender)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", name, err)
		}
		if sender != c.sender {
			t.Fatalf("%v: got %q, want %q", name, sender, c.sender)
		}
	}
}

// TestHandlerRefusesUnsignedDeliveriesUnlessConfigured: an unsigned or
// badly signed delivery gets 401 and next does not run; a signed one
// reaches next with its body whole and its sender as the principal;
// UnsignedSender, an explicit option, names the unsigned deliveries'
// sender, and a wrong signature is still a 401.
func TestHandlerRefusesUnsignedDeliveriesUnlessConfigured(t *testing.T) {
	t.Parallel()
	body := `{"event_id":"evt-1"}`
	var got struct{ principal, body string }
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := idemhttp.ContextPrincipal(r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		got.principal, got.body = p, string(b)
		w.WriteHeader(http.StatusNoContent)
	})
	send := func(h http.Handler, sig string) int {
		got.principal, got.body = "", ""
		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
		if sig != "" {
			req.Header.Set(webhook.SignatureHeader, sig)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusUnauthorized {
			if got := rec.Header().Get("Content-Type"); got != idemhttp.ContentTypeProblem {
				t.Fatalf("got %q, want %q", got, idemhttp.ContentTypeProblem)
			}
			if !strings.Contains(rec.Body.String(), idemhttp.ProblemUnauthenticated) {
				t.Fatalf("%q does not contain %q", rec.Body.String(), idemhttp.ProblemUnauthenticated)
			}
		}
		return rec.Code
	}
	strict := verifier(t, nil).Handler(next)
	if got := send(strict, ""); got != http.StatusUnauthorized {
		t.Fatalf("got %v, want %v", got, http.StatusUnauthorized)
	}
	if len(got.principal) != 0 {
		t.Fatalf("next ran for an unsigned delivery: got %q, want it empty", got.principal)
	}
	if got := send(strict, webhook.Sign(now, []byte(body+" "), oldSecret)); got != http.StatusUnauthorized {
		t.Fatalf("got %v, want %v", got, http.StatusUnauthorized)
	}
	if got := send(strict, webhook.Sign(now, []byte(body), newSecret)); got != http.StatusNoContent {
		t.Fatalf("got %v, want %v", got, http.StatusNoContent)
	}
	if got.principal != "psp" {
		t.Fatalf("got %q, want %q", got.principal, "psp")
	}
	if got.body != body {
		t.Fatalf("got %q, want %q", got.body, body)
	}

	lax := verifier(t, func(c *webhook.Config) { c.UnsignedSender = "legacy-psp" }).Handler(next)
	if got := send(lax, ""); got != http.StatusNoContent {
		t.Fatalf("got %v, want %v", got, http.StatusNoContent)
	}
	if got.principal != "legacy-psp" {
		t.Fatalf("got %q, want %q", got.principal, "legacy-psp")
	}
	if got := send(lax, webhook.Sign(now, []byte(body), []byte("a-wrong-secret-0123456789"))); got != http.StatusUnauthorized {
		t.Fatalf("got %v, want %v", got, http.StatusUnauthorized)
	}
}

// TestHandlerBoundsTheBody: a body over MaxBytes is 413, declared or not,
// and next does not run.
func TestHandlerBoundsTheBody(t *testing.T) {
	t.Parallel()
	ran := false
	h := verifier(t, func(c *webhook.Config) { c.MaxBytes = 100 }).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	big := strings.Repeat("x", 101)
	for _, declared := range []bool{true, false} {
		req := httptest.NewRequest(http.MethodPost, "/hooks", io.MultiReader(strings.NewReader(big)))
		if declared {
			req.ContentLength = int64(len(big))
		} else {
			req.ContentLength = -1
		}
		req.Header.Set(webhook.SignatureHeader, webhook.Sign(now, []byte(big), oldSecret))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("got %v, want %v", rec.Code, http.StatusRequestEntityTooLarge)
		}
	}
	if ran {
		t.Fatal("want false: ran")
	}
}

// TestNewRefusesWeakOrAmbiguousConfigs: no sender, a short secret, two
// senders sharing a secret, an unsigned sender that is also a signing
// one, a negative tolerance.
func TestNewRefusesWeakOrAmbiguousConfigs(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]webhook.Config{
		"short secret":   {Secrets: map[string][][]byte{"psp": {[]byte("short")}}},
		"no secret":      {Secrets: map[string][][]byte{"psp": nil}},
		"empty name":     {Secrets: map[string][][]byte{"": {oldSecret}}},
		"shared secret":  {Secrets: map[string][][]byte{"psp": {oldSecret}, "bob": {oldSecret}}},
		"unsigned clash": {Secrets: map[string][][]byte{"psp": {oldSecret}}, UnsignedSender: "psp"},
		"tolerance":      {Secrets: map[string][][]byte{"psp": {oldSecret}}, Tolerance: -time.Second},
	} {
		_, err := webhook.New(cfg)
		if err == nil {
			t.Fatalf("%v: got no error, want one", name)
		}
	}
	_, err := webhook.New(webhook.Config{Secrets: map[string][][]byte{"psp": {oldSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	// No sender at all: a receiver that refuses every delivery.
	none, err := webhook.New(webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = none.Verify(webhook.Sign(time.Now(), nil, oldSecret), nil)
	if !errors.Is(err, webhook.ErrMismatch) {
		t.Fatal("want true: errors.Is(err, webhook.ErrMismatch)")
	}
	_, err = none.Verify("", nil)
	if !errors.Is(err, webhook.ErrUnsigned) {
		t.Fatal("want true: errors.Is(err, webhook.ErrUnsigned)")
	}
}
