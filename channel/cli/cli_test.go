package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"conch"
)

type recorder struct {
	mu  sync.Mutex
	got []conch.Inbound
	err error
}

func (r *recorder) HandleInbound(_ context.Context, in conch.Inbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, in)
	return r.err
}

func (r *recorder) ConversationClosed(context.Context, conch.ConversationKey) error { return nil }

func (r *recorder) Admits(context.Context, conch.ChannelName, ...conch.UserID) bool { return true }

func TestRunReadsLines(t *testing.T) {
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "local"}
	var stderr bytes.Buffer
	c := &Channel{In: strings.NewReader("hello\r\n\n   \nsecond line\n"), Out: &bytes.Buffer{}, Err: &stderr, Key: key, User: "me"}
	r := &recorder{}
	if err := c.Run(context.Background(), r); !errors.Is(err, ErrEOF) {
		t.Fatalf("got %v, want ErrEOF", err)
	}
	if len(r.got) != 2 || r.got[0].Text != "hello" || r.got[1].Text != "second line" || r.got[0].Sender != "me" || r.got[0].Key != key {
		t.Fatalf("got %+v", r.got)
	}
}

func TestRunTooLongLine(t *testing.T) {
	c := &Channel{In: strings.NewReader(strings.Repeat("x", MaxLine+10) + "\n"), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	err := c.Run(context.Background(), &recorder{})
	if err == nil || errors.Is(err, ErrEOF) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("got %v, want a clear too-long error", err)
	}
}

func TestHandlerErrorIsShown(t *testing.T) {
	var stderr bytes.Buffer
	c := &Channel{In: strings.NewReader("hi\n"), Out: &bytes.Buffer{}, Err: &stderr}
	_ = c.Run(context.Background(), &recorder{err: conch.Errorf(conch.KindInvalid, "that was odd")})
	if !strings.Contains(stderr.String(), "error: that was odd") {
		t.Fatalf("stderr %q", stderr.String())
	}
}

func TestSendSplitsStreams(t *testing.T) {
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "local"}
	var out, errw bytes.Buffer
	c := &Channel{Out: &out, Err: &errw, Key: key}
	ctx := context.Background()
	for _, o := range []conch.Outbound{
		{Key: key, Kind: conch.OutboundReply, Text: "answer"},
		{Key: key, Kind: conch.OutboundProgress, Text: "⚙ bash: ls"},
		{Key: key, Kind: conch.OutboundNotice, Text: "queued (position 1)"},
	} {
		if err := c.Send(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != "answer\n" || errw.String() != "⚙ bash: ls\nqueued (position 1)\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errw.String())
	}
	if err := c.Send(ctx, conch.Outbound{Key: conch.ConversationKey{Channel: "cli", ID: "other"}}); err == nil {
		t.Fatal("send to another conversation succeeded")
	}
}
