package slack

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"conch"
	"conch/channel/internal/markdown"
	slackfake "conch/internal/testenv/slack"
)

func waitFor(t *testing.T, srv *slackfake.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Wait(ctx, cond); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestDMRoundTrip: a DM is handed over with the sender's ids and acked
// after; the reply is mrkdwn in the DM, outside any thread.
func TestDMRoundTrip(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	dm := srv.DM(alice)
	e := start(t, srv, newCursors())

	ts := srv.Post(alice, dm, "what is *new*? see <https://example.org|the site> &amp; more")
	in := e.h.waitInbound(t, 1)[0]
	want := conch.Inbound{Key: conch.ConversationKey{Channel: conch.ChannelSlack, ID: "T0CONCH:" + dm},
		Sender: "U0ALICE", ExternalID: "T0CONCH:" + dm + ":" + ts}
	if in.Key != want.Key || in.Sender != want.Sender || in.ExternalID != want.ExternalID || in.SenderName != "alice" ||
		len(in.SenderAliases) != 1 || in.SenderAliases[0] != "T0CONCH:U0ALICE" {
		t.Fatalf("inbound %+v", in)
	}
	if in.Text != "what is *new*? see the site (https://example.org) & more" {
		t.Fatalf("text %q", in.Text)
	}
	waitFor(t, srv, "the ack", func() bool { return srv.Unacked() == 0 })

	if err := e.ch.Send(context.Background(), conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "Here is **bold** and `x<y`.", InReplyTo: in.ExternalID}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(dm, "")
	if len(msgs) != 1 || msgs[0].Text != "Here is *bold* and `x&lt;y`." || msgs[0].ThreadTS != "" {
		t.Fatalf("reply %+v", msgs)
	}
	// The bot's own message comes back as an event: ignored.
	time.Sleep(300 * time.Millisecond)
	if n := len(e.h.inbound()); n != 1 {
		t.Fatalf("%d messages handed over, want 1 (the bot's own ignored)", n)
	}
}

// TestChannelMentionsAndThreads: in a channel only a mention is taken; it
// starts a thread conversation where the answer goes; later messages of
// the thread are taken without a mention, also after a restart (the
// thread is kept as a cursor). message and app_mention of one message are
// one message.
func TestChannelMentionsAndThreads(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	bob := srv.Person("U0BOB", "bob")
	gen := srv.Channel("C0GENERAL", "general")
	cs := newCursors()
	e := start(t, srv, cs)

	srv.Post(alice, gen, "just chatting")
	root := srv.Post(alice, gen, "<@"+srv.Bot.ID+"> summarise this")
	in := e.h.waitInbound(t, 1)[0]
	key := conch.ConversationKey{Channel: conch.ChannelSlack, ID: "T0CONCH:" + gen + ":" + root}
	if in.Key != key || in.Text != "summarise this" {
		t.Fatalf("inbound %+v", in)
	}
	waitFor(t, srv, "acks", func() bool { return srv.Unacked() == 0 })
	if len(e.h.inbound()) != 1 {
		t.Fatalf("handed over %+v", e.h.inbound())
	}
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: "Done."}); err != nil {
		t.Fatal(err)
	}
	if m := srv.Messages(gen, root); len(m) != 1 || m[0].Text != "Done." {
		t.Fatalf("answer in thread %+v", m)
	}
	srv.Post(bob, gen, "and the numbers?", slackfake.InThread(root))
	in = e.h.waitInbound(t, 2)[1]
	if in.Key != key || in.Sender != "U0BOB" {
		t.Fatalf("thread message %+v", in)
	}
	// Another thread the bot is not in: ignored.
	other := srv.Post(bob, gen, "unrelated")
	srv.Post(alice, gen, "reply", slackfake.InThread(other))

	e.stop()
	e2 := start(t, srv, cs)
	srv.Post(alice, gen, "after the restart", slackfake.InThread(root))
	got := e2.h.waitInbound(t, 1)
	if got[0].Text != "after the restart" || got[0].Key != key {
		t.Fatalf("after restart %+v", got)
	}
	time.Sleep(200 * time.Millisecond)
	if len(e2.h.inbound()) != 1 {
		t.Fatalf("handed over %+v", e2.h.inbound())
	}
}

// TestChannelPolicyDeny: channels ignored, DMs answered.
func TestChannelPolicyDeny(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	gen := srv.Channel("C0GENERAL", "general")
	e := start(t, srv, newCursors(), func(o *Options) { o.ChannelPolicy = ChannelDeny })
	srv.Post(alice, gen, "<@"+srv.Bot.ID+"> hello")
	srv.Post(alice, srv.DM(alice), "!stop")
	in := e.h.waitInbound(t, 1)
	if len(in) != 1 || in[0].Text != "/stop" {
		t.Fatalf("handed over %+v", in)
	}
}

// TestAckOnlyAfterHandled: while the gateway cannot take a message its
// envelope stays unacknowledged; Slack delivers it again and it is handed
// over once.
func TestAckOnlyAfterHandled(t *testing.T) {
	srv := slackfake.Start(t)
	srv.SetAckTimeout(200 * time.Millisecond)
	alice := srv.Person("U0ALICE", "alice")
	e := start(t, srv, newCursors())
	e.h.mu.Lock()
	e.h.fail = 2
	e.h.mu.Unlock()
	srv.Post(alice, srv.DM(alice), "are you there?")
	e.h.waitInbound(t, 1)
	waitFor(t, srv, "the ack", func() bool { return srv.Unacked() == 0 })
	if srv.Redelivered() < 2 {
		t.Fatalf("redelivered %d times, want at least 2", srv.Redelivered())
	}
	e.h.mu.Lock()
	defer e.h.mu.Unlock()
	if e.h.calls != 3 || len(e.h.in) != 1 {
		t.Fatalf("calls %d, handed over %d", e.h.calls, len(e.h.in))
	}
}

// TestSplitAndPlainFallback: a long answer is split under 4,000
// characters; text Slack refuses goes again as plain text.
func TestSplitAndPlainFallback(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	dm := srv.DM(alice)
	e := start(t, srv, newCursors())
	key := keyOf("T0CONCH", dm, "")
	var b strings.Builder
	for i := 0; i < 300; i++ {
		b.WriteString("Paragraph with **some** words that fill the message up nicely.\n\n")
	}
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: b.String()}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(dm, "")
	if len(msgs) < 5 {
		t.Fatalf("%d messages", len(msgs))
	}
	total := 0
	for _, m := range msgs {
		if n := utf8.RuneCountInString(m.Text); n > markdown.SlackMaxText {
			t.Fatalf("a part of %d characters", n)
		}
		total += strings.Count(m.Text, "*some*")
	}
	if total != 300 {
		t.Fatalf("%d paragraphs arrived, want 300", total)
	}

	srv.Fail("chat.postMessage", slackfake.Fault{Error: "invalid_arguments"})
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: "a **b** [c](https://c.example)"}); err != nil {
		t.Fatal(err)
	}
	sent := srv.Sent(dm)
	last := sent[len(sent)-1]
	if last.Text != "a b c (https://c.example)" || last.Mrkdwn {
		t.Fatalf("plain fallback %+v", last)
	}
}

// TestRateLimitHonoured: a 429 waits Retry-After, then the send goes out.
func TestRateLimitHonoured(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	dm := srv.DM(alice)
	var waits []time.Duration
	e := start(t, srv, newCursors(), func(o *Options) {
		o.Backoff.Wait = func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			return nil
		}
	})
	srv.Fail("chat.postMessage", slackfake.RateLimited(7))
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: keyOf("T0CONCH", dm, ""), Kind: conch.OutboundReply, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if len(srv.Messages(dm, "")) != 1 {
		t.Fatal("not sent after the wait")
	}
	found := false
	for _, w := range waits {
		found = found || w == 7*time.Second
	}
	if !found {
		t.Fatalf("waits %v, want one of 7s", waits)
	}
	if st := e.ch.Status(context.Background(), conch.ConversationKey{}); len(st) == 0 || !strings.Contains(strings.Join(st, "\n"), "rate limited") {
		t.Fatalf("status %q", st)
	}
}

// TestProgressAndWorkingReaction: the message being worked on carries a
// reaction until its turn ends; progress is one message edited in place.
func TestProgressAndWorkingReaction(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	gen := srv.Channel("C0GENERAL", "general")
	e := start(t, srv, newCursors())
	root := srv.Post(alice, gen, "<@"+srv.Bot.ID+"> build it")
	in := e.h.waitInbound(t, 1)[0]
	ctx := context.Background()
	if err := e.ch.SetTyping(ctx, in.Key, true); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(gen, root); len(m.Reactions) != 1 || m.Reactions[0].Name != DefaultWorkingReaction {
		t.Fatalf("reactions %+v", m.Reactions)
	}
	ref, err := e.ch.SendEditable(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundProgress, Text: "• step 1", InReplyTo: in.ExternalID})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ch.Edit(ctx, ref, "• step 1\n• step **2**"); err != nil {
		t.Fatal(err)
	}
	m, _ := srv.Message(gen, ref.ID)
	if m.ThreadTS != root || m.Text != "• step 1\n• step *2*" || m.Edited == nil {
		t.Fatalf("progress %+v", m)
	}
	if err := e.ch.SetTyping(ctx, in.Key, false); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(gen, root); len(m.Reactions) != 0 {
		t.Fatalf("reaction left: %+v", m.Reactions)
	}
}

// TestFilesBothWays: a shared file is an attachment read with the bot
// token; a file sent lands in the conversation's thread.
func TestFilesBothWays(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	gen := srv.Channel("C0GENERAL", "general")
	e := start(t, srv, newCursors(), func(o *Options) { o.MaxFileBytes = 100 })
	root := srv.Post(alice, gen, "<@"+srv.Bot.ID+"> read these", slackfake.WithFile("data.csv", []byte("a,b\n1,2\n")),
		slackfake.WithFile("big.bin", make([]byte, 200)))
	in := e.h.waitInbound(t, 1)[0]
	if len(in.Attachments) != 1 || in.Attachments[0].Name != "data.csv" || in.Attachments[0].MediaType != "text/csv" ||
		!strings.Contains(in.Text, "big.bin (200 bytes) was not received") {
		t.Fatalf("inbound %+v", in)
	}
	rc, err := in.Attachments[0].Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "a,b\n1,2\n" {
		t.Fatalf("content %q", data)
	}

	out := conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "Here:", Attachments: []conch.Attachment{{
		Name: "result.txt", Size: 2, Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("ok")), nil },
	}}}
	if err := e.ch.SendAttachments(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	var file *slackfake.File
	for _, s := range srv.Sent(gen) {
		if s.File != nil {
			file = s.File
			if s.ThreadTS != root {
				t.Fatalf("file outside the thread: %+v", s)
			}
		}
	}
	if file == nil || file.Name != "result.txt" || string(srv.FileData(file.ID)) != "ok" {
		t.Fatalf("file %+v", file)
	}
}

// TestTokenRefused: a refused bot token ends Run with an auth error.
func TestTokenRefused(t *testing.T) {
	srv := slackfake.Start(t)
	o := opts(srv, newCursors())
	o.BotToken = "xoxb-revoked"
	ch, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = ch.Run(ctx, newHandler())
	if conch.KindOf(err) != conch.KindAuth {
		t.Fatalf("run: %v", err)
	}
	if _, err := CheckApp(ctx, srv.APIURL(), srv.BotToken, srv.AppToken); err != nil {
		t.Fatalf("doctor with good tokens: %v", err)
	}
	if _, err := CheckApp(ctx, srv.APIURL(), srv.BotToken, "xapp-wrong"); err == nil || !strings.Contains(err.Error(), "slack.app_token") {
		t.Fatalf("doctor with a wrong app token: %v", err)
	}
}

// TestSocketReconnect: a disconnect request and a dropped socket are
// survived; messages after them arrive.
func TestSocketReconnect(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	dm := srv.DM(alice)
	e := start(t, srv, newCursors())
	srv.Disconnect("refresh_requested")
	waitFor(t, srv, "a second socket", func() bool { open, opened := srv.Connections(); return open == 1 && opened >= 2 })
	srv.DropConnections()
	waitFor(t, srv, "a third socket", func() bool { open, opened := srv.Connections(); return open == 1 && opened >= 3 })
	srv.Post(alice, dm, "still there?")
	if in := e.h.waitInbound(t, 1); in[0].Text != "still there?" {
		t.Fatalf("inbound %+v", in)
	}
}
