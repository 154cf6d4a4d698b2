package gateway

import (
	"context"
	"testing"
	"time"

	"conch"
	"conch/sqlite/sqlitetest"
)

// heldLog is the store's event log, except that keeping the pending state
// of one conversation's turns waits until release is closed.
type heldLog struct {
	EventLog
	key     conch.ConversationKey
	held    chan struct{} // closed when a pending state is being kept
	release chan struct{}
}

func (l *heldLog) AppendEvent(ctx context.Context, ev conch.Event) error {
	if st, ok := ev.Data.(conch.TurnState); ok && ev.Key == l.key && st.Status == conch.TurnPending {
		close(l.held)
		select {
		case <-l.release:
		case <-time.After(20 * time.Second):
		}
	}
	return l.EventLog.AppendEvent(ctx, ev)
}

// Keeping one conversation's queued turn (a store write that may wait for
// the disk) holds up no other conversation, and the turn still runs only
// after its pending state is kept: pending, then running, in its log.
func TestQueuedTurnAnnouncedWithoutHoldingOthers(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	slow := conch.ConversationKey{Channel: cli, ID: "slow"}
	log := &heldLog{EventLog: db, key: slow, held: make(chan struct{}), release: make(chan struct{})}
	e := newEnvWith(t, db, func(o *Options) { o.Events = log })
	e.start()
	sent := make(chan error, 1)
	go func() {
		sent <- e.gw.HandleInbound(context.Background(), conch.Inbound{Key: slow, Sender: "alice", Text: "slow one"})
	}()
	<-log.held
	// With the gateway's lock held across that write, this conversation's
	// message would wait for it: its answer never came before release.
	e.send("fast", "bob", "fast one")
	e.waitFor("the other conversation's answer", func(out []conch.Outbound) bool {
		for _, o := range out {
			if o.Kind == conch.OutboundReply && o.Key.ID == "fast" {
				return true
			}
		}
		return false
	})
	if got := e.gw.WaitIdle(shortCtx(t)); got == nil {
		t.Error("WaitIdle returned while a turn was being announced")
	}
	close(log.release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	e.waitFor("the held conversation's answer", func(out []conch.Outbound) bool {
		for _, o := range out {
			if o.Kind == conch.OutboundReply && o.Key.ID == "slow" {
				return true
			}
		}
		return false
	})
	e.idle()
	evs, err := db.EventsSince(context.Background(), slow, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var states []conch.TurnStatus
	for _, ev := range evs {
		if st, ok := ev.Data.(conch.TurnState); ok {
			states = append(states, st.Status)
		}
	}
	if len(states) < 3 || states[0] != conch.TurnPending || states[1] != conch.TurnRunning {
		t.Errorf("the held turn's states: %v, want pending, running, …", states)
	}
}

// shortCtx ends soon: for a wait that must not succeed.
func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}
