package discord

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
)

// The fake is validated by driving it with discordgo, the library conch
// uses: if discordgo can talk to it, its wire format is Discord's.

func dgSession(t *testing.T, s *Server, intents discordgo.Intent) *discordgo.Session {
	t.Helper()
	dg, err := discordgo.New("Bot " + s.Token)
	if err != nil {
		t.Fatal(err)
	}
	dg.Client = &http.Client{Transport: s.Transport(nil), Timeout: 10 * time.Second}
	dg.Identify.Intents = intents
	dg.LogLevel = -1
	dg.SyncEvents = true
	dg.ShouldRetryOnRateLimit = false
	t.Cleanup(func() { _ = dg.Close() })
	return dg
}

const allIntents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

type inbox struct {
	mu   sync.Mutex
	msgs []*discordgo.Message
	got  chan struct{}
}

func collect(dg *discordgo.Session) *inbox {
	in := &inbox{got: make(chan struct{}, 100)}
	dg.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		in.mu.Lock()
		in.msgs = append(in.msgs, m.Message)
		in.mu.Unlock()
		in.got <- struct{}{}
	})
	return in
}

func (in *inbox) next(t *testing.T) *discordgo.Message {
	t.Helper()
	select {
	case <-in.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no MESSAGE_CREATE within 10 s")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.msgs[len(in.msgs)-1]
}

func TestGatewayAndRESTWithDiscordgo(t *testing.T) {
	s := Start(t)
	s.SetBucket(5, time.Second)
	alice := s.Person("2000000000000000001", "alice")
	dm := s.DM(alice)
	general := s.TextChannel("3000000000000000001", "general")
	dg := dgSession(t, s, allIntents)
	var ready *discordgo.Ready
	dg.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { ready = r })
	in := collect(dg)
	if err := dg.Open(); err != nil {
		t.Fatal(err)
	}
	if ready == nil || ready.User == nil || ready.User.ID != s.Bot.ID || ready.SessionID == "" {
		t.Fatalf("ready %+v", ready)
	}

	id := s.Post(alice, dm, "hello bot")
	if m := in.next(t); m.ID != id || m.Content != "hello bot" || m.Author.ID != alice.ID || m.GuildID != "" {
		t.Fatalf("dm %+v", m)
	}
	s.Post(alice, general, "look", Mention(), WithAttachment("a.txt", []byte("hi")))
	m := in.next(t)
	if len(m.Mentions) != 1 || m.Mentions[0].ID != s.Bot.ID || m.GuildID == "" || len(m.Attachments) != 1 {
		t.Fatalf("guild message %+v", m)
	}
	resp, err := dg.Client.Get(m.Attachments[0].URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("attachment: %v", err)
	}
	resp.Body.Close()

	// REST: send, reply, edit, typing, files, history.
	sent, err := dg.ChannelMessageSendReply(general, "answer", m.Reference())
	if err != nil || sent.Content != "answer" || sent.MessageReference == nil || sent.MessageReference.MessageID != m.ID {
		t.Fatalf("send: %+v %v", sent, err)
	}
	if _, err := dg.ChannelMessageEdit(general, sent.ID, "edited"); err != nil {
		t.Fatal(err)
	}
	if _, err := dg.ChannelMessageEdit(general, m.ID, "nope"); err == nil {
		t.Fatal("edited a person's message")
	} else {
		var re *discordgo.RESTError
		if !errors.As(err, &re) || re.Message == nil || re.Message.Code != 50005 {
			t.Fatalf("edit other: %v", err)
		}
	}
	if err := dg.ChannelTyping(dm); err != nil {
		t.Fatal(err)
	}
	f, err := dg.ChannelMessageSendComplex(dm, &discordgo.MessageSend{Content: "file", Files: []*discordgo.File{{Name: "r.txt", ContentType: "text/plain", Reader: strings.NewReader("data")}}})
	if err != nil || len(f.Attachments) != 1 || string(s.FileData(f.Attachments[0].ID)) != "data" {
		t.Fatalf("file: %+v %v", f, err)
	}
	if _, err := dg.ChannelMessageSend(dm, strings.Repeat("x", MaxContent+1)); err == nil {
		t.Fatal("2001 characters accepted")
	}
	hist, err := dg.ChannelMessages(dm, 100, "", id, "")
	if err != nil || len(hist) != 1 || hist[0].Content != "file" {
		t.Fatalf("history after %s: %+v %v", id, hist, err)
	}

	// Buckets: discordgo waits as X-RateLimit-* says; nothing is refused.
	for i := 0; i < 8; i++ {
		if _, err := dg.ChannelMessageSend(general, "burst"); err != nil {
			t.Fatal(err)
		}
	}
	if v := s.Violations(); v != 0 {
		t.Fatalf("%d requests broke the bucket", v)
	}
	s.Fail("POST /channels/"+general+"/messages", RateLimited(2.5))
	_, err = dg.ChannelMessageSend(general, "limited")
	var rl *discordgo.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 2500*time.Millisecond {
		t.Fatalf("429: %T %v", err, err)
	}
}

func TestGatewayResumeAndInvalidSession(t *testing.T) {
	s := Start(t)
	alice := s.Person("2000000000000000001", "alice")
	dm := s.DM(alice)
	dg := dgSession(t, s, allIntents)
	in := collect(dg)
	if err := dg.Open(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Cut the connection; a message sent meanwhile is replayed on resume.
	s.DropGateway()
	s.Post(alice, dm, "while away")
	if m := in.next(t); m.Content != "while away" {
		t.Fatalf("replayed %+v", m)
	}
	if _, _, resumes := s.Gateway(); resumes != 1 {
		t.Fatalf("%d resumes", resumes)
	}
	// op 7: reconnect and resume.
	s.Reconnect()
	if err := s.Wait(ctx, func() bool { _, _, r := s.Gateway(); return r == 2 }); err != nil {
		t.Fatal("no resume after op 7")
	}
	s.Post(alice, dm, "after op 7")
	if m := in.next(t); m.Content != "after op 7" {
		t.Fatalf("after op 7 %+v", m)
	}
	// op 9: identify again.
	s.InvalidateSessions()
	if err := s.Wait(ctx, func() bool { _, id, _ := s.Gateway(); return id == 2 }); err != nil {
		t.Fatal("no identify after op 9")
	}
}

func TestGatewayRefusals(t *testing.T) {
	s := Start(t)
	s.PrivilegedContent = false
	alice := s.Person("2000000000000000001", "alice")
	general := s.TextChannel("3000000000000000001", "general")
	dg := dgSession(t, s, allIntents)
	// discordgo's Open does not wait for the close; the fake closes with
	// 4014 and the next read fails.
	_ = dg.Open()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Wait(ctx, func() bool { _, id, _ := s.Gateway(); return id >= 1 }); err != nil {
		t.Fatal("no identify")
	}
	_ = dg.Close()

	// Without the content intent, a guild message not mentioning the bot
	// arrives empty; one that mentions it arrives whole.
	dg2 := dgSession(t, s, discordgo.IntentsGuilds|discordgo.IntentsGuildMessages|discordgo.IntentsDirectMessages)
	in := collect(dg2)
	if err := dg2.Open(); err != nil {
		t.Fatal(err)
	}
	s.Post(alice, general, "secret")
	if m := in.next(t); m.Content != "" {
		t.Fatalf("content without the intent: %q", m.Content)
	}
	s.Post(alice, general, "hi", Mention())
	if m := in.next(t); !strings.HasSuffix(m.Content, "hi") {
		t.Fatalf("mention without the intent: %q", m.Content)
	}

	bad, _ := discordgo.New("Bot wrong")
	bad.Client = &http.Client{Transport: s.Transport(nil)}
	bad.LogLevel = -1
	if _, err := bad.User("@me"); err == nil {
		t.Fatal("a wrong token was accepted")
	}
}
