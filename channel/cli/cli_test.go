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

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain\ttext\nline", "plain\ttext\nline"},
		{"\x1b[2J\x1b[Hcleared", "cleared"},
		{"\x1b]0;owned title\x07after", "after"},
		{"\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"red \x1b[31mtext\x1b[0m", "red text"},
		{"bell\x07 back\bspace", "bell backspace"},
		{"over\rwrite", "overwrite"},
		{"crlf\r\nline", "crlf\nline"},
		{"c1 \u009b31m csi", "c1  csi"},
		{"bidi \u202eevil\u202c text", "bidi evil text"},
		{"unterminated \x1b]0;title", "unterminated "},
		{"emoji ⚙ stays", "emoji ⚙ stays"},
	} {
		if got := Sanitize(tc.in); got != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOutputIsSanitized(t *testing.T) {
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "local"}
	var out, errw bytes.Buffer
	c := &Channel{Out: &out, Err: &errw, Key: key}
	if err := c.Send(context.Background(), conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: "\x1b]0;pwned\x07\x1b[2Jhello"}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello\n" {
		t.Fatalf("got %q, want the escape sequences removed", out.String())
	}
}

func TestTooLongLineIsReportedAndReadingGoesOn(t *testing.T) {
	var errw bytes.Buffer
	in := "first\n" + strings.Repeat("x", MaxLine+10) + "\nafter\n" + strings.Repeat("y", 3*MaxLine) + "\nlast"
	c := &Channel{In: strings.NewReader(in), Out: &bytes.Buffer{}, Err: &errw}
	r := &recorder{}
	if err := c.Run(context.Background(), r); !errors.Is(err, ErrEOF) {
		t.Fatalf("got %v, want ErrEOF", err)
	}
	var got []string
	for _, in := range r.got {
		got = append(got, in.Text)
	}
	if strings.Join(got, ",") != "first,after,last" {
		t.Fatalf("got %q, want first, after, last", got)
	}
	if n := strings.Count(errw.String(), "longer than"); n != 2 {
		t.Fatalf("stderr %q: want two reports", errw.String())
	}
}
