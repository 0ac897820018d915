package webhook_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemhttp/webhook"
)

// A receiver that knows one sender, "psp", in the middle of rotating its
// secret, and a delivery signed with the new secret.
func Example() {
	v, err := webhook.New(webhook.Config{
		Secrets: map[string][][]byte{"psp": {[]byte("whsec-old-0123456789abcdef"), []byte("whsec-new-0123456789abcdef")}},
	})
	if err != nil {
		panic(err)
	}
	// In a real receiver the idempotency middleware comes between them:
	// idemhttp.Config{Principal: idemhttp.ContextPrincipal, ...}.
	h := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sender, _ := idemhttp.ContextPrincipal(r)
		fmt.Fprintf(w, "event from %s", sender)
	}))

	body := []byte(`{"event_id":"evt-1","type":"payment.captured"}`)
	for _, sig := range []string{
		webhook.Sign(time.Now(), body, []byte("whsec-new-0123456789abcdef")),
		"", // unsigned
	} {
		req := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
		if sig != "" {
			req.Header.Set(webhook.SignatureHeader, sig)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// 200 text/plain; charset=utf-8
	// 401 application/problem+json
}
