package scope_test

import (
	"slices"
	"testing"

	"github.com/onceflow/onceflow/internal/scope"
)

// The scopes are part of every stored record's key: a change to one
// orphans every record made under it. They are exactly what the bindings
// spelled before they were gathered here.
func TestScopesAreStable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		got, want scope.Raw
	}{
		{scope.Run("ns", "wf", "run", "7"), scope.Raw{"run", "ns", "wf", "run", "7"}},
		{scope.Workflow("ns", "wf", "7"), scope.Raw{"workflow", "ns", "wf", "7"}},
		{scope.Standalone("ns", "a-1"), scope.Raw{"standalone", "ns", "a-1"}},
		{scope.Business("ns", "order-42/charge"), scope.Raw{"business", "ns", "order-42/charge"}},
		{scope.HTTP("anonymous", "POST", "POST /orders", "k"), scope.Raw{"http", "anonymous", "POST", "POST /orders", "k"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("scope %q, want %q", c.got, c.want)
		}
	}
}
