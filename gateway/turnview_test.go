package gateway

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"conch"
	"conch/fake"
)

// The typing indicator is shown when a turn starts, shown again every
// TypingEvery of the channel while it runs (the gateway is the one renewer),
// and cleared before the answer goes out.
func TestTypingRenewedWhileATurnRuns(t *testing.T) {
	// In a bubble: the renewer runs on fake time, and "no typing after the
	// answer" is checked once every goroutine has settled, not after a sleep.
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.ch.Renew = 20 * time.Millisecond
		key := conch.ConversationKey{Channel: cli, ID: "c1"}
		bm := newBlockingModel()
		e.model.Func = bm.fn
		e.start()
		e.send("c1", "alice", "hello")
		<-bm.started
		deadline := time.Now().Add(10 * time.Second)
		for e.ch.TypingShown(key) < 4 {
			if time.Now().After(deadline) {
				t.Fatalf("typing shown %d times while the turn ran, want it renewed", e.ch.TypingShown(key))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !e.ch.Typing(key) {
			t.Fatal("typing not on while the turn runs")
		}
		bm.release <- "done"
		e.waitFor("the answer", countKind(conch.OutboundReply, 1))
		if e.ch.Typing(key) {
			t.Fatal("typing still on when the answer went out")
		}
		n := e.ch.TypingShown(key)
		time.Sleep(10 * e.ch.Renew)
		synctest.Wait()
		if got := e.ch.TypingShown(key); got != n {
			t.Fatalf("typing shown again after the turn: %d → %d", n, got)
		}
	})
}

// Progress and typing follow a turn's events on the hub, whoever publishes
// them: an event published for the running turn shows as progress.
func TestProgressFollowsTheHub(t *testing.T) {
	e := newEnvWith(t, nil, func(o *Options) { o.ProgressInterval = time.Millisecond })
	bm := newBlockingModel()
	e.model.Func = bm.fn
	e.start()
	e.send("c1", "alice", "hello")
	<-bm.started
	key := conch.ConversationKey{Channel: cli, ID: "c1"}
	var turn conch.TurnID
	if ts, err := e.db.UnfinishedTurns(context.Background()); err != nil || len(ts) != 1 {
		t.Fatalf("unfinished turns: %v, %v", ts, err)
	} else {
		turn = ts[0].ID
	}
	e.gw.Events().Publish(context.Background(), key, turn, conch.ToolProgress{Text: "published elsewhere"})
	e.gw.Events().Publish(context.Background(), key, turn+1, conch.ToolProgress{Text: "another turn's"})
	e.waitFor("the progress", func(out []conch.Outbound) bool {
		for _, o := range out {
			if o.Kind == conch.OutboundProgress && o.Text == "published elsewhere" {
				return true
			}
		}
		return false
	})
	bm.release <- "done"
	out := e.waitFor("the answer", countKind(conch.OutboundReply, 1))
	for _, o := range out {
		if o.Text == "another turn's" {
			t.Fatal("another turn's event shown as this turn's progress")
		}
	}

}

// Channels built after the gateway (with it as their event source) are
// attached by Run with their allowlists; a second channel of the same name
// is refused.
func TestRunAttachesChannels(t *testing.T) {
	e := newEnvWith(t, nil, func(o *Options) { o.Channels, o.Allow = nil, nil })
	e.model.Push(fake.Text("attached"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.gw.Run(ctx, Attached{Channel: e.ch, Allow: NewAllowlist("alice")}) }()
	e.waitRunning()
	e.send("c1", "alice", "hello")
	if out := e.waitFor("the answer", countKind(conch.OutboundReply, 1)); out[len(out)-1].Text != "attached" {
		t.Fatalf("answer %+v", out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g2, err := New(Options{Store: e.db, Agent: e.gw.opts.Agent, Channels: []conch.Channel{fake.NewChannel(cli)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Run(context.Background(), Attached{Channel: fake.NewChannel(cli)}); err == nil {
		t.Fatal("two channels of one name were accepted")
	}
}
