package idemstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/idemstore/storetest"
)

// The executor on a real redis-server, one goroutine: go test -bench
// Execute -benchmem ./idemstore/. cmd/idembench compares it with its floor.

func benchExecutor(b *testing.B) *idemstore.Executor {
	b.Helper()
	s, err := redisstore.New(redisstore.Config{Client: redistest.Client(b), Namespace: redistest.Namespace(b)})
	if err != nil {
		b.Fatal(err)
	}
	e, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

var benchResponse = make([]byte, 100)

func benchAction(context.Context) ([]byte, error) { return benchResponse, nil }

func BenchmarkExecuteFresh(b *testing.B) {
	e := benchExecutor(b)
	f := storetest.NewFixture()
	prefix := f.Ref.Digest.Hex[:48]
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := request(f)
		n := strconv.FormatInt(int64(i), 16)
		req.Ref.Digest.Hex = prefix + "0000000000000000"[len(n):] + n
		if _, err := e.Execute(b.Context(), req, benchAction); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExecuteReplay(b *testing.B) {
	e := benchExecutor(b)
	req := request(storetest.NewFixture())
	if _, err := e.Execute(b.Context(), req, benchAction); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.Execute(b.Context(), req, benchAction)
		if err != nil || res.Outcome != onceflow.OutcomeReplayed {
			b.Fatal(res, err)
		}
	}
}
