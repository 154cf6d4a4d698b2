package matrix

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"maunium.net/go/mautrix/event"

	"conch"
	"conch/agent"
	"conch/gateway"
	"conch/sqlite"
)

// blockingRunner answers "echo: <text>"; the first turn waits for release so
// that a second message finds the conversation busy.
type blockingRunner struct {
	store   *sqlite.DB
	release chan struct{}
	once    sync.Once
}

func (r *blockingRunner) Run(ctx context.Context, in agent.Input) (agent.Result, error) {
	first := false
	r.once.Do(func() { first = true })
	if first {
		select {
		case <-r.release:
		case <-ctx.Done():
			return agent.Result{}, ctx.Err()
		}
	}
	h, err := r.store.ModelHistory(ctx, in.Env.Conversation, in.Turn)
	if err != nil || len(h.Messages) == 0 {
		return agent.Result{}, fmt.Errorf("read the turn's message: %v", err)
	}
	text := h.Messages[len(h.Messages)-1].Text
	return agent.Result{Text: "echo: **" + text + "**"}, nil
}

// TestThroughGateway runs the channel under the real gateway and store: a
// message is answered in the room, typing shows while it works, a second
// message while busy gets "queued", and a kick closes the conversation.
func TestThroughGateway(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", false)
	ch, err := New(e.options(string(alice.id())))
	if err != nil {
		t.Fatal(err)
	}
	runner := &blockingRunner{store: e.store, release: make(chan struct{})}
	g, err := gateway.New(gateway.Options{
		Store:    e.store,
		Agent:    runner,
		Channels: []conch.Channel{ch},
		Allow:    map[conch.ChannelName]gateway.Allowlist{conch.ChannelMatrix: gateway.NewAllowlist(string(alice.id()))},
		Logger:   e.options().Logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway Run: %v", err)
		}
	})
	select {
	case <-ch.Synced():
	case err := <-done:
		t.Fatalf("gateway stopped before the channel synced: %v", err)
	}

	room := alice.createRoom(false, e.botID)
	alice.waitMessage(room, e.botID) // greeting
	alice.send(room, "first")
	alice.waitFor("bot typing", func(evt *event.Event) bool {
		return evt.Type == event.EphemeralEventTyping && evt.RoomID == room && len(evt.Content.AsTyping().UserIDs) > 0
	})
	alice.send(room, "second")
	queued := alice.waitMessage(room, e.botID).Content.AsMessage()
	if queued.MsgType != event.MsgNotice || !strings.Contains(queued.Body, "queued") {
		t.Fatalf("busy notice: got %s %q, want an m.notice saying queued", queued.MsgType, queued.Body)
	}
	close(runner.release)
	for _, want := range []string{"first", "second"} {
		reply := alice.waitMessage(room, e.botID).Content.AsMessage()
		if reply.Body != "echo: **"+want+"**" || !strings.Contains(reply.FormattedBody, "<strong>"+want+"</strong>") {
			t.Fatalf("reply: got body %q html %q, want the echo of %q in HTML", reply.Body, reply.FormattedBody, want)
		}
	}

	// Both turns are finished in the store once the workers are idle.
	idleCtx, idleCancel := context.WithTimeout(context.Background(), waitLimit)
	defer idleCancel()
	if err := g.WaitIdle(idleCtx); err != nil {
		t.Fatal(err)
	}
	turns, err := e.store.UnfinishedTurns(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 0 {
		t.Fatalf("unfinished turns after both replies: got %d, want 0", len(turns))
	}
	if hist, err := e.store.History(context.Background(), keyOf(room)); err != nil || len(hist) == 0 {
		t.Fatalf("history of the room: got %d messages (%v), want some", len(hist), err)
	}
}
