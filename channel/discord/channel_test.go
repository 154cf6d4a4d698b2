package discord

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"conch"
	dcfake "conch/internal/testenv/discord"
)

func waitFor(t *testing.T, srv *dcfake.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Wait(ctx, cond); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

const guild = "3000000000000000001"

// TestDMAndGuildMention: a DM is handed over; in a server only a mention
// (or a reply to the bot) is, with the server as an alias of the sender;
// the answer replies to the message it answers.
func TestDMAndGuildMention(t *testing.T) {
	srv := dcfake.Start(t)
	alice := srv.Person("2000000000000000001", "alice")
	dm := srv.DM(alice)
	general := srv.TextChannel(guild, "general")
	e := start(t, srv, newCursors())

	id := srv.Post(alice, dm, "hello there")
	in := e.h.waitInbound(t, 1)[0]
	if in.Key != (conch.ConversationKey{Channel: conch.ChannelDiscord, ID: dm}) || in.Sender != conch.UserID(alice.ID) ||
		in.ExternalID != dm+":"+id || in.Text != "hello there" || in.SenderName != "Alice" || len(in.SenderAliases) != 0 {
		t.Fatalf("dm %+v", in)
	}
	srv.Post(alice, general, "just talking")
	gid := srv.Post(alice, general, "please help", dcfake.Mention())
	in = e.h.waitInbound(t, 2)[1]
	if in.Key.ID != general || in.Text != "please help" || len(in.SenderAliases) != 1 || in.SenderAliases[0] != conch.UserID(guild+":"+alice.ID) {
		t.Fatalf("guild %+v", in)
	}
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "On it.", InReplyTo: in.ExternalID}); err != nil {
		t.Fatal(err)
	}
	if s := srv.Sent(general); len(s) != 1 || s[0].Content != "On it." || s[0].ReplyTo != gid {
		t.Fatalf("answer %+v", s)
	}
	srv.Post(alice, general, "!stop")
	if in := e.h.waitInbound(t, 3)[2]; in.Text != "/stop" {
		t.Fatalf("command %+v", in)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(e.h.inbound()); n != 3 {
		t.Fatalf("%d handed over, want 3 (the bot's own answer and the chatter ignored)", n)
	}
}

// TestReplyBeforeTheChannelIsKnown: an answer in a server channel replies to
// its message even when nothing asked for the channel's kind before (a
// mention is taken without it, and a quick answer could go out before the
// channel was looked up: it then replied to nothing); in a direct message
// an answer replies to nothing.
func TestReplyBeforeTheChannelIsKnown(t *testing.T) {
	srv := dcfake.Start(t)
	alice := srv.Person("2000000000000000001", "alice")
	dm := srv.DM(alice)
	general := srv.TextChannel(guild, "general")
	e := start(t, srv, newCursors())
	// Another bot's message: the channel takes no notice of it.
	other := srv.Person("2000000000000000009", "otherbot")
	other.Bot = true
	asked := srv.Post(other, general, "a message to answer")
	time.Sleep(200 * time.Millisecond) // its MESSAGE_CREATE has come and gone
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: keyOf(general), Kind: conch.OutboundReply, Text: "On it.", InReplyTo: general + ":" + asked}); err != nil {
		t.Fatal(err)
	}
	if s := srv.Sent(general); len(s) != 1 || s[0].ReplyTo != asked {
		t.Fatalf("answer in a server channel not known before: %+v, want a reply to %s", s, asked)
	}
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: keyOf(dm), Kind: conch.OutboundReply, Text: "Hi.", InReplyTo: dm + ":" + asked}); err != nil {
		t.Fatal(err)
	}
	if s := srv.Sent(dm); len(s) != 1 || s[0].ReplyTo != "" {
		t.Fatalf("answer in a direct message: %+v, want no reply reference", s)
	}
}

// TestThreadsAndBackfill: a thread the bot was mentioned in is answered
// without mentions, across restarts; messages sent while conch was down
// are read over REST after the restart, in order, each exactly once.
func TestThreadsAndBackfill(t *testing.T) {
	srv := dcfake.Start(t)
	alice := srv.Person("2000000000000000001", "alice")
	bob := srv.Person("2000000000000000002", "bob")
	general := srv.TextChannel(guild, "general")
	thread := srv.Thread(general, "plans")
	dm := srv.DM(alice)
	cs := newCursors()
	e := start(t, srv, cs)

	srv.Post(alice, thread, "join us", dcfake.Mention())
	srv.Post(bob, thread, "and the budget?")
	srv.Post(alice, dm, "first")
	got := e.h.waitInbound(t, 3)
	if got[1].Key.ID != thread || got[1].Sender != conch.UserID(bob.ID) {
		t.Fatalf("thread follow-up %+v", got[1])
	}
	e.stop()

	srv.Post(alice, dm, "second, while away")
	srv.Post(bob, thread, "third, while away")
	srv.Post(alice, general, "chatter, not for the bot")
	srv.Post(alice, dm, "fourth, while away")
	e2 := start(t, srv, cs)
	got = e2.h.waitInbound(t, 3)
	var texts []string
	for _, in := range got {
		texts = append(texts, in.Text)
	}
	if strings.Join(texts, "|") != "second, while away|fourth, while away|third, while away" &&
		strings.Join(texts, "|") != "third, while away|second, while away|fourth, while away" {
		t.Fatalf("backfilled %q", texts)
	}
	srv.Post(alice, dm, "live again")
	e2.h.waitInbound(t, 4)
	time.Sleep(300 * time.Millisecond)
	if n := len(e2.h.inbound()); n != 4 {
		t.Fatalf("%d handed over after the restart, want 4: %+v", n, e2.h.inbound())
	}
	e2.h.mu.Lock()
	calls := e2.h.calls
	e2.h.mu.Unlock()
	if calls != 4 {
		t.Fatalf("the gateway was offered %d messages, want 4 (nothing twice)", calls)
	}

	// An invalidated session: identify again, backfill what was missed.
	srv.InvalidateSessions()
	srv.Post(alice, dm, "during the new session")
	e2.h.waitInbound(t, 5)
}

// TestKilledRightAfterTheFirstMessage: conch killed after storing a new
// DM's first message but before the channel noted its position still
// reads that DM after the restart: what was sent there meanwhile is handed
// over (and the first message again, which the store drops).
func TestKilledRightAfterTheFirstMessage(t *testing.T) {
	srv := dcfake.Start(t)
	alice := srv.Person("2000000000000000001", "alice")
	dm := srv.DM(alice)
	cs := newCursors()
	e := start(t, srv, cs)
	e.h.mu.Lock()
	e.h.hang = true
	e.h.mu.Unlock()
	srv.Post(alice, dm, "first")
	first := e.h.waitInbound(t, 1)[0]
	e.stop() // the "kill": HandleInbound stored it and never returned

	srv.Post(alice, dm, "while away")
	e2 := start(t, srv, cs)
	waitFor(t, srv, "the message sent while away", func() bool {
		for _, in := range e2.h.inbound() {
			if in.Text == "while away" {
				return true
			}
		}
		return false
	})
	for _, in := range e2.h.inbound() {
		if in.Text != "while away" && in.ExternalID != first.ExternalID {
			t.Errorf("after the restart, handed over %+v", in)
		}
	}
}

// TestKnownOnlyOnceStored: while the store cannot keep a new channel's
// position, its message is not handed over; once it can, the message is,
// and the channel is in the stored list (read after a restart).
func TestKnownOnlyOnceStored(t *testing.T) {
	srv := dcfake.Start(t)
	alice := srv.Person("2000000000000000001", "alice")
	dm := srv.DM(alice)
	cs := newCursors()
	e := start(t, srv, cs)
	cs.mu.Lock()
	cs.fail = 3
	cs.mu.Unlock()
	srv.Post(alice, dm, "hello")
	e.h.waitInbound(t, 1)
	e.h.mu.Lock()
	calls := e.h.calls
	e.h.mu.Unlock()
	if calls != 1 {
		t.Errorf("handed over %d times, want once (not before the channel was stored)", calls)
	}
	list, _ := cs.Cursor(context.Background(), "discord:"+srv.Bot.ID+":channels")
	if !strings.Contains(list, dm) {
		t.Fatalf("stored channels %q, want %s among them", list, dm)
	}
}

// TestResumeReplaysMissed: a dropped connection is resumed and Discord
// replays what was sent meanwhile; no new session, no backfill.
func TestResumeReplaysMissed(t *testing.T) {
	srv := dcfake.Start(t)
	alice := srv.Person("2000000000000000001", "alice")
	dm := srv.DM(alice)
	e := start(t, srv, newCursors())
	srv.DropGateway()
	srv.Post(alice, dm, "during the outage")
	if in := e.h.waitInbound(t, 1); in[0].Text != "during the outage" {
		t.Fatalf("%+v", in)
	}
	if _, ids, resumes := srv.Gateway(); ids != 1 || resumes != 1 {
		t.Fatalf("identifies %d resumes %d, want 1 and 1", ids, resumes)
	}
}

// TestHandOverRetried: while the gateway cannot take a message it is
// offered again; the position moves only after it was taken.
func TestHandOverRetried(t *testing.T) {
	srv := dcfake.Start(t)
	alice := srv.Person("2000000000000000001", "alice")
	dm := srv.DM(alice)
	cs := newCursors()
	e := start(t, srv, cs)
	e.h.mu.Lock()
	e.h.fail = 2
	e.h.mu.Unlock()
	id := srv.Post(alice, dm, "are you there?")
	e.h.waitInbound(t, 1)
	if p, _ := cs.Cursor(context.Background(), "discord:"+srv.Bot.ID+":position:"+dm); p != id {
		t.Fatalf("position %q, want %q", p, id)
	}
}

// TestSplitAndRateLimits: a long answer is split under 2,000 characters
// (code fences closed and reopened); the buckets' headers are honoured
// (nothing refused) and a 429 waits retry_after.
func TestSplitAndRateLimits(t *testing.T) {
	srv := dcfake.Start(t)
	srv.SetBucket(3, 300*time.Millisecond)
	alice := srv.Person("2000000000000000001", "alice")
	dm := srv.DM(alice)
	var waits []time.Duration
	e := start(t, srv, newCursors(), func(o *Options) {
		o.Backoff.Wait = func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			return nil
		}
	})
	text := "Intro.\n\n```go\n" + strings.Repeat("fmt.Println(\"a line of code\")\n", 200) + "```\n\n" + strings.Repeat("Some closing words. ", 100)
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: keyOf(dm), Kind: conch.OutboundReply, Text: text}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(dm)
	if len(msgs) < 4 {
		t.Fatalf("%d parts", len(msgs))
	}
	lines := 0
	for i, m := range msgs {
		if n := utf8.RuneCountInString(m.Content); n > maxContent {
			t.Fatalf("part %d has %d characters", i, n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Fatalf("part %d leaves a fence open:\n%s", i, m.Content)
		}
		lines += strings.Count(m.Content, "a line of code")
	}
	if lines != 200 {
		t.Fatalf("%d code lines arrived, want 200", lines)
	}
	if v := srv.Violations(); v != 0 {
		t.Fatalf("%d requests broke a bucket", v)
	}
	srv.Fail("POST /channels/"+dm+"/messages", dcfake.RateLimited(1.5))
	if err := e.ch.Send(context.Background(), conch.Outbound{Key: keyOf(dm), Kind: conch.OutboundReply, Text: "after the limit"}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range waits {
		found = found || w == 1500*time.Millisecond
	}
	if !found {
		t.Fatalf("waits %v, want one of 1.5s", waits)
	}
}

// TestTypingProgressFiles: typing while a turn runs, progress edited in
// place, files both ways.
func TestTypingProgressFiles(t *testing.T) {
	srv := dcfake.Start(t)
	alice := srv.Person("2000000000000000001", "alice")
	dm := srv.DM(alice)
	e := start(t, srv, newCursors(), func(o *Options) { o.MaxFileBytes = 100; o.TypingEvery = 50 * time.Millisecond })
	srv.Post(alice, dm, "read this", dcfake.WithAttachment("data.csv", []byte("a,b\n")), dcfake.WithAttachment("big.bin", make([]byte, 300)))
	in := e.h.waitInbound(t, 1)[0]
	if len(in.Attachments) != 1 || in.Attachments[0].Name != "data.csv" || !strings.Contains(in.Text, "big.bin (300 bytes) was not received") {
		t.Fatalf("inbound %+v", in)
	}
	rc, err := in.Attachments[0].Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "a,b\n" {
		t.Fatalf("content %q", data)
	}
	// Each SetTyping(true) is one typing trigger; the gateway calls it again
	// every TypingEvery while a turn runs (gateway/turnview.go).
	ctx := context.Background()
	if e.ch.TypingEvery() != 50*time.Millisecond {
		t.Fatalf("TypingEvery %s, want the option", e.ch.TypingEvery())
	}
	for range 2 {
		if err := e.ch.SetTyping(ctx, in.Key, true); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, srv, "two typing triggers", func() bool {
		n := 0
		for _, s := range srv.Sent(dm) {
			if s.Method == "typing" {
				n++
			}
		}
		return n >= 2
	})
	ref, err := e.ch.SendEditable(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundProgress, Text: "step 1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ch.Edit(ctx, ref, "step 1\nstep 2"); err != nil {
		t.Fatal(err)
	}
	if err := e.ch.SetTyping(ctx, in.Key, false); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(dm)
	if len(msgs) != 1 || msgs[0].Content != "step 1\nstep 2" || msgs[0].EditedTimestamp == nil {
		t.Fatalf("progress %+v", msgs)
	}
	out := conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "Here:", Attachments: []conch.Attachment{{
		Name: "result.txt", Size: 2, MediaType: "text/plain", Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("ok")), nil },
	}}}
	if err := e.ch.SendAttachments(ctx, out); err != nil {
		t.Fatal(err)
	}
	last := srv.Messages(dm)[len(srv.Messages(dm))-1]
	if len(last.Attachments) != 1 || last.Attachments[0].Filename != "result.txt" || string(srv.FileData(last.Attachments[0].ID)) != "ok" {
		t.Fatalf("file %+v", last)
	}
}

// TestTokenRefused: a refused token ends Run with an auth error; doctor
// names the bot for a good one.
func TestTokenRefused(t *testing.T) {
	srv := dcfake.Start(t)
	o := opts(srv, newCursors())
	o.Token = "wrong.token.value"
	ch, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ch.Run(ctx, newHandler()); conch.KindOf(err) != conch.KindAuth {
		t.Fatalf("run: %v", err)
	}
	if name, err := CheckBot(ctx, srv.APIURL(), srv.Token); err != nil || !strings.HasPrefix(name, "conch") {
		t.Fatalf("doctor: %q %v", name, err)
	}
	if _, err := CheckBot(ctx, srv.APIURL(), "wrong"); err == nil || !strings.Contains(err.Error(), "discord.bot_token") {
		t.Fatalf("doctor with a wrong token: %v", err)
	}
}
