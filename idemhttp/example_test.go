package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemhttp"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// apiKeys is the service's own account table: each key names an account,
// and an account may hold several keys (a rotation).
var apiKeys = map[string]string{"key-1": "acct-7", "key-2": "acct-7"}

// authenticate is the service's authentication middleware: it names the
// caller's account in the request's context, or answers 401.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		account, ok := apiKeys[strings.TrimSpace(key)]
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			http.Error(w, "unknown API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(idemhttp.WithPrincipal(r.Context(), account)))
	})
}

// A POST behind the middleware runs once per account and key: the retry,
// sent with the account's other API key, gets the stored response.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(redisstore.Config{Client: client, Namespace: "example-idemhttp"})
	if err != nil {
		panic(err)
	}
	if keys, _ := client.Keys(context.Background(), "example-idemhttp:*").Result(); len(keys) > 0 {
		_ = client.Del(context.Background(), keys...) // start afresh on every run
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		panic(err)
	}
	digester, err := onceflow.NewDigester([]byte("a secret from your secret store"), 1)
	if err != nil {
		panic(err)
	}
	mw, err := idemhttp.New(idemhttp.Config{
		Executor: exec, Digester: digester, Code: "orders-api",
		Principal: idemhttp.ContextPrincipal, // the account authenticate named
	})
	if err != nil {
		panic(err)
	}
	orders := 0
	mux := http.NewServeMux()
	mux.Handle("POST /orders", authenticate(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		orders++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d\n", orders)
	}))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, apiKey := range []string{"key-1", "key-2"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"sku":"A-1"}`))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s replayed=%q\n", resp.StatusCode, strings.TrimSpace(string(body)), resp.Header.Get("Idempotency-Replayed"))
	}
	// Output:
	// 201 order 1 replayed=""
	// 201 order 1 replayed="true"
}
