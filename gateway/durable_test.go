package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/sqlite"
	"conch/sqlite/sqlitetest"
)

// slowDisk is the real store, except that making messages durable waits
// until release is closed, then fails with fail (nil: succeeds).
type slowDisk struct {
	*sqlite.DB
	release chan struct{}
	fail    error
}

func (s *slowDisk) wait(ctx context.Context, durable func(context.Context) error) error {
	<-s.release
	if s.fail != nil {
		return s.fail
	}
	return durable(ctx)
}

func (s *slowDisk) StageInbound(ctx context.Context, in conch.Inbound, start bool) (conch.Turn, bool, func(context.Context) error, error) {
	t, dup, durable, err := s.DB.StageInbound(ctx, in, start)
	return t, dup, func(ctx context.Context) error { return s.wait(ctx, durable) }, err
}

func (s *slowDisk) WaitDurable(ctx context.Context) error { return s.wait(ctx, s.DB.WaitDurable) }

// A message's turn runs while the disk syncs it, but the message is
// acknowledged (HandleInbound returns) and answered only once it is
// durable: an answer to a message a power loss could take back would be
// given twice when the channel delivers it again. Nothing of the turn
// reaches the channel before HandleInbound returned.
func TestAnswerWaitsForTheDisk(t *testing.T) {
	for _, fail := range []error{nil, errors.New("fsync: input/output error")} {
		name := "synced"
		if fail != nil {
			name = "sync fails"
		}
		t.Run(name, func(t *testing.T) {
			db := sqlitetest.MustOpenFile(t)
			disk := &slowDisk{DB: db, release: make(chan struct{}), fail: fail}
			e := newEnvWith(t, db, func(o *Options) { o.Store = disk })
			called := make(chan struct{}, 1)
			e.model.Func = func(context.Context, conch.ModelRequest) (conch.ModelResponse, error) {
				called <- struct{}{}
				return conch.ModelResponse{Text: "hello alice", StopReason: conch.StopEnd}, nil
			}
			e.start()
			acked := make(chan error, 1)
			go func() {
				acked <- e.gw.HandleInbound(context.Background(), conch.Inbound{Key: conch.ConversationKey{Channel: cli, ID: "room"}, Sender: "alice", Text: "hi"})
			}()
			select {
			case <-called: // the turn runs during the fsync
			case <-time.After(10 * time.Second):
				t.Fatal("the turn did not start while its message was being synced")
			}
			// The answer is ready; it must wait, and so must the ack, and
			// the typing: the channel may still be noting the message
			// after HandleInbound returns (submitGates).
			time.Sleep(50 * time.Millisecond)
			if out := texts(e.ch.Sent(), conch.OutboundReply); len(out) > 0 {
				t.Fatalf("answered %q before the message was durable", out)
			}
			if n := e.ch.TypingShown(conch.ConversationKey{Channel: cli, ID: "room"}); n > 0 {
				t.Fatalf("typing shown %d times before the message was acknowledged", n)
			}
			select {
			case err := <-acked:
				t.Fatalf("acknowledged (%v) before the message was durable", err)
			default:
			}
			close(disk.release)
			err := <-acked
			if fail == nil {
				if err != nil {
					t.Fatal(err)
				}
				e.waitFor("the answer", countKind(conch.OutboundReply, 1))
				return
			}
			if !errors.Is(err, fail) {
				t.Fatalf("HandleInbound with a failed sync: %v, want its error (the channel delivers again)", err)
			}
			e.idle()
			if out := texts(e.ch.Sent(), conch.OutboundReply); len(out) > 0 {
				t.Fatalf("answered %q a message whose sync failed", out)
			}
			if n := e.ch.TypingShown(conch.ConversationKey{Channel: cli, ID: "room"}); n > 0 {
				t.Fatalf("typing shown %d times for a message whose sync failed", n)
			}
		})
	}
}

// A message to a conversation with nothing else waiting or running is
// stored with its turn started (one commit fewer before its work); one that
// comes while another turn runs is stored pending and started when its turn
// comes. Either way each turn is started once (its first attempt), sees
// exactly the messages before it, and a started turn a crash interrupts is
// started again (its second attempt) by the next run.
func TestTurnStoredStartedWhenIdle(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	e := newEnv(t, db)
	bm := newBlockingModel()
	e.model.Func = bm.fn
	e.start()
	ctx := context.Background()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	e.send("room", "alice", "first")
	if got := <-bm.started; got != "first" {
		t.Fatalf("model started on %q", got)
	}
	turns := func() []conch.Turn {
		t.Helper()
		un, err := db.UnfinishedTurns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return un
	}
	if un := turns(); len(un) != 1 || un[0].Status != conch.TurnRunning || un[0].Attempts != 1 {
		t.Fatalf("while the first runs: %+v, want it running, attempt 1", un)
	}
	e.send("room", "alice", "second") // the first is running: stored pending
	if un := turns(); len(un) != 2 || un[1].Status != conch.TurnPending || un[1].Attempts != 0 {
		t.Fatalf("a message while a turn runs: %+v, want it pending", un)
	}
	bm.release <- "answer 1"
	if got := <-bm.started; got != "second" {
		t.Fatalf("model started on %q", got)
	}
	bm.release <- "answer 2"
	e.waitFor("two replies", countKind(conch.OutboundReply, 2))
	e.idle()
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) != 3 || last[0].Text != "first" || last[2].Text != "second" {
		t.Fatalf("the second turn's view: %+v", last)
	}
	for _, id := range []conch.TurnID{1, 2} {
		tr, err := db.Turn(ctx, id)
		if err != nil || tr.Status != conch.TurnDone || tr.Attempts != 1 {
			t.Fatalf("turn %d: %+v (%v), want done after one attempt", id, tr, err)
		}
	}

	// Stored started, then the process dies before the turn's work: the
	// next run starts it again.
	e.shutdown()
	tr, _, durable, err := db.StageInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "third"}, true)
	if err != nil || durable(ctx) != nil || tr.Status != conch.TurnRunning || tr.Attempts != 1 {
		t.Fatalf("staged started: %+v, %v", tr, err)
	}
	e2 := newEnv(t, db)
	e2.model.Func = func(context.Context, conch.ModelRequest) (conch.ModelResponse, error) {
		return conch.ModelResponse{Text: "answer 3", StopReason: conch.StopEnd}, nil
	}
	e2.start()
	e2.waitFor("the resumed answer", countKind(conch.OutboundReply, 1))
	e2.idle()
	if tr, err := db.Turn(ctx, tr.ID); err != nil || tr.Status != conch.TurnDone || tr.Attempts != 2 {
		t.Fatalf("resumed turn: %+v (%v), want done at its second attempt", tr, err)
	}
}

// resetDuringStore is the real store that starts a reset of the
// conversation (from another goroutine, as a channel's /reset comes) while
// the message is being stored.
type resetDuringStore struct {
	*sqlite.DB
	once  sync.Once
	reset func()
}

func (s *resetDuringStore) StageInbound(ctx context.Context, in conch.Inbound, start bool) (conch.Turn, bool, func(context.Context) error, error) {
	t, dup, durable, err := s.DB.StageInbound(ctx, in, start)
	s.once.Do(func() { go s.reset() })
	return t, dup, durable, err
}

// A reset that comes while a message is being stored (its turn perhaps
// stored started) ends that turn: it is queued before the reset and
// cancelled or dropped by it, never run to an answer after it, and the store
// keeps it stopped by the reset.
func TestResetWhileAMessageIsStored(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	resetDone := make(chan error, 1)
	var e *env
	rs := &resetDuringStore{DB: db}
	rs.reset = func() { resetDone <- e.gw.Reset(context.Background(), key) }
	e = newEnvWith(t, db, func(o *Options) { o.Store = rs })
	e.model.Func = func(ctx context.Context, _ conch.ModelRequest) (conch.ModelResponse, error) {
		<-ctx.Done() // the reset cancels the turn
		return conch.ModelResponse{}, ctx.Err()
	}
	e.start()
	e.send("room", "alice", "before the reset")
	if err := <-resetDone; err != nil {
		t.Fatal(err)
	}
	e.idle()
	tr, err := db.Turn(context.Background(), 1)
	if err != nil || tr.Status != conch.TurnStopped || tr.StoppedReason != "reset" {
		t.Fatalf("turn after the reset: %+v (%v), want stopped by the reset", tr, err)
	}
	if out := texts(e.ch.Sent(), conch.OutboundReply); len(out) != 0 {
		t.Fatalf("replies after the reset: %q", out)
	}
}

// With max_attempts = 1 a turn stored started runs (its first attempt), and
// /status says it is on attempt 1.
func TestStoredStartedIsTheFirstAttempt(t *testing.T) {
	e := newEnvWith(t, nil, func(o *Options) { o.MaxAttempts = 1 })
	bm := newBlockingModel()
	e.model.Func = bm.fn
	e.start()
	e.send("room", "alice", "hi")
	<-bm.started
	st := e.gw.Status(context.Background(), conch.ConversationKey{Channel: cli, ID: "room"})
	bm.release <- "answer"
	e.waitFor("the answer", countKind(conch.OutboundReply, 1))
	e.idle()
	if !strings.Contains(st, "attempt 1 of 1") {
		t.Fatalf("status on the first attempt: %q", st)
	}
	if got := texts(e.ch.Sent(), conch.OutboundReply); len(got) != 1 || got[0] != "answer" {
		t.Fatalf("replies %q, want the answer (not given up)", got)
	}
}
