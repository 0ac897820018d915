package workflow_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWorkflowCodeDoesNotImportTheRuntime keeps deterministic workflow
// code apart from the activity runtime: package workflow must not depend
// on package activity, the executor (idemstore), Redis or OpenTelemetry.
// What they share is package onceflow, which imports only the standard
// library, and their handshake (internal/handshake), which imports only
// onceflow.
func TestWorkflowCodeDoesNotImportTheRuntime(t *testing.T) {
	t.Parallel()
	for pkg, forbidden := range map[string][]string{
		"github.com/onceflow/onceflow/workflow": {
			"github.com/onceflow/onceflow/activity", "github.com/onceflow/onceflow/idemstore",
			"github.com/onceflow/onceflow/idemstore/redisstore", "github.com/redis/go-redis/v9", "go.opentelemetry.io/otel",
		},
		"github.com/onceflow/onceflow": {"go.temporal.io/sdk", "github.com/onceflow/onceflow/idemstore"},
		"github.com/onceflow/onceflow/internal/handshake": {"go.temporal.io/sdk", "github.com/onceflow/onceflow/activity",
			"github.com/onceflow/onceflow/workflow", "github.com/onceflow/onceflow/idemstore"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, bad := range forbidden {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
