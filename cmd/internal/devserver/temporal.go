//go:build !nodev

package devserver

import (
	"fmt"

	"go.temporal.io/server/temporaltest"
)

// startTemporal starts the in-process Temporal dev server. temporaltest
// panics instead of failing a test; that becomes an error.
func startTemporal() (addr, namespace string, stop func(), err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("devserver: start the embedded Temporal server: %v", p)
		}
	}()
	ts := temporaltest.NewServer()
	return ts.GetFrontendHostPort(), ts.GetDefaultNamespace(), ts.Stop, nil
}
