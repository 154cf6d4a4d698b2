package sandboxd

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNetProbe: the listener greets dialers until its stdin ends; a dial
// to a port nobody greets on fails.
func TestNetProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ProbeListen(context.Background(), port, inR, outW) }()
	sc := bufio.NewScanner(outR)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "addrs") || lines[1] != "listening" {
		t.Fatalf("listener said %q", lines)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for range 2 {
		if err := ProbeDial(context.Background(), addr, 2*time.Second); err != nil {
			t.Fatalf("dial: %v", err)
		}
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("listener: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the listener did not end with its stdin")
	}
	if err := ProbeDial(context.Background(), addr, time.Second); err == nil {
		t.Fatal("a dial with no listener succeeded")
	}
	// Something else on the port is not the probe.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		c, err := other.Accept()
		if err == nil {
			_, _ = io.WriteString(c, "SSH-2.0\n")
			c.Close()
		}
	}()
	if err := ProbeDial(context.Background(), other.Addr().String(), 2*time.Second); err == nil || !strings.Contains(err.Error(), "another program") {
		t.Fatalf("dial to another program: %v", err)
	}
}
