package telegram

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/internal/backoff"
	tgfake "conch/internal/testenv/telegram"
)

// cursors is an in-memory conch.CursorStore.
type cursors struct {
	mu sync.Mutex
	m  map[string]string
}

func newCursors() *cursors { return &cursors{m: map[string]string{}} }

func (c *cursors) Cursor(_ context.Context, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name], nil
}

func (c *cursors) SetCursor(_ context.Context, name, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name] = value
	return nil
}

var _ conch.CursorStore = (*cursors)(nil)

// handler records what the channel hands over; fail makes the next calls fail.
type handler struct {
	mu     sync.Mutex
	in     []conch.Inbound
	closed []conch.ConversationKey
	fail   int
	calls  int
	note   chan struct{}
}

func newHandler() *handler { return &handler{note: make(chan struct{}, 100)} }

var _ conch.Handler = (*handler)(nil)

func (h *handler) HandleInbound(_ context.Context, in conch.Inbound) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.fail > 0 {
		h.fail--
		return errors.New("store unavailable")
	}
	h.in = append(h.in, in)
	select {
	case h.note <- struct{}{}:
	default:
	}
	return nil
}

func (h *handler) Admits(context.Context, conch.ChannelName, ...conch.UserID) bool { return true }

func (h *handler) ConversationClosed(_ context.Context, key conch.ConversationKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = append(h.closed, key)
	select {
	case h.note <- struct{}{}:
	default:
	}
	return nil
}

func (h *handler) inbound() []conch.Inbound {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]conch.Inbound(nil), h.in...)
}

// wait waits until h got n messages.
func (h *handler) wait(t *testing.T, n int) []conch.Inbound {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if in := h.inbound(); len(in) >= n {
			return in
		}
		select {
		case <-h.note:
		case <-deadline:
			t.Fatalf("handler got %d message(s), want %d: %+v", len(h.inbound()), n, h.inbound())
		}
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("TELEGRAM_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// fastBackoff keeps failure tests quick; retry_after still counts in full.
var fastBackoff = backoff.Policy{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}

func newChannel(t *testing.T, srv *tgfake.Server, cur *cursors, mod ...func(*Options)) *Channel {
	t.Helper()
	opts := Options{Token: srv.Token, APIURL: srv.URL, Cursors: cur, Logger: testLogger(), PollTimeout: 2 * time.Second, Backoff: fastBackoff}
	for _, m := range mod {
		m(&opts)
	}
	ch, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// run starts ch.Run and stops it at the end of the test (or when stop is called).
func run(t *testing.T, ch *Channel, h conch.Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() { runErr = ch.Run(ctx, h); close(done) }()
	stop = func() error {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case <-ch.Ready():
	case <-done:
		t.Fatalf("Run ended before it was ready: %v", runErr)
	case <-time.After(10 * time.Second):
		t.Fatal("channel not ready")
	}
	return stop
}

func readAll(t *testing.T, a conch.Attachment) []byte {
	t.Helper()
	rc, err := a.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", a.Name, err)
	}
	return b
}

func key(chat int64) conch.ConversationKey { return keyOf(chat) }

var (
	alice = tgfake.Person(4242, "alice", "Alice")
	bob   = tgfake.Person(4343, "", "Bob")
	group = tgfake.Group(-1001234567890, "Team")
)

type rcloser = io.ReadCloser

func nopCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// pollOnce polls getUpdates once, as a second bot instance would.
func pollOnce(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}
