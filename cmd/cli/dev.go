package cli

import (
	"fmt"

	"github.com/onceflow/onceflow/cmd/devstate"
	"github.com/onceflow/onceflow/worker"
)

// Needs says which servers a command given -dev talks to.
type Needs struct{ Temporal, Redis bool }

// UseDevEndpoints fills in c's TemporalAddress and Namespace (with
// need.Temporal) and RedisURL (with need.Redis), where flags and
// environment left them empty, from the running -dev worker's endpoints
// file (package devstate), so no address has to be exported. command
// prefixes the error, which says what to do when no -dev worker runs.
func UseDevEndpoints(c *worker.Config, need Needs, command string) error {
	if !(need.Temporal && (c.TemporalAddress == "" || c.Namespace == "")) && !(need.Redis && c.RedisURL == "") {
		return nil
	}
	e, err := devstate.ReadEndpoints()
	if err != nil {
		return fmt.Errorf("%s -dev: %w", command, err)
	}
	if need.Temporal {
		if c.TemporalAddress == "" {
			c.TemporalAddress = e.TemporalAddress
		}
		if c.Namespace == "" {
			c.Namespace = e.Namespace
		}
	}
	if need.Redis && c.RedisURL == "" {
		c.RedisURL = e.RedisURL
	}
	return nil
}

// Defaults fills in what is still empty of c's connection with the
// worker's defaults (what a command uses without -dev).
func Defaults(c *worker.Config) {
	d := worker.DefaultConfig()
	if c.TemporalAddress == "" {
		c.TemporalAddress = d.TemporalAddress
	}
	if c.Namespace == "" {
		c.Namespace = d.Namespace
	}
	if c.RedisURL == "" {
		c.RedisURL = d.RedisURL
	}
	if c.KeyNamespace == "" {
		c.KeyNamespace = d.KeyNamespace
	}
	if c.TaskQueue == "" {
		c.TaskQueue = d.TaskQueue
	}
}
