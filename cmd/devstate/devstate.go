// Package devstate is the state directory of `worker -dev`: where the
// embedded Temporal server, Redis and the example's ledger keep what
// outlives a run, the lock that keeps two -dev workers off one directory,
// and the endpoints file through which every command given -dev finds the
// running worker's servers. It starts nothing (package devserver does), so
// the operator commands can import it without linking a Temporal server.
//
// The directory holds:
//
//	temporal.db      the embedded Temporal server's SQLite database
//	temporal.log     its log (warnings and errors)
//	redis/           Redis' append-only file and log
//	ledger.db        the example order system's SQLite ledger
//	endpoints.json   the running worker's addresses (Endpoints)
//	lock             held by the running -dev worker
//	layout           the layout of the records Redis holds (CheckLayout)
package devstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// Files of the state directory.
const (
	TemporalDB    = "temporal.db"
	TemporalLog   = "temporal.log"
	RedisDir      = "redis"
	LedgerDB      = "ledger.db"
	EndpointsFile = "endpoints.json"
	LockFile      = "lock"
	LayoutFile    = "layout"
)

// ErrNotRunning: no -dev worker has written its endpoints to the state
// directory (none ran, or the last one stopped).
var ErrNotRunning = errors.New("devstate: no -dev worker is running")

// Dir is the state directory, created if missing: $ONCEFLOW_DEV_STATE_DIR,
// else $XDG_STATE_HOME/onceflow/dev, else ~/.local/state/onceflow/dev.
func Dir() (string, error) {
	dir, err := Path()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("devstate: create the state directory: %w", err)
	}
	return dir, nil
}

// Path is Dir's path, not created.
func Path() (string, error) {
	dir := os.Getenv("ONCEFLOW_DEV_STATE_DIR")
	if dir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("devstate: no state directory (set ONCEFLOW_DEV_STATE_DIR): %w", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(base, "onceflow", "dev")
	}
	return dir, nil
}

// LedgerDSN is the ledger -dev uses when none is given: ledger.db in Dir,
// which it creates.
func LedgerDSN() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	return "sqlite:" + filepath.Join(dir, LedgerDB), nil
}

// ReadLedgerDSN is LedgerDSN for commands that only read: the same DSN,
// without creating the state directory.
func ReadLedgerDSN() (string, error) {
	dir, err := Path()
	if err != nil {
		return "", err
	}
	return "sqlite:" + filepath.Join(dir, LedgerDB), nil
}

// Endpoints are where a running -dev worker's servers answer.
type Endpoints struct {
	TemporalAddress string    `json:"temporal_address"`
	Namespace       string    `json:"namespace"`
	RedisURL        string    `json:"redis_url"`
	HTTPAddr        string    `json:"http_addr,omitempty"`
	PID             int       `json:"pid"`
	RedisPID        int       `json:"redis_pid,omitempty"`
	Started         time.Time `json:"started"`
}

// WriteEndpoints writes e to dir's endpoints file, atomically.
func WriteEndpoints(dir string, e Endpoints) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, EndpointsFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("devstate: write the endpoints: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, EndpointsFile)); err != nil {
		return fmt.Errorf("devstate: write the endpoints: %w", err)
	}
	return nil
}

// RemoveEndpoints removes dir's endpoints file: the worker stopped.
func RemoveEndpoints(dir string) error {
	err := os.Remove(filepath.Join(dir, EndpointsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ReadEndpoints reads the running -dev worker's endpoints from the state
// directory (Path), creating nothing. Without a file the error wraps
// ErrNotRunning and says what to do.
func ReadEndpoints() (Endpoints, error) {
	dir, err := Path()
	if err != nil {
		return Endpoints{}, err
	}
	b, err := os.ReadFile(filepath.Join(dir, EndpointsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Endpoints{}, fmt.Errorf("%w with the state directory %s (no %s there): start one with `worker -dev` "+
			"(with this ONCEFLOW_DEV_STATE_DIR), or give the servers' addresses instead of -dev", ErrNotRunning, dir, EndpointsFile)
	}
	if err != nil {
		return Endpoints{}, fmt.Errorf("devstate: read the -dev worker's endpoints: %w", err)
	}
	var e Endpoints
	if err := json.Unmarshal(b, &e); err != nil {
		return Endpoints{}, fmt.Errorf("devstate: %s in %s is not an endpoints file (%w): restart `worker -dev`", EndpointsFile, dir, err)
	}
	return e, nil
}

// Reset deletes what dir holds for -dev: the Temporal database, Redis'
// data, the ledger, the layout and the endpoints file (not the lock,
// which the caller holds).
func Reset(dir string) error {
	var errs []error
	for _, name := range []string{TemporalDB, TemporalDB + "-wal", TemporalDB + "-shm", TemporalLog, RedisDir,
		LedgerDB, LedgerDB + "-wal", LedgerDB + "-shm", LedgerDB + "-journal", EndpointsFile, LayoutFile} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("devstate: reset %s: %w", dir, err)
	}
	return nil
}

// ErrOlderLayout: the state directory holds what a build of another
// record layout wrote (an older one: the layout file is missing, or names
// another). This build does not read those records, and migrates none.
var ErrOlderLayout = errors.New("devstate: the dev state was written by another build of onceflow, whose records this build does not read")

// layout is what the layout file of a state written by this build holds:
// the records' layout, as their keys name it.
var layout = "idem:v" + strconv.Itoa(redisstore.KeyLayoutVersion)

// CheckLayout refuses (ErrOlderLayout) a state directory that holds a
// Temporal database, Redis' data or a ledger written by a build whose
// records are in another layout than this one's
// (redisstore.KeyLayoutVersion): its layout file names another, or, for a
// build that wrote none, is missing. Its workflows would find none of
// their records (this build reads keys of its own layout only): run with
// -dev-reset to delete it. A directory without such state passes, and so
// does one of this layout; WriteLayout marks it so.
func CheckLayout(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, LayoutFile))
	switch {
	case err == nil && strings.TrimSpace(string(b)) == layout:
		return nil
	case err == nil:
		return fmt.Errorf("%w: %s holds records in the layout %q, and this build reads %q; run with -dev-reset to delete that state (its workflows, records and ledger) and start afresh",
			ErrOlderLayout, dir, strings.TrimSpace(string(b)), layout)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("devstate: read the state's layout: %w", err)
	}
	for _, name := range []string{TemporalDB, RedisDir, LedgerDB} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%w: %s holds a state (%s) of a build before the record layout %q, and this build has no migration; run with -dev-reset to delete that state (its workflows, records and ledger) and start afresh",
				ErrOlderLayout, dir, name, layout)
		}
	}
	return nil
}

// WriteLayout marks dir as holding records of this build's layout, for
// CheckLayout.
func WriteLayout(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, LayoutFile), []byte(layout+"\n"), 0o600); err != nil {
		return fmt.Errorf("devstate: write the state's layout: %w", err)
	}
	return nil
}
