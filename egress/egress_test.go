package egress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch/egress"
)

// echoServer answers every connection by echoing it.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

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

func startProxy(t *testing.T, o egress.Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- egress.New(o).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// request sends raw to the proxy and returns the status line and the
// connection, positioned after the response head.
func request(t *testing.T, proxy, raw string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", raw, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + strings.TrimSpace(string(body)), c, br
	}
	return resp.Status, c, br
}

func connect(target string) string {
	return fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
}

func TestTunnelToAllowedHost(t *testing.T) {
	port := echoServer(t)
	events := make(chan egress.Event, 4)
	proxy := startProxy(t, egress.Options{
		Hosts: []string{"localhost"}, Ports: []int{port}, AllowPrivate: true,
		OnTunnel: func(e egress.Event) { events <- e },
	})
	status, c, br := request(t, proxy, connect("localhost:"+strconv.Itoa(port)))
	if status != "200 Connection established" {
		t.Fatalf("CONNECT: got %q, want 200", status)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("through the tunnel: got %q, %v; want the echo", line, err)
	}
	c.Close()
	// The event comes when the tunnel ends.
	select {
	case e := <-events:
		if !e.Allowed || e.Up != 5 || e.Down != 5 {
			t.Fatalf("event: got %+v, want an allowed tunnel with 5 bytes each way", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after the tunnel closed")
	}
}

func TestRefusals(t *testing.T) {
	port := echoServer(t)
	p := strconv.Itoa(port)
	closed := closedPort(t)
	open := startProxy(t, egress.Options{Hosts: []string{"localhost", "*.example.org"}, Ports: []int{port, closed}, AllowPrivate: true})
	strict := startProxy(t, egress.Options{Hosts: []string{"localhost"}, Ports: []int{port}})
	for _, tc := range []struct {
		name, proxy, raw, want string
	}{
		{"host not allowed", open, connect("evil.test:" + p), "403 Forbidden conch egress: host evil.test is not allowed"},
		{"wildcard needs a subdomain", open, connect("example.org:" + p), "403 Forbidden conch egress: host example.org is not allowed"},
		{"port not allowed", open, connect("localhost:22"), "403 Forbidden conch egress: port 22 is not allowed"},
		{"address literal", open, connect("127.0.0.1:" + p), "403 Forbidden conch egress: an address instead of a host name"},
		{"plain HTTP", open, "GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n", "405 Method Not Allowed conch egress: only CONNECT tunnels are allowed"},
		{"garbage", open, "hello\r\n\r\n", "400 Bad Request conch egress: bad request"},
		{"no port", open, "CONNECT localhost HTTP/1.1\r\nHost: localhost\r\n\r\n", "400 Bad Request conch egress: target is not host:port"},
		{"private address", strict, connect("localhost:" + p), "403 Forbidden conch egress: host resolves to a non-public address"},
		{"upstream refuses", open, connect("localhost:" + strconv.Itoa(closed)), "502 Bad Gateway conch egress: connect failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, _ := request(t, tc.proxy, tc.raw)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
