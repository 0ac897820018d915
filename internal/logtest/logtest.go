// Package logtest turns log lines into signals for tests: a test waits on
// what the code under test says it is doing, instead of sleeping.
package logtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// OnMessage returns a logger that calls fire, once, when a record's
// message starts with prefix. It takes every level.
func OnMessage(prefix string, fire func()) *slog.Logger {
	return slog.New(&onMessage{prefix: prefix, fire: sync.OnceFunc(fire)})
}

type onMessage struct {
	prefix string
	fire   func()
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }

func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.fire()
	}
	return nil
}

func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onMessage) WithGroup(string) slog.Handler      { return h }
