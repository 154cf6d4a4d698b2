package matrix

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"

	"conch"
)

// cutMode is what cutTransport does to the next PUT …/send/….
type cutMode int32

const (
	passSends cutMode = iota
	// cutAfter lets the request reach the homeserver (the event is created)
	// and then fails it as if the process died before reading the answer.
	cutAfter
	// cutBefore fails the request before it leaves (no event).
	cutBefore
)

// cutTransport simulates a crash around a send: the send's context is
// cancelled (nothing retries it) and the send fails.
type cutTransport struct {
	mode     atomic.Int32
	lookups  atomic.Int32 // GET …/messages requests seen
	mu       sync.Mutex
	cancelFn context.CancelFunc
}

func (c *cutTransport) arm(mode cutMode, cancel context.CancelFunc) {
	c.mu.Lock()
	c.cancelFn = cancel
	c.mu.Unlock()
	c.mode.Store(int32(mode))
}

func (c *cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/messages") {
		c.lookups.Add(1)
	}
	if req.Method != http.MethodPut || !strings.Contains(req.URL.Path, "/send/") {
		return http.DefaultTransport.RoundTrip(req)
	}
	mode := cutMode(c.mode.Swap(int32(passSends)))
	c.mu.Lock()
	cancel := c.cancelFn
	c.mu.Unlock()
	switch mode {
	case cutAfter:
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		return nil, errors.New("test: connection cut after the request reached the homeserver")
	case cutBefore:
		cancel()
		return nil, errors.New("test: connection cut before the request left")
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestSendExactlyOnceAfterCrash: a reply sent before a restart, or whose
// event the homeserver created while conch died before recording it, is not
// sent again after the restart,
// although the homeserver does not deduplicate its transaction id (dendrite
// keys its transaction cache by access token, and the restarted conch has a
// new one); a reply that never reached the homeserver is sent on resume; a
// normal send looks nothing up.
func TestSendExactlyOnceAfterCrash(t *testing.T) {
	testSendExactlyOnce(t, false)
}

func testSendExactlyOnce(t *testing.T, encrypted bool) {
	e := newEnv(t)
	alice := e.newPeer("alice", encrypted)
	cut := &cutTransport{}
	opts := e.options(string(alice.id()))
	opts.HTTPClient = &http.Client{Transport: cut, Timeout: 30 * time.Second}
	b1 := e.startBot(opts)
	ctx := context.Background()

	room := alice.createRoom(encrypted, e.botID)
	alice.waitMessage(room, e.botID) // greeting
	key := keyOf(room)

	// A normal send: no lookup, no row left behind.
	if err := b1.Send(ctx, conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: "first answer", ID: "conch.test.t1.reply"}); err != nil {
		t.Fatal(err)
	}
	if n := cut.lookups.Load(); n != 0 {
		t.Fatalf("a normal send looked the room up %d time(s), want 0", n)
	}

	// The event is created, the process dies before it knows.
	answer := conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: "the answer", ID: "conch.test.t2.reply"}
	sendCtx, cancel := context.WithCancel(ctx)
	cut.arm(cutAfter, cancel)
	if err := b1.Send(sendCtx, answer); err == nil {
		t.Fatal("send cut after the request: got nil error")
	}
	if err := b1.stop(); err != nil {
		t.Fatal(err)
	}
	// The restart logs in again: a new access token for the same device,
	// so the homeserver's transaction cache does not know the id.
	login, err := e.hs.Login(ctx, "conch", string(b1.cli.DeviceID))
	if err != nil {
		t.Fatal(err)
	}
	opts.AccessToken = login.AccessToken
	b2 := e.startBot(opts)
	// A reply sent before the restart (its turn not marked done) is not
	// sent again, and needs no lookup.
	if err := b2.Send(ctx, conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: "first answer", ID: "conch.test.t1.reply"}); err != nil {
		t.Fatal(err)
	}
	if n := cut.lookups.Load(); n != 0 {
		t.Fatalf("re-sending a recorded reply looked the room up %d time(s), want 0", n)
	}
	if err := b2.Send(ctx, answer); err != nil {
		t.Fatalf("resumed send: %v", err)
	}
	if cut.lookups.Load() == 0 {
		t.Error("the resumed send did not look for the earlier event")
	}

	// The request never left: the resume sends it.
	lost := conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: "never left", ID: "conch.test.t3.reply"}
	sendCtx, cancel = context.WithCancel(ctx)
	cut.arm(cutBefore, cancel)
	if err := b2.Send(sendCtx, lost); err == nil {
		t.Fatal("send cut before the request: got nil error")
	}
	if err := b2.Send(ctx, lost); err != nil {
		t.Fatalf("resumed send of a message that never left: %v", err)
	}

	bodies := map[string]int{}
	txns := map[string]string{}
	for _, evt := range alice.botEvents(room, e.botID) {
		if encrypted {
			if evt.Type != event.EventEncrypted {
				t.Fatalf("bot event %s reached the server as %s in an encrypted room", evt.ID, evt.Type.Type)
			}
			evt.RoomID = room
			evt.Type.Class = event.MessageEventType
			if err := evt.Content.ParseRaw(evt.Type); err != nil {
				t.Fatal(err)
			}
			plain, err := alice.crypto.decrypt(ctx, evt)
			if err != nil {
				t.Fatalf("alice decrypts %s: %v", evt.ID, err)
			}
			evt = plain
		} else if err := evt.Content.ParseRaw(evt.Type); err != nil {
			t.Fatal(err)
		}
		body := evt.Content.AsMessage().Body
		bodies[body]++
		txns[body], _ = evt.Content.Raw[outboundIDKey].(string)
	}
	for _, want := range []struct{ body, txn string }{
		{"first answer", "conch.test.t1.reply.0"},
		{"the answer", "conch.test.t2.reply.0"},
		{"never left", "conch.test.t3.reply.0"},
	} {
		if bodies[want.body] != 1 {
			t.Errorf("%q: %d event(s) in the room, want exactly 1 (all bot messages: %v)", want.body, bodies[want.body], bodies)
		}
		if txns[want.body] != want.txn {
			t.Errorf("%q: content %s = %q, want %q", want.body, outboundIDKey, txns[want.body], want.txn)
		}
	}
	var rows, unfinished int
	if err := e.db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE event_id IS NULL) FROM conch_matrix_sending`).Scan(&rows, &unfinished); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || unfinished != 0 {
		t.Errorf("conch_matrix_sending: %d row(s), %d without an event, want 3 with their events", rows, unfinished)
	}
}
