//go:build nodev

package devserver

import (
	"errors"
	"log/slog"
)

// errNoDevServer: this binary was built without the embedded Temporal
// server.
var errNoDevServer = errors.New("devserver: this worker was built with -tags nodev and embeds no Temporal server; " +
	"give -temporal-address (TEMPORAL_ADDRESS) of a running one, or use a build without the tag: go build ./cmd/worker")

func startTemporal(string, string, []string, *slog.Logger) (string, func(), error) {
	return "", nil, errNoDevServer
}
