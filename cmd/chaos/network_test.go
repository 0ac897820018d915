package main

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A partition on a worker's link passes nothing until it is cleared,
// and clearing it closes the connections it held; a new connection then
// goes through. The other links are untouched.
func TestNetworkPartitionAndClear(t *testing.T) {
	echo := echoServer(t)
	n, err := startNetwork(2, map[string]string{linkRedis: echo})
	require.NoError(t, err)
	defer n.close()

	c := dialLine(t, n.addr(0, linkRedis))
	other := dialLine(t, n.addr(1, linkRedis))
	require.NoError(t, c.roundTrip("before"))

	require.NoError(t, partition(n, 0, linkRedis))
	err = c.roundTrip("during")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a line crossed the partition")
	require.NoError(t, other.roundTrip("beside"), "the partition reached another worker's link")

	n.clear(t.Context())
	require.Error(t, c.roundTrip("after"), "the connection the partition held is still open")
	require.NoError(t, dialLine(t, n.addr(0, linkRedis)).roundTrip("again"))
}

func echoServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

type lineConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialLine(t *testing.T, addr string) *lineConn {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &lineConn{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and reads it back within 500ms.
func (l *lineConn) roundTrip(s string) error {
	_ = l.c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := l.c.Write([]byte(s + "\n")); err != nil {
		return err
	}
	got, err := l.r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != s+"\n" {
		return errors.New("echoed " + got)
	}
	return nil
}
