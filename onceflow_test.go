package onceflow_test

import (
	"slices"
	"testing"

	"github.com/onceflow/onceflow"
)

// The scopes are part of every stored record's key: a change to one
// orphans every record made under it. They are exactly what the bindings
// spelled before they were gathered here.
func TestScopesAreStable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		got, want onceflow.RawScope
	}{
		{onceflow.RunScope("ns", "wf", "run", "7"), onceflow.RawScope{"run", "ns", "wf", "run", "7"}},
		{onceflow.WorkflowScope("ns", "wf", "7"), onceflow.RawScope{"workflow", "ns", "wf", "7"}},
		{onceflow.BusinessScope("ns", "order-42/charge"), onceflow.RawScope{"business", "ns", "order-42/charge"}},
		{onceflow.HTTPScope("anonymous", "POST", "POST /orders", "k"), onceflow.RawScope{"http", "anonymous", "POST", "POST /orders", "k"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("scope %q, want %q", c.got, c.want)
		}
	}
}

func TestFenceOrdersEpochFirst(t *testing.T) {
	t.Parallel()
	zombie := onceflow.Fence{Epoch: 1000, Attempt: 9, Rev: 20}
	fresh := onceflow.Fence{Epoch: 2000, Attempt: 1, Rev: 1}
	if !zombie.Less(fresh) || fresh.Less(zombie) || zombie.Less(zombie) {
		t.Fatalf("%v vs %v: the newer epoch must win", zombie, fresh)
	}
	if s := fresh.String(); s != "1.1@2000" {
		t.Fatalf("String() = %q", s)
	}
	if s := (onceflow.Fence{Attempt: 2, Rev: 3}).String(); s != "2.3" {
		t.Fatalf("String() without an epoch = %q", s)
	}
}
