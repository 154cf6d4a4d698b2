package discord

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/internal/backoff"
	dcfake "conch/internal/testenv/discord"
)

// cursors is an in-memory conch.CursorStore.
type cursors struct {
	mu sync.Mutex
	m  map[string]string
	// fail makes the next SetCursor calls fail (a full disk).
	fail int
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
	if c.fail > 0 {
		c.fail--
		return errors.New("disk full")
	}
	c.m[name] = value
	return nil
}

var _ conch.CursorStore = (*cursors)(nil)

// handler records what the channel hands over, refusing a second copy of
// a message by its external id as the store does; fail makes the next
// calls fail.
type handler struct {
	mu    sync.Mutex
	in    []conch.Inbound
	seen  map[string]bool
	fail  int
	calls int
	// hang: a message is stored, then HandleInbound never returns (until
	// the channel stops), as when conch is killed right after the store.
	hang bool
}

func newHandler() *handler { return &handler{seen: map[string]bool{}} }

var _ conch.Handler = (*handler)(nil)

func (h *handler) HandleInbound(ctx context.Context, in conch.Inbound) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hang {
		h.seen[in.ExternalID] = true
		h.in = append(h.in, in)
		h.mu.Unlock()
		<-ctx.Done()
		h.mu.Lock()
		return ctx.Err()
	}
	h.calls++
	if h.fail > 0 {
		h.fail--
		return errors.New("store unavailable")
	}
	if h.seen[in.ExternalID] {
		return nil
	}
	h.seen[in.ExternalID] = true
	h.in = append(h.in, in)
	return nil
}

func (h *handler) Admits(context.Context, conch.ChannelName, ...conch.UserID) bool { return true }

func (h *handler) ConversationClosed(context.Context, conch.ConversationKey) error { return nil }

func (h *handler) inbound() []conch.Inbound {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]conch.Inbound(nil), h.in...)
}

// waitInbound waits until n messages were handed over.
func (h *handler) waitInbound(t *testing.T, n int) []conch.Inbound {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if in := h.inbound(); len(in) >= n {
			return in
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d message(s) handed over, want %d: %+v", len(h.inbound()), n, h.inbound())
	return nil
}

// env is a channel running against the fake.
type env struct {
	srv     *dcfake.Server
	ch      *Channel
	h       *handler
	cursors *cursors
	stop    func()
}

func opts(srv *dcfake.Server, cs *cursors) Options {
	return Options{Token: srv.Token, APIURL: srv.APIURL(), Cursors: cs,
		Backoff: backoff.Policy{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond}}
}

// start runs a channel against srv until the test ends (or stop), and
// waits for its Gateway session.
func start(t *testing.T, srv *dcfake.Server, cs *cursors, mod ...func(*Options)) *env {
	t.Helper()
	o := opts(srv, cs)
	for _, m := range mod {
		m(&o)
	}
	ch, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, ch: ch, h: newHandler(), cursors: cs}
	_, before, _ := srv.Gateway()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, e.h) }()
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(e.stop)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := srv.Wait(wctx, func() bool { open, ids, _ := srv.Gateway(); return open > 0 && ids > before }); err != nil {
		t.Fatal("the channel never identified on the Gateway")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ch.mu.Lock()
		n := ch.health.sessions
		ch.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no READY")
		}
	}
	return e
}
