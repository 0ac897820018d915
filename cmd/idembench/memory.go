package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
)

// recordMemory is MEMORY USAGE of one record.
type recordMemory struct {
	what     string
	bytes    int64
	encoding string
}

// measureMemory writes records in each state the report lists and reads
// their MEMORY USAGE and encoding.
func (b *bench) measureMemory(ctx context.Context) ([]recordMemory, error) {
	s, e, err := b.executor(idemstore.ExecutorConfig{})
	if err != nil {
		return nil, err
	}
	usage := func(what, key string) (recordMemory, error) {
		n, err := b.rdb.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			return recordMemory{}, fmt.Errorf("MEMORY USAGE %s: %w", what, err)
		}
		enc, err := b.rdb.ObjectEncoding(ctx, key).Result()
		return recordMemory{what: what, bytes: n, encoding: enc}, err
	}
	var out []recordMemory

	// EXECUTING: an action in flight.
	req := idemstore.Request{Ref: onceflow.Ref{Code: "charge-payment", Digest: scope(-4, 0)}, Operation: "bench-memory", Fingerprint: b.fp}
	measured := make(chan error, 1)
	_, err = e.Execute(ctx, req, func(context.Context) ([]byte, error) {
		m, err := usage("EXECUTING", s.Key(req.Ref))
		out = append(out, m)
		measured <- err
		return b.resp, nil
	})
	if err := <-measured; err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	for i, size := range []int{0, 100, 1 << 10, 64 << 10} {
		req.Ref.Digest = scope(-5, i)
		resp := []byte(strings.Repeat("r", size))
		if _, err := e.Execute(ctx, req, func(context.Context) ([]byte, error) { return resp, nil }); err != nil {
			return nil, err
		}
		m, err := usage(fmt.Sprintf("COMPLETED, %s response", byteSize(size)), s.Key(req.Ref))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	// The naive code's record, the 100-byte response as a string under a
	// key of the same shape, for scale.
	key := s.Key(onceflow.Ref{Code: "charge-payment", Digest: scope(-6, 0)})
	if err := b.rdb.Set(ctx, key, b.resp, 0).Err(); err != nil {
		return nil, err
	}
	m, err := usage("naive: a string of the 100 B response", key)
	if err != nil {
		return nil, err
	}
	return append(out, m), nil
}

func byteSize(n int) string {
	switch {
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
