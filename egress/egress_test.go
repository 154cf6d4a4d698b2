package egress_test

import (
	"bufio"
	"context"
	"net"
	"testing"
)

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// lineEcho is a ConnServer that answers each line with "echo: " and the
// line, for tests of the transport.
type lineEcho struct{}

func (lineEcho) ServeConn(_ context.Context, c net.Conn) error {
	defer c.Close()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if _, err := c.Write([]byte("echo: " + sc.Text() + "\n")); err != nil {
			return err
		}
	}
	return sc.Err()
}
