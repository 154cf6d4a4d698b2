package slack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// The fake is validated by driving it with slack-go, the client library
// conch uses: if the library can talk to it, its wire format is Slack's.

func client(s *Server) *slack.Client {
	return slack.New(s.BotToken, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken(s.AppToken))
}

func TestWebAPIWithSlackGo(t *testing.T) {
	s := Start(t)
	api := client(s)
	ctx := context.Background()
	alice := s.Person("U0ALICE", "alice")
	dm := s.DM(alice)

	at, err := api.AuthTestContext(ctx)
	if err != nil || at.UserID != s.Bot.ID || at.TeamID != s.TeamID || at.BotID != s.BotID {
		t.Fatalf("auth.test: %+v, %v", at, err)
	}
	u, err := api.GetUserInfoContext(ctx, alice.ID)
	if err != nil || u.Name != "alice" || u.RealName != "Alice" {
		t.Fatalf("users.info: %+v, %v", u, err)
	}
	root := s.Post(alice, dm, "hello")
	ch, ts, err := api.PostMessageContext(ctx, dm, slack.MsgOptionText("*hi*", false), slack.MsgOptionTS(root))
	if err != nil || ch != dm || ts == "" {
		t.Fatalf("chat.postMessage: %s %s %v", ch, ts, err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, dm, ts, slack.MsgOptionText("edited", false)); err != nil {
		t.Fatalf("chat.update: %v", err)
	}
	if m, _ := s.Message(dm, ts); m.Text != "edited" || m.Edited == nil || m.ThreadTS != root {
		t.Fatalf("after update: %+v", m)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, dm, root, slack.MsgOptionText("x", false)); err == nil || err.Error() != "cant_update_message" {
		t.Fatalf("updating a person's message: %v", err)
	}
	ref := slack.NewRefToMessage(dm, root)
	if err := api.AddReactionContext(ctx, "eyes", ref); err != nil {
		t.Fatalf("reactions.add: %v", err)
	}
	if err := api.AddReactionContext(ctx, "eyes", ref); err == nil || err.Error() != "already_reacted" {
		t.Fatalf("second reactions.add: %v", err)
	}
	if err := api.RemoveReactionContext(ctx, "eyes", ref); err != nil {
		t.Fatalf("reactions.remove: %v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C0NOPE", slack.MsgOptionText("x", false)); err == nil || err.Error() != "channel_not_found" {
		t.Fatalf("unknown channel: %v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, dm, slack.MsgOptionText(strings.Repeat("a", MaxTextLen+1), false)); err == nil || err.Error() != "msg_too_long" {
		t.Fatalf("too long: %v", err)
	}

	// Files both ways.
	f, err := api.UploadFileContext(ctx, slack.UploadFileParameters{Filename: "report.txt", FileSize: 5,
		Reader: strings.NewReader("hello"), Channel: dm, ThreadTimestamp: root, Title: "report.txt"})
	if err != nil || string(s.FileData(f.ID)) != "hello" {
		t.Fatalf("upload: %+v %v", f, err)
	}
	s.Post(alice, dm, "a file", WithFile("notes.md", []byte("# notes")))
	var shared File
	for _, m := range s.msgs[dm] {
		if len(m.Files) > 0 && m.User == alice.ID {
			shared = m.Files[0]
		}
	}
	var buf bytes.Buffer
	if err := api.GetFileContext(ctx, shared.URLPrivateDownload, &buf); err != nil || buf.String() != "# notes" {
		t.Fatalf("download: %q %v", buf.String(), err)
	}

	// Rate limits: 429 with Retry-After.
	s.Fail("chat.postMessage", RateLimited(7))
	_, _, err = api.PostMessageContext(ctx, dm, slack.MsgOptionText("x", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("rate limited: %T %v", err, err)
	}
	// Wrong tokens.
	bad := slack.New("xoxb-wrong", slack.OptionAPIURL(s.APIURL()))
	if _, err := bad.AuthTestContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("bad token: %v", err)
	}
	botOnly := slack.New(s.BotToken, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken(s.BotToken))
	if _, _, err := botOnly.StartSocketModeContext(ctx); err == nil || err.Error() != "not_allowed_token_type" {
		t.Fatalf("socket mode with a bot token: %v", err)
	}
}

// socket runs slack-go's Socket Mode client against the fake and returns
// its events.
func socket(t *testing.T, s *Server) (*socketmode.Client, context.CancelFunc) {
	sm := socketmode.New(client(s), socketmode.OptionLog(log.New(io.Discard, "", 0)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sm.RunContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := s.Wait(wctx, func() bool { open, _ := s.Connections(); return open > 0 }); err != nil {
		t.Fatal("slack-go never connected")
	}
	return sm, cancel
}

// nextMessage reads events until an events_api message event arrives.
func nextMessage(t *testing.T, sm *socketmode.Client) (socketmode.Event, *slackevents.MessageEvent) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-sm.Events:
			if ev.Type != socketmode.EventTypeEventsAPI {
				continue
			}
			api := ev.Data.(slackevents.EventsAPIEvent)
			if m, ok := api.InnerEvent.Data.(*slackevents.MessageEvent); ok {
				return ev, m
			}
			if ev.Request != nil {
				_ = sm.Ack(*ev.Request)
			}
		case <-timeout:
			t.Fatal("no message event within 10 s")
		}
	}
}

func TestSocketModeWithSlackGo(t *testing.T) {
	s := Start(t)
	s.SetAckTimeout(500 * time.Millisecond)
	alice := s.Person("U0ALICE", "alice")
	dm := s.DM(alice)
	gen := s.Channel("C0GENERAL", "general")
	sm, _ := socket(t, s)

	ts := s.Post(alice, dm, "hello bot")
	ev, m := nextMessage(t, sm)
	if m.Text != "hello bot" || m.User != alice.ID || m.Channel != dm || m.TimeStamp != ts || m.ChannelType != "im" {
		t.Fatalf("message %+v", m)
	}
	api := ev.Data.(slackevents.EventsAPIEvent)
	if api.TeamID != s.TeamID || api.Type != slackevents.CallbackEvent {
		t.Fatalf("envelope %+v", api)
	}
	// Not acknowledged: delivered again, marked as a retry.
	ev2, m2 := nextMessage(t, sm)
	if m2.TimeStamp != ts || ev2.Request.RetryAttempt != 1 || ev2.Request.RetryReason != "timeout" || ev2.Request.EnvelopeID != ev.Request.EnvelopeID {
		t.Fatalf("redelivery %+v %+v", m2, ev2.Request)
	}
	if err := sm.Ack(*ev2.Request); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Wait(ctx, func() bool { return s.Unacked() == 0 }); err != nil {
		t.Fatalf("ack not taken: %d unacked", s.Unacked())
	}

	// A mention in a channel raises message and app_mention.
	s.Post(alice, gen, "<@"+s.Bot.ID+"> look", InThread(ts))
	var kinds []string
	for len(kinds) < 2 {
		select {
		case ev := <-sm.Events:
			if ev.Type != socketmode.EventTypeEventsAPI {
				continue
			}
			kinds = append(kinds, ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Type)
			_ = sm.Ack(*ev.Request)
		case <-ctx.Done():
			t.Fatalf("events %v", kinds)
		}
	}
	if strings.Join(kinds, ",") != "message,app_mention" {
		t.Fatalf("events %v", kinds)
	}
	if err := s.Wait(ctx, func() bool { return s.Unacked() == 0 }); err != nil {
		t.Fatalf("acks not taken: %d unacked", s.Unacked())
	}

	// A disconnect request: the client reconnects; unacked envelopes follow.
	s.SetAckTimeout(time.Hour)
	s.IgnoreAcks(true)
	s.Post(alice, dm, "across the reconnect")
	ev3, _ := nextMessage(t, sm)
	_ = sm.Ack(*ev3.Request) // lost
	s.Disconnect("refresh_requested")
	if err := s.Wait(ctx, func() bool { open, opened := s.Connections(); return open == 1 && opened == 2 }); err != nil {
		t.Fatalf("no reconnect after disconnect")
	}
	ev4, m4 := nextMessage(t, sm)
	if m4.Text != "across the reconnect" || ev4.Request.RetryAttempt == 0 {
		t.Fatalf("after reconnect %+v %+v", m4, ev4.Request)
	}
	s.IgnoreAcks(false)
	_ = sm.Ack(*ev4.Request)
	if err := s.Wait(ctx, func() bool { return s.Unacked() == 0 }); err != nil {
		t.Fatalf("ack after the reconnect not taken: %d unacked", s.Unacked())
	}
}
