package matrix

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
)

// TestInviteMessageReplyTypingEdit covers the life of a plain room: invite →
// join + greeting, message → Inbound, reply as HTML, typing, edit in place,
// and a second room kept apart.
func TestInviteMessageReplyTypingEdit(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", false)
	b := e.startBot(e.options(string(alice.id())))
	ctx := context.Background()

	room := alice.createRoom(false, e.botID)
	greeting := alice.waitMessage(room, e.botID)
	gc := greeting.Content.AsMessage()
	if gc.MsgType != event.MsgNotice || gc.Body != DefaultGreeting {
		t.Fatalf("greeting: got %s %q, want m.notice %q", gc.MsgType, gc.Body, DefaultGreeting)
	}

	sent := alice.send(room, "hello **there**")
	in := b.rec.next(t)
	want := conch.Inbound{Key: keyOf(room), Sender: conch.UserID(alice.id()), Text: "hello **there**", ExternalID: sent.String()}
	if in.Key != want.Key || in.Sender != want.Sender || in.Text != want.Text || in.ExternalID != want.ExternalID {
		t.Fatalf("inbound: got %+v, want %+v", in, want)
	}
	if in.ReceivedAt.IsZero() || time.Since(in.ReceivedAt) > time.Minute {
		t.Fatalf("inbound ReceivedAt: got %v, want about now", in.ReceivedAt)
	}

	t.Run("reply is HTML with a Markdown body", func(t *testing.T) {
		md := "Here is **bold**, `code` and <script>alert(1)</script>\n\n```go\nfmt.Println(1)\n```"
		if err := b.Send(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: md, InReplyTo: in.ExternalID}); err != nil {
			t.Fatal(err)
		}
		got := alice.waitMessage(room, e.botID).Content.AsMessage()
		if got.MsgType != event.MsgText || got.Body != md || got.Format != event.FormatHTML {
			t.Fatalf("reply: got %s format %q body %q, want m.text html with the Markdown body", got.MsgType, got.Format, got.Body)
		}
		for _, s := range []string{"<strong>bold</strong>", "<code>code</code>", `<code class="language-go">`} {
			if !strings.Contains(got.FormattedBody, s) {
				t.Errorf("formatted_body %q: want it to contain %q", got.FormattedBody, s)
			}
		}
		if strings.Contains(got.FormattedBody, "<script") {
			t.Errorf("formatted_body %q: want no script tag", got.FormattedBody)
		}
		if got.RelatesTo == nil || got.RelatesTo.GetReplyTo() != sent {
			t.Errorf("reply relation: got %+v, want in reply to %s", got.RelatesTo, sent)
		}
	})

	t.Run("a resent reply with the same id is not doubled", func(t *testing.T) {
		out := conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "exactly once", ID: "conch.test.t1.reply"}
		before := len(alice.botEvents(room, e.botID))
		for range 3 {
			if err := b.Send(ctx, out); err != nil {
				t.Fatal(err)
			}
		}
		alice.waitMessage(room, e.botID)
		if got := len(alice.botEvents(room, e.botID)) - before; got != 1 {
			t.Fatalf("the homeserver holds %d copies of a reply sent three times with one id, want 1", got)
		}
	})

	t.Run("typing", func(t *testing.T) {
		if err := b.SetTyping(ctx, in.Key, true); err != nil {
			t.Fatal(err)
		}
		alice.waitFor("bot typing", func(evt *event.Event) bool {
			if evt.Type != event.EphemeralEventTyping || evt.RoomID != room {
				return false
			}
			for _, u := range evt.Content.AsTyping().UserIDs {
				if string(u) == e.botID {
					return true
				}
			}
			return false
		})
		if err := b.SetTyping(ctx, in.Key, false); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("edit in place", func(t *testing.T) {
		ref, err := b.SendEditable(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundProgress, Text: "step 1"})
		if err != nil {
			t.Fatal(err)
		}
		first := alice.waitMessage(room, e.botID)
		if first.ID.String() != ref.ID || first.Content.AsMessage().Body != "step 1" {
			t.Fatalf("editable: got %s %q, want %s \"step 1\"", first.ID, first.Content.AsMessage().Body, ref.ID)
		}
		if err := b.Edit(ctx, ref, "step *2*"); err != nil {
			t.Fatal(err)
		}
		edit := alice.waitMessage(room, e.botID).Content.AsMessage()
		if edit.RelatesTo == nil || edit.RelatesTo.Type != event.RelReplace || edit.RelatesTo.EventID.String() != ref.ID {
			t.Fatalf("edit relation: got %+v, want m.replace of %s", edit.RelatesTo, ref.ID)
		}
		if edit.NewContent == nil || edit.NewContent.Body != "step *2*" || !strings.Contains(edit.NewContent.FormattedBody, "<em>2</em>") {
			t.Fatalf("edit new content: got %+v, want body \"step *2*\" with <em>", edit.NewContent)
		}
		if edit.NewContent.MsgType != event.MsgNotice {
			t.Fatalf("edit msgtype: got %s, want m.notice like the original", edit.NewContent.MsgType)
		}
	})

	t.Run("second room", func(t *testing.T) {
		room2 := alice.createRoom(false, e.botID)
		alice.waitMessage(room2, e.botID) // greeting
		alice.send(room2, "in room two")
		in2 := b.rec.nextWithText(t, "in room two")
		if in2.Key != keyOf(room2) || in2.Key == in.Key {
			t.Fatalf("second room key: got %v, want %v", in2.Key, keyOf(room2))
		}
		if err := b.Send(ctx, conch.Outbound{Key: in2.Key, Kind: conch.OutboundReply, Text: "two"}); err != nil {
			t.Fatal(err)
		}
		if got := alice.waitMessage(room2, e.botID).Content.AsMessage().Body; got != "two" {
			t.Fatalf("reply in room two: got %q, want %q", got, "two")
		}
	})

	t.Run("long reply is split", func(t *testing.T) {
		para := strings.Repeat("word ", 1000) // 5000 bytes
		text := strings.TrimSpace(strings.Repeat(para+"\n\n", 8))
		if err := b.Send(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: text}); err != nil {
			t.Fatal(err)
		}
		var bodies []string
		total := 0
		for total < len(strings.ReplaceAll(text, "\n\n", "")) {
			body := alice.waitMessage(room, e.botID).Content.AsMessage().Body
			if len(body) > maxChunkBytes {
				t.Fatalf("part of %d bytes, want at most %d", len(body), maxChunkBytes)
			}
			bodies = append(bodies, body)
			total += len(strings.ReplaceAll(body, "\n\n", ""))
		}
		if got := strings.Join(bodies, "\n\n"); got != text {
			t.Fatalf("parts joined: got %d bytes, want the %d-byte text back", len(got), len(text))
		}
		if len(bodies) < 2 {
			t.Fatalf("parts: got %d, want several", len(bodies))
		}
	})

	if st := b.Status(ctx, in.Key); len(st) != 0 {
		t.Errorf("status of a healthy room: got %q, want nothing", st)
	}
}

// TestRestart: a new Channel on the same store neither replays nor loses
// messages, keeps its device, and joins an invite received while down
// without a greeting.
func TestRestart(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", false)
	opts := e.options(string(alice.id()))
	opts.AccessToken, opts.Password = "", e.hs.Password("conch")
	b1 := e.startBot(opts)
	ctx := context.Background()

	room := alice.createRoom(false, e.botID)
	alice.waitMessage(room, e.botID) // greeting
	alice.send(room, "before")
	b1.rec.nextWithText(t, "before")
	device1 := b1.cli.DeviceID
	if err := b1.stop(); err != nil {
		t.Fatalf("Run after cancel: got %v, want nil", err)
	}

	alice.send(room, "while down")
	room2 := alice.createRoom(false, e.botID)

	b2 := e.startBot(opts)
	if b2.cli.DeviceID != device1 {
		t.Fatalf("device after restart: got %s, want %s (reused)", b2.cli.DeviceID, device1)
	}
	in := b2.rec.nextWithText(t, "while down")
	if in.Key != keyOf(room) {
		t.Fatalf("key: got %v, want %v", in.Key, keyOf(room))
	}
	alice.waitJoined(room2, e.botID)
	b2.rec.setReply(func(in conch.Inbound) {
		_ = b2.Send(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "pong"})
	})
	alice.send(room2, "ping")
	b2.rec.nextWithText(t, "ping")
	alice.waitMessage(room2, e.botID)
	var bodies []string
	for _, evt := range alice.botEvents(room2, e.botID) {
		_ = evt.Content.ParseRaw(evt.Type)
		bodies = append(bodies, evt.Content.AsMessage().Body)
	}
	if len(bodies) != 1 || bodies[0] != "pong" {
		t.Fatalf("bot messages in the room joined while down: got %q, want only [pong] (no greeting)", bodies)
	}
	for _, in := range b2.rec.all() {
		if in.Text == "before" {
			t.Fatalf("message handled before the restart was delivered again: %+v", in)
		}
	}
}

// TestDropsAndPolicies: unknown senders get nothing, group rooms follow the
// policy, mention-only, and malformed or huge events are ignored with a log line.
func TestDropsAndPolicies(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", false)
	bob := e.newPeer("bob", false)
	mallory := e.newPeer("mallory", false)
	opts := e.options(string(alice.id()), string(bob.id()))
	opts.MentionOnly = true
	b := e.startBot(opts)

	// alice's direct room is the barrier: the homeserver orders all events,
	// so once a later message there is delivered, earlier ones were seen.
	dm := alice.createRoom(false, e.botID)
	alice.waitMessage(dm, e.botID)
	barrier := func(text string) {
		t.Helper()
		alice.send(dm, text)
		b.rec.nextWithText(t, text)
	}

	t.Run("unknown sender's invite is ignored", func(t *testing.T) {
		room := mallory.createRoom(false, e.botID)
		barrier("after mallory's invite")
		members, err := mallory.cli.JoinedMembers(context.Background(), room)
		if err != nil {
			t.Fatal(err)
		}
		if _, in := members.Joined[id.UserID(e.botID)]; in {
			t.Fatal("bot joined a room an unknown user invited it to")
		}
		if got := mallory.botEvents(room, e.botID); len(got) != 0 {
			t.Fatalf("bot sent %d event(s) to an unknown user, want none", len(got))
		}
	})

	t.Run("unknown sender in an allowed room is dropped", func(t *testing.T) {
		room := alice.createRoom(false, e.botID, string(mallory.id()))
		alice.waitMessage(room, e.botID)
		if _, err := mallory.cli.JoinRoomByID(context.Background(), room); err != nil {
			t.Fatal(err)
		}
		mallory.send(room, "conch: obey me")
		barrier("after mallory spoke")
		if strings.Contains(e.logs.String(), "obey me") {
			t.Fatal("the dropped message's text reached the log")
		}
	})

	t.Run("mention only in groups", func(t *testing.T) {
		room := alice.createRoom(false, e.botID, string(bob.id()))
		alice.waitMessage(room, e.botID)
		if _, err := bob.cli.JoinRoomByID(context.Background(), room); err != nil {
			t.Fatal(err)
		}
		alice.waitJoined(room, string(bob.id()))
		alice.send(room, "just chatting with bob")
		alice.send(room, "conch: list the files")
		in := b.rec.next(t)
		if in.Text != "list the files" || in.Key != keyOf(room) {
			t.Fatalf("mentioned message: got %q in %s, want \"list the files\" in %s", in.Text, in.Key.ID, room)
		}
		alice.sendContent(room, &event.MessageEventContent{MsgType: event.MsgText, Body: "please check", Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(e.botID)}}})
		b.rec.nextWithText(t, "please check")
	})

	t.Run("malformed and huge events", func(t *testing.T) {
		alice.sendContent(dm, map[string]any{"msgtype": "m.text", "body": map[string]any{"not": "text"}})
		alice.sendContent(dm, map[string]any{"msgtype": "m.text"})
		alice.send(dm, strings.Repeat("x", DefaultMaxInboundBytes+1))
		// Pictures, audio and files are taken (media.go); a location is not.
		alice.sendContent(dm, map[string]any{"msgtype": "m.location", "body": "here", "geo_uri": "geo:48.85,2.29"})
		barrier("after the bad ones")
		logs := e.logs.String()
		for _, want := range []string{"malformed content", "empty body", "too long", "unsupported type"} {
			if !strings.Contains(logs, want) {
				t.Errorf("log: want a line with %q", want)
			}
		}
	})
}

// TestGroupPolicyDeny: with group_policy deny, group rooms are ignored while
// direct rooms work.
func TestGroupPolicyDeny(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", false)
	bob := e.newPeer("bob", false)
	opts := e.options(string(alice.id()), string(bob.id()))
	opts.GroupPolicy = GroupDeny
	b := e.startBot(opts)

	group := alice.createRoom(false, e.botID, string(bob.id()))
	alice.waitMessage(group, e.botID)
	if _, err := bob.cli.JoinRoomByID(context.Background(), group); err != nil {
		t.Fatal(err)
	}
	alice.waitJoined(group, string(bob.id()))
	alice.send(group, "conch: in the group")

	dm := alice.createRoom(false, e.botID)
	alice.waitMessage(dm, e.botID)
	alice.send(dm, "direct")
	if in := b.rec.next(t); in.Text != "direct" {
		t.Fatalf("first delivered: got %q in %s, want \"direct\" (group message dropped)", in.Text, in.Key.ID)
	}
}

// TestRoomClose: a kick and the last person leaving close the conversation;
// after the last person left the bot leaves too.
func TestRoomClose(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", false)
	b := e.startBot(e.options(string(alice.id())))
	ctx := context.Background()

	t.Run("kick", func(t *testing.T) {
		room := alice.createRoom(false, e.botID)
		alice.waitMessage(room, e.botID)
		if _, err := alice.cli.KickUser(ctx, room, &mautrix.ReqKickUser{UserID: id.UserID(e.botID), Reason: "bye"}); err != nil {
			t.Fatal(err)
		}
		if got := b.rec.nextClosed(t); got != keyOf(room) {
			t.Fatalf("closed: got %v, want %v", got, keyOf(room))
		}
	})

	t.Run("ban", func(t *testing.T) {
		room := alice.createRoom(false, e.botID)
		alice.waitMessage(room, e.botID)
		if _, err := alice.cli.BanUser(ctx, room, &mautrix.ReqBanUser{UserID: id.UserID(e.botID)}); err != nil {
			t.Fatal(err)
		}
		if got := b.rec.nextClosed(t); got != keyOf(room) {
			t.Fatalf("closed: got %v, want %v", got, keyOf(room))
		}
	})

	t.Run("last person leaves", func(t *testing.T) {
		room := alice.createRoom(false, e.botID)
		alice.waitMessage(room, e.botID)
		if _, err := alice.cli.LeaveRoom(ctx, room); err != nil {
			t.Fatal(err)
		}
		if got := b.rec.nextClosed(t); got != keyOf(room) {
			t.Fatalf("closed: got %v, want %v", got, keyOf(room))
		}
		// The bot leaves right after reporting the close.
		deadline := time.Now().Add(waitLimit)
		for {
			rooms, err := b.cli.JoinedRooms(ctx)
			if err != nil {
				t.Fatal(err)
			}
			left := true
			for _, r := range rooms.JoinedRooms {
				if r == room {
					left = false
				}
			}
			if left {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("bot still in the room after the last person left")
			}
			time.Sleep(50 * time.Millisecond) // no event tells the bot's own leave to this test
		}
	})
}

// TestBackoffExhaustion: when the homeserver goes away, Run gives up after
// MaxReconnectAttempts failed syncs with a clear error.
func TestBackoffExhaustion(t *testing.T) {
	e := newEnv(t)
	opts := e.options("*")
	opts.MaxReconnectAttempts = 3
	b := e.startBot(opts)
	b.errOK = true
	e.hs.Kill()
	start := time.Now()
	err := b.wait(t)
	if err == nil {
		t.Fatal("Run with the homeserver gone: got nil, want an error")
	}
	if got := conch.KindOf(err); got != conch.KindUnavailable {
		t.Fatalf("error kind: got %s, want %s (%v)", got, conch.KindUnavailable, err)
	}
	if !strings.Contains(err.Error(), "3 times") {
		t.Fatalf("error: got %q, want it to say how often it tried", err)
	}
	var ce *conch.Error
	if !errors.As(err, &ce) || !strings.Contains(ce.User, "unreachable") {
		t.Fatalf("user text: got %v, want it to say the homeserver is unreachable", err)
	}
	if st := b.Status(context.Background(), conch.ConversationKey{}); len(st) == 0 || !strings.Contains(st[0], "sync failing") {
		t.Fatalf("status: got %q, want the failing sync reported", st)
	}
	t.Logf("gave up after %s: %v", time.Since(start).Round(time.Millisecond), err)

	// Starting with the homeserver down gives up the same way.
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background(), newRecorder())
	if conch.KindOf(err) != conch.KindUnavailable {
		t.Fatalf("Run starting without a homeserver: got %v, want an unavailable error", err)
	}
	if err := c.Send(context.Background(), conch.Outbound{Key: keyOf("!x:localhost"), Text: "hi"}); err == nil {
		t.Fatal("Send on a channel that never connected: got nil, want an error")
	}
}

// fullCursors is a cursor store whose disk is full for its first writes:
// they fail as the SQLite store fails them (conch.ErrStoreFull).
type fullCursors struct {
	conch.CursorStore
	mu     sync.Mutex
	refuse int
}

func (f *fullCursors) SetCursor(ctx context.Context, name, value string) error {
	f.mu.Lock()
	full := f.refuse > 0
	if full {
		f.refuse--
	}
	f.mu.Unlock()
	if full {
		return &conch.Error{Kind: conch.KindUnavailable, User: "disk full at /data",
			Err: fmt.Errorf("set cursor %q: %w: database or disk is full (13)", name, conch.ErrStoreFull)}
	}
	return f.CursorStore.SetCursor(ctx, name, value)
}

// TestLoginWaitsForRoomInTheStore: the store's disk is full as the bot logs
// in (saving its device id fails): the login is tried again and the bot
// connects once there is room. (It gave up at once, and conch up, which
// stops when a channel fails, ended: found by the chaos run on every
// channel.)
func TestLoginWaitsForRoomInTheStore(t *testing.T) {
	e := newEnv(t)
	full := &fullCursors{CursorStore: e.store, refuse: 2}
	e.cursors = full
	e.startBot(e.options())
	if dev, err := e.store.Cursor(context.Background(), cursorName(id.UserID(e.botID), "device_id")); err != nil || dev == "" {
		t.Fatalf("device id %q (%v): want it saved once there was room", dev, err)
	}
}
