// Package freeport picks loopback ports for the services of one process
// that are opened later, all at once (a Temporal server's frontend,
// history, matching and worker): each free when it was picked, none picked
// twice, and below Linux's default range of ephemeral ports (32768 to
// 60999) where it can, so that no outgoing connection takes one in
// between.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
)

// Set hands out the ports of one process' services. Its zero value is not
// usable: call New.
type Set struct {
	host  string
	taken map[int]bool
}

// New returns a Set for ports of host.
func New(host string) *Set { return &Set{host: host, taken: map[int]bool{}} }

// Reserve marks port as given (one the caller chose), so that Pick never
// returns it.
func (s *Set) Reserve(port int) { s.taken[port] = true }

// Pick returns a port that nothing listened on when it was picked and that
// the Set has not given before. The port is closed again before the
// service opens it; a port below the ephemeral range cannot be taken in
// between by an outgoing connection, and one the Set gave cannot be given
// to another of the process' services, which do not listen yet.
func (s *Set) Pick() (int, error) {
	for range 64 {
		p := 20000 + rand.IntN(32768-20000)
		if s.taken[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(s.host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		s.taken[p] = true
		return p, l.Close()
	}
	for range 64 {
		l, err := net.Listen("tcp", net.JoinHostPort(s.host, "0"))
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, err
		}
		if !s.taken[p] {
			s.taken[p] = true
			return p, nil
		}
	}
	return 0, errors.New("freeport: every free port found was given already")
}
