//go:build !nodev

package devserver

import (
	"errors"
	"fmt"
	"log/slog"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/onceflow/onceflow/cmd/internal/devtemporal"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// searchAttributes are what the workflows of the order system upsert:
// idemwf.PendingSearchAttribute, which `worker pending` and the
// onceflow_pending_recoveries gauge query.
func searchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{idemwf.PendingSearchAttribute: enumspb.INDEXED_VALUE_TYPE_INT}
}

// startTemporal starts the embedded Temporal server on addr, persisted to
// dbFile (in memory when empty), with namespaces and searchAttributes
// registered.
func startTemporal(addr, dbFile string, namespaces []string, log *slog.Logger) (string, func(), error) {
	srv, err := devtemporal.Start(devtemporal.Config{Address: addr, DBFile: dbFile, Namespaces: namespaces, Logger: log, SearchAttributes: searchAttributes()})
	if errors.Is(err, devtemporal.ErrAddressInUse) {
		return "", nil, fmt.Errorf("%w: choose another address for the embedded Temporal server with -dev-temporal-address (ONCEFLOW_DEV_TEMPORAL_ADDRESS), "+
			"or use the running server with -temporal-address", err)
	}
	if err != nil {
		return "", nil, err
	}
	return srv.Address(), func() { _ = srv.Stop() }, nil
}
