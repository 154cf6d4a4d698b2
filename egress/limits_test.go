package egress

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// silentStream is a client stream that never sends anything until closed.
type silentStream struct {
	closed chan struct{}
}

func (s *silentStream) Read([]byte) (int, error) { <-s.closed; return 0, io.EOF }
func (s *silentStream) Write(p []byte) (int, error) {
	select {
	case <-s.closed:
		return 0, io.ErrClosedPipe
	default:
		return len(p), nil
	}
}
func (s *silentStream) Close() error {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}

func TestSilentClientIsClosed(t *testing.T) {
	p := New(Options{Hosts: []string{"example.org"}, RequestTimeout: 50 * time.Millisecond})
	s := &silentStream{closed: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- p.ServeConn(context.Background(), s) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no request within") {
			t.Fatalf("got %v, want the request timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a client that never sent a request held its stream")
	}
}

func TestQueueOverflowEndsTunnel(t *testing.T) {
	q := newByteQueue()
	q.push(make([]byte, maxQueued))
	q.push([]byte("one byte too many"))
	if n, err := q.read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("after overflow read gave %d, %v; want the tunnel ended (EOF)", n, err)
	}
}
