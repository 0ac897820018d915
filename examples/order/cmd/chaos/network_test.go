package main

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// A partition on a worker's link passes nothing until it is cleared,
// and clearing it closes the connections it held; a new connection then
// goes through. The other links are untouched.
func TestNetworkPartitionAndClear(t *testing.T) {
	echo := echoServer(t)
	n, err := startNetwork(2, map[string]string{linkRedis: echo})
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()

	c := dialLine(t, n.addr(0, linkRedis))
	other := dialLine(t, n.addr(1, linkRedis))
	if err := c.roundTrip("before"); err != nil {
		t.Fatal(err)
	}

	if err := partition(n, 0, linkRedis); err != nil {
		t.Fatal(err)
	}
	if err := c.roundTrip("during"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("across the partition: %v, want a deadline exceeded", err)
	}
	if err := other.roundTrip("beside"); err != nil {
		t.Fatalf("the partition reached another worker's link: %v", err)
	}

	n.clear(t.Context())
	if err := c.roundTrip("after"); err == nil {
		t.Fatal("the connection the partition held is still open")
	}
	if err := dialLine(t, n.addr(0, linkRedis)).roundTrip("again"); err != nil {
		t.Fatalf("a new connection after the partition: %v", err)
	}
}

func echoServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
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
