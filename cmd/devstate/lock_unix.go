//go:build unix

package devstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrLocked: another -dev worker holds the state directory.
var ErrLocked = errors.New("devstate: another -dev worker uses the state directory")

// Lock takes dir's lock, which the process holds until unlock or exit
// (the kernel drops it when the process dies, however it dies).
func Lock(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devstate: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s): stop it, or give this one another directory with ONCEFLOW_DEV_STATE_DIR", ErrLocked, dir)
		}
		return nil, fmt.Errorf("devstate: lock %s: %w", dir, err)
	}
	return func() { _ = f.Close() }, nil
}
