package onceflow_test

import (
	"testing"

	"github.com/onceflow/onceflow"
)

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
