//go:build !nodev

package devserver

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/onceflow/onceflow/cmd/internal/devtemporal"
)

// startTemporal starts the embedded Temporal server on addr, persisted to
// dbFile (in memory when empty), with namespaces registered.
func startTemporal(addr, dbFile string, namespaces []string, log *slog.Logger) (string, func(), error) {
	srv, err := devtemporal.Start(devtemporal.Config{Address: addr, DBFile: dbFile, Namespaces: namespaces, Logger: log})
	if errors.Is(err, devtemporal.ErrAddressInUse) {
		return "", nil, fmt.Errorf("%w: choose another address for the embedded Temporal server with -dev-temporal-address (ONCEFLOW_DEV_TEMPORAL_ADDRESS), "+
			"or use the running server with -temporal-address", err)
	}
	if err != nil {
		return "", nil, err
	}
	return srv.Address(), func() { _ = srv.Stop() }, nil
}
