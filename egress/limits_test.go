package egress

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestQueueOverflowEndsTunnel(t *testing.T) {
	q := newByteQueue()
	q.push(make([]byte, maxQueued))
	q.push([]byte("one byte too many"))
	if n, err := q.read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("after overflow read gave %d, %v; want the tunnel ended (EOF)", n, err)
	}
}

// oneByteReader hands out its data a byte at a time.
type oneByteReader struct{ data []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	p[0], r.data = r.data[0], r.data[1:]
	return 1, nil
}

func TestScrubBodyMasksSplitKeys(t *testing.T) {
	key := "sk-abcabd"
	for _, tc := range []struct{ in, want string }{
		{"x sk-abcabd y", "x ********* y"},
		{"sk-abcabdsk-abcabd", "******************"},
		{"sk-abcabsk-abcabd!", "sk-abcab*********!"}, // a near miss, then the key
		{"ends with sk-abc", "ends with sk-abc"},     // a beginning at EOF is released
		{"", ""},
	} {
		for _, r := range []io.Reader{strings.NewReader(tc.in), &oneByteReader{[]byte(tc.in)}} {
			s := &scrubBody{r: io.NopCloser(r), key: []byte(key), mask: []byte(strings.Repeat("*", len(key)))}
			got, err := io.ReadAll(s)
			if err != nil || string(got) != tc.want {
				t.Errorf("scrub %q (%T): got %q, %v; want %q", tc.in, r, got, err, tc.want)
			}
		}
	}
}

func TestQueueReadDeadline(t *testing.T) {
	q := newByteQueue()
	done := make(chan error, 1)
	go func() {
		_, err := q.read(make([]byte, 1))
		done <- err
	}()
	q.setDeadline(time.Now().Add(20 * time.Millisecond))
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past its deadline: got %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a pending read outlived its deadline")
	}
	q.setDeadline(time.Time{})
	q.push([]byte("x"))
	if n, err := q.read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("read after clearing the deadline: %d, %v", n, err)
	}
}
