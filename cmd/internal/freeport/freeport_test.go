package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestAPortIsGivenOnce: a Set never gives a port twice, nor one it was
// told the caller chose, although none of them is listened on when the
// next is picked (the services open theirs later, all at once): the dev
// Temporal server's history service was given its frontend's port and the
// frontend could not open it ("bind: address already in use").
func TestAPortIsGivenOnce(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1")
	s.Reserve(25000)
	seen := map[int]bool{25000: true}
	for range 2000 {
		p, err := s.Pick()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
	}
}

// TestAPortInUseIsNotGiven: a port something listens on is not given.
func TestAPortInUseIsNotGiven(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1")
	for range 200 {
		p, err := s.Pick()
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d was given but cannot be listened on: %v", p, err)
		}
		defer l.Close()
	}
}
