package gateway

import (
	"context"
	"errors"
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

func (s *slowDisk) StageInbound(ctx context.Context, in conch.Inbound) (conch.Turn, bool, func(context.Context) error, error) {
	t, dup, durable, err := s.DB.StageInbound(ctx, in)
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
