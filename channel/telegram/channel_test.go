package telegram

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch"
	tgfake "conch/internal/testenv/telegram"
)

func waitFor(t *testing.T, srv *tgfake.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Wait(ctx, cond); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestPrivateMessageAndOffset(t *testing.T) {
	srv := tgfake.Start(t)
	cur, h := newCursors(), newHandler()
	ch := newChannel(t, srv, cur)
	run(t, ch, h)

	sent := srv.SendText(alice, tgfake.PrivateChat(alice), "hello there")
	in := h.wait(t, 1)[0]
	want := conch.Inbound{Key: key(alice.ID), Sender: "4242", SenderName: "@alice", Text: "hello there", ExternalID: "4242:" + strconv.FormatInt(sent.MessageID, 10)}
	if in.Key != want.Key || in.Sender != want.Sender || in.SenderName != want.SenderName || in.Text != want.Text || in.ExternalID != want.ExternalID {
		t.Fatalf("inbound %+v, want %+v", in, want)
	}
	// The offset is stored and the next poll confirms the update.
	name := "telegram:" + strconv.FormatInt(srv.Bot.ID, 10) + ":offset"
	waitFor(t, srv, "the update to be confirmed", func() bool { return srv.Pending() == 0 })
	stored, _ := cur.Cursor(context.Background(), name)
	offs := srv.Offsets()
	if stored == "" || strconv.FormatInt(offs[len(offs)-1], 10) != stored {
		t.Fatalf("stored offset %q, last polled offsets %v", stored, offs)
	}
	// Allowed updates are asked for explicitly.
	if got := srv.Calls("getUpdates")[0].Params["allowed_updates"]; got != `["message","my_chat_member","callback_query"]` {
		t.Fatalf("allowed_updates %q", got)
	}
	// A person without a username is named by their name.
	srv.SendText(bob, tgfake.PrivateChat(bob), "hi")
	if in := h.wait(t, 2)[1]; in.SenderName != "Bob" || in.Sender != "4343" {
		t.Fatalf("bob's inbound %+v", in)
	}
}

func TestHandlerFailureRedelivers(t *testing.T) {
	srv := tgfake.Start(t)
	cur, h := newCursors(), newHandler()
	h.fail = 2
	ch := newChannel(t, srv, cur)
	run(t, ch, h)
	srv.SendText(alice, tgfake.PrivateChat(alice), "first")
	srv.SendText(alice, tgfake.PrivateChat(alice), "second")
	got := h.wait(t, 2)
	if got[0].Text != "first" || got[1].Text != "second" || len(got) != 2 {
		t.Fatalf("got %+v, want first then second once each", got)
	}
	h.mu.Lock()
	calls := h.calls
	h.mu.Unlock()
	if calls != 4 {
		t.Fatalf("HandleInbound called %d times, want 4 (two failures, then each message once)", calls)
	}
	if lines := ch.Status(context.Background(), conch.ConversationKey{}); len(lines) != 0 {
		t.Fatalf("status after recovery: %q", lines)
	}
}

func TestRestartResumesFromStoredOffset(t *testing.T) {
	srv := tgfake.Start(t)
	cur := newCursors()
	h1 := newHandler()
	stop := run(t, newChannel(t, srv, cur), h1)
	srv.SendText(alice, tgfake.PrivateChat(alice), "before")
	h1.wait(t, 1)
	waitFor(t, srv, "the offset to be stored", func() bool {
		v, _ := cur.Cursor(context.Background(), "telegram:"+strconv.FormatInt(srv.Bot.ID, 10)+":offset")
		return v != ""
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stored, _ := cur.Cursor(context.Background(), "telegram:"+strconv.FormatInt(srv.Bot.ID, 10)+":offset")
	srv.SendText(alice, tgfake.PrivateChat(alice), "while down")
	n := len(srv.Offsets())

	h2 := newHandler()
	run(t, newChannel(t, srv, cur), h2)
	got := h2.wait(t, 1)
	if len(got) != 1 || got[0].Text != "while down" {
		t.Fatalf("after restart got %+v, want only the message sent while down", got)
	}
	if first := srv.Offsets()[n]; strconv.FormatInt(first, 10) != stored {
		t.Fatalf("first poll after restart used offset %d, want the stored %s", first, stored)
	}
}

func TestGroupPolicies(t *testing.T) {
	srv := tgfake.Start(t)
	h := newHandler()
	ch := newChannel(t, srv, newCursors())
	run(t, ch, h)
	srv.SendText(alice, group, "just chatting")
	srv.SendText(alice, group, "@conch_test_bot: what is 2+2?")
	srv.SendText(alice, group, "/status")
	srv.SendText(alice, group, "/stop@conch_test_bot now")
	srv.SendText(alice, group, "/weather@other_bot")
	srv.SendText(alice, group, "hey @Conch_Test_Bot look")
	got := h.wait(t, 4)
	texts := []string{}
	for _, in := range got {
		texts = append(texts, in.Text)
		if in.Key != key(group.ID) {
			t.Fatalf("group message routed to %s", in.Key)
		}
	}
	want := []string{"what is 2+2?", "/status", "/stop now", "hey @Conch_Test_Bot look"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("group texts %q, want %q", texts, want)
	}
	// A reply to the bot's message counts as addressing it.
	if err := ch.Send(context.Background(), conch.Outbound{Key: key(group.ID), Kind: conch.OutboundReply, Text: "4", InReplyTo: got[0].ExternalID}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.WaitMessages(t, group.ID, 1, 5*time.Second)
	if msgs[0].ReplyTo == 0 {
		t.Fatalf("an answer in a group should quote the question: %+v", msgs[0])
	}
	srv.Reply(bob, group, "and 3+3?", srv.BotMessage(group.ID, msgs[0].MessageID))
	if in := h.wait(t, 5)[4]; in.Text != "and 3+3?" || in.Sender != "4343" {
		t.Fatalf("reply to the bot: %+v", in)
	}
}

func TestGroupPolicyDenyAndAll(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   int
	}{{GroupDeny, 0}, {GroupAll, 2}} {
		t.Run(tc.policy, func(t *testing.T) {
			srv := tgfake.Start(t)
			h := newHandler()
			run(t, newChannel(t, srv, newCursors(), func(o *Options) { o.GroupPolicy = tc.policy }), h)
			srv.SendText(alice, group, "plain chat")
			srv.SendText(alice, group, "@conch_test_bot hi")
			srv.SendText(alice, tgfake.PrivateChat(alice), "private")
			h.wait(t, tc.want+1)
			waitFor(t, srv, "all updates confirmed", func() bool { return srv.Pending() == 0 })
			if got := h.inbound(); len(got) != tc.want+1 {
				t.Fatalf("policy %s: got %d messages, want %d: %+v", tc.policy, len(got), tc.want+1, got)
			}
		})
	}
}

func TestStartBecomesHelp(t *testing.T) {
	srv := tgfake.Start(t)
	h := newHandler()
	run(t, newChannel(t, srv, newCursors()), h)
	srv.SendText(alice, tgfake.PrivateChat(alice), "/start")
	if in := h.wait(t, 1)[0]; in.Text != "/help" {
		t.Fatalf("/start handed over as %q, want /help", in.Text)
	}
}

func TestCommandsRegistered(t *testing.T) {
	srv := tgfake.Start(t)
	run(t, newChannel(t, srv, newCursors()), newHandler())
	waitFor(t, srv, "setMyCommands", func() bool { return len(srv.Commands()) == 5 })
	var names []string
	for _, c := range srv.Commands() {
		names = append(names, c.Command)
	}
	if strings.Join(names, ",") != "stop,reset,status,usage,help" {
		t.Fatalf("commands %v", names)
	}
}

func TestLongReplySplit(t *testing.T) {
	srv := tgfake.Start(t)
	ch := newChannel(t, srv, newCursors())
	run(t, ch, newHandler())
	srv.SendText(alice, tgfake.PrivateChat(alice), "hi")
	var b strings.Builder
	for i := range 60 {
		b.WriteString("Paragraph " + strconv.Itoa(i) + " has **bold** words & <angle> brackets, repeated to take room. ")
		b.WriteString(strings.Repeat("More text here. ", 6) + "\n\n")
	}
	b.WriteString("```go\n")
	for i := range 400 {
		b.WriteString("fmt.Println(\"line " + strconv.Itoa(i) + " <x>\")\n")
	}
	b.WriteString("```\n\nThe end.")
	if err := ch.Send(context.Background(), conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply, Text: b.String()}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(alice.ID)
	if len(msgs) < 4 {
		t.Fatalf("a %d-byte reply went out as %d message(s)", b.Len(), len(msgs))
	}
	var all strings.Builder
	for i, m := range msgs {
		if m.ParseMode != "HTML" {
			t.Fatalf("part %d sent as %q, want HTML", i, m.ParseMode)
		}
		if n := tgfake.UTF16Len(m.Text); n > tgfake.MaxTextLen {
			t.Fatalf("part %d is %d characters", i, n)
		}
		if i > 0 && m.Silent {
			t.Fatalf("part %d of a reply is silent", i)
		}
		all.WriteString(m.Text + "\n")
	}
	for _, want := range []string{"Paragraph 0 has bold words & <angle> brackets", "Paragraph 59", `fmt.Println("line 0 <x>")`, `fmt.Println("line 399 <x>")`, "The end."} {
		if !strings.Contains(all.String(), want) {
			t.Fatalf("the parts lost %q", want)
		}
	}
	// Every part of the code block is a pre block; paragraphs are not cut.
	for i, m := range msgs {
		if strings.Contains(m.Text, "fmt.Println") && !hasEntity(m.Entities, "pre") {
			t.Fatalf("part %d holds code outside a pre block", i)
		}
		if strings.Contains(m.Raw, "Paragraph") && !strings.HasPrefix(m.Raw, "Paragraph") {
			t.Fatalf("part %d does not start at a paragraph: %.60q", i, m.Raw)
		}
	}
}

func hasEntity(es []tgfake.Entity, typ string) bool {
	for _, e := range es {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func TestEntityParseFallback(t *testing.T) {
	srv := tgfake.Start(t)
	ch := newChannel(t, srv, newCursors())
	run(t, ch, newHandler())
	srv.SendText(alice, tgfake.PrivateChat(alice), "hi")
	srv.Fail("sendMessage", tgfake.EntityParseError())
	if err := ch.Send(context.Background(), conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply, Text: "Use **care** with [links](https://example.org) & <tags>."}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(alice.ID)
	if len(msgs) != 1 {
		t.Fatalf("sent %d messages, want 1: %+v", len(msgs), msgs)
	}
	if msgs[0].ParseMode != "" || msgs[0].Text != "Use care with links (https://example.org) & <tags>." {
		t.Fatalf("fallback %+v", msgs[0])
	}
	if n := len(srv.Calls("sendMessage")); n != 2 {
		t.Fatalf("sendMessage called %d times, want 2 (HTML refused, then plain)", n)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	srv := tgfake.Start(t)
	ch := newChannel(t, srv, newCursors())
	run(t, ch, newHandler())
	srv.SendText(alice, tgfake.PrivateChat(alice), "hi")
	srv.Fail("sendMessage", tgfake.TooManyRequests(1))
	if err := ch.Send(context.Background(), conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply, Text: "patience"}); err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("sendMessage")
	if len(calls) != 2 {
		t.Fatalf("sendMessage called %d times, want 2", len(calls))
	}
	if gap := calls[1].At.Sub(calls[0].At); gap < time.Second {
		t.Fatalf("retried after %s, Telegram asked for 1 s", gap)
	}
	lines := strings.Join(ch.Status(context.Background(), key(alice.ID)), "\n")
	if !strings.Contains(lines, "rate limited by Telegram (429)") {
		t.Fatalf("status does not show the rate limit: %q", lines)
	}
}

func TestPollFailuresBackOffAndShow(t *testing.T) {
	srv := tgfake.Start(t)
	h := newHandler()
	ch := newChannel(t, srv, newCursors())
	run(t, ch, h)
	srv.Fail("getUpdates", tgfake.Fault{Status: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running", Times: 3})
	srv.Fail("getUpdates", tgfake.ServerError(502))
	// Wake the running poll so the faults are met.
	srv.SendText(alice, tgfake.PrivateChat(alice), "wake")
	waitFor(t, srv, "the 409s", func() bool {
		s := strings.Join(ch.Status(context.Background(), conch.ConversationKey{}), "\n")
		return strings.Contains(s, "another process polls this bot token") || strings.Contains(s, "502")
	})
	srv.SendText(alice, tgfake.PrivateChat(alice), "after")
	got := h.wait(t, 2)
	if got[0].Text != "wake" || got[1].Text != "after" {
		t.Fatalf("got %+v", got)
	}
	if lines := ch.Status(context.Background(), conch.ConversationKey{}); len(lines) != 0 {
		t.Fatalf("status after recovery: %q", lines)
	}
}

func TestConflictFromSecondPoller(t *testing.T) {
	srv := tgfake.Start(t)
	ch := newChannel(t, srv, newCursors())
	run(t, ch, newHandler())
	// Another process polls the same token: the server ends our poll with 409.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			req, _ := pollOnce(ctx, srv.URL+"/bot"+srv.Token+"/getUpdates?timeout=1")
			_ = req
		}
	}()
	waitFor(t, srv, "a conflict in the status", func() bool {
		return strings.Contains(strings.Join(ch.Status(context.Background(), conch.ConversationKey{}), "\n"), "Conflict: terminated by other getUpdates request")
	})
}

func TestUnauthorizedToken(t *testing.T) {
	srv := tgfake.Start(t)
	ch, err := New(Options{Token: "7000001:wrong-token-0123456789", APIURL: srv.URL, Cursors: newCursors(), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	err = ch.Run(context.Background(), newHandler())
	var ce *conch.Error
	if !errors.As(err, &ce) || ce.Kind != conch.KindAuth || !strings.Contains(err.Error(), "telegram.bot_token") {
		t.Fatalf("Run with a wrong token: %v", err)
	}
	if _, err := CheckBot(context.Background(), srv.URL, "7000001:wrong-token-0123456789"); err == nil || !strings.Contains(err.Error(), "refused telegram.bot_token") {
		t.Fatalf("CheckBot with a wrong token: %v", err)
	}
	if name, err := CheckBot(context.Background(), srv.URL, srv.Token); err != nil || name != "@conch_test_bot" {
		t.Fatalf("CheckBot: %q, %v", name, err)
	}
}

// TestTypingRefreshed: under the gateway (conch's one typing renewer) the
// "typing" action is sent again every TypingEvery while a turn runs, and no
// more once it is answered.
func TestTypingRefreshed(t *testing.T) {
	srv := tgfake.Start(t)
	underGateway(t, srv, scriptedRunner{steps: 8, gap: 40 * time.Millisecond}, func(o *Options) { o.TypingEvery = 40 * time.Millisecond })
	typing := func() int {
		n := 0
		for _, s := range srv.Sent(alice.ID) {
			if s.Method == "sendChatAction" && s.Action == "typing" {
				n++
			}
		}
		return n
	}
	srv.SendText(alice, tgfake.PrivateChat(alice), "hi")
	waitFor(t, srv, "typing renewed", func() bool { return typing() >= 4 })
	msgs := srv.WaitMessages(t, alice.ID, 2, 10*time.Second)
	if last := msgs[len(msgs)-1]; last.Text != "echo: hi" {
		t.Fatalf("last message %q, want the answer", last.Text)
	}
	n := typing()
	time.Sleep(200 * time.Millisecond)
	if typing() != n {
		t.Fatalf("typing still sent after the answer: %d → %d", n, typing())
	}
}

func TestProgressEditedAndCollapsed(t *testing.T) {
	srv := tgfake.Start(t)
	ch := newChannel(t, srv, newCursors())
	run(t, ch, newHandler())
	srv.SendText(alice, tgfake.PrivateChat(alice), "hi")
	ctx := context.Background()
	ref, err := ch.SendEditable(ctx, conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundProgress, Text: "⚙ bash `ls`"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Edit(ctx, ref, "⚙ bash `ls`\n⚙ read_file `a.txt`"); err != nil {
		t.Fatal(err)
	}
	// Edits of one message are at least a second apart (Telegram's limit):
	// this one lands a second after the message was sent.
	id, _ := strconv.ParseInt(ref.ID, 10, 64)
	if m, _ := srv.Message(alice.ID, id); strings.Contains(m.Text, "read_file") {
		t.Fatalf("edited at once, less than a second after the message was sent: %q", m.Text)
	}
	waitFor(t, srv, "the paced edit", func() bool {
		m, _ := srv.Message(alice.ID, id)
		return strings.Contains(m.Text, "read_file a.txt")
	})
	sent := srv.Messages(alice.ID)[0].At
	edits := srv.Sent(alice.ID)
	if at := edits[len(edits)-1].At; at.Sub(sent) < 900*time.Millisecond {
		t.Fatalf("edit %s after the message, want about a second", at.Sub(sent))
	}
	// Telegram rate-limits the next edit: no error, the text lands later.
	time.Sleep(time.Second)
	srv.Fail("editMessageText", tgfake.TooManyRequests(1))
	if err := ch.Edit(ctx, ref, "⚙ bash `ls`\n⚙ read_file `a.txt`\n⚙ write_file `b.txt`"); err != nil {
		t.Fatalf("an edit met by 429 should not fail the turn: %v", err)
	}
	waitFor(t, srv, "the deferred edit", func() bool {
		m, _ := srv.Message(alice.ID, id)
		return strings.Contains(m.Text, "write_file")
	})
	calls := srv.Calls("editMessageText")
	if n := len(calls); n < 3 || calls[n-1].At.Sub(calls[n-2].At) < time.Second {
		t.Fatalf("the edit after the 429 came too soon: %d edits", n)
	}
	// The turn ends: the progress message becomes a collapsed work log and
	// the answer is a new, notifying message.
	if err := ch.SetTyping(ctx, key(alice.ID), false); err != nil {
		t.Fatal(err)
	}
	if err := ch.Send(ctx, conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply, Text: "Done."}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, srv, "the collapsed work log", func() bool {
		m, _ := srv.Message(alice.ID, id)
		return strings.HasPrefix(m.Text, "Work log")
	})
	m, _ := srv.Message(alice.ID, id)
	if !hasEntity(m.Entities, "expandable_blockquote") || !strings.Contains(m.Text, "write_file b.txt") {
		t.Fatalf("collapsed progress %+v", m)
	}
	msgs := srv.Messages(alice.ID)
	last := msgs[len(msgs)-1]
	if last.Text != "Done." || last.Silent || !msgs[0].Silent {
		t.Fatalf("messages %+v: want a silent progress message, then a notifying answer", msgs)
	}
}

func TestInboundAttachments(t *testing.T) {
	srv := tgfake.Start(t)
	h := newHandler()
	run(t, newChannel(t, srv, newCursors(), func(o *Options) { o.MaxFileBytes = 4096 }), h)
	chat := tgfake.PrivateChat(alice)
	photo := bytes.Repeat([]byte("P"), 3000)
	srv.SendPhoto(alice, chat, photo, "what is this?")
	srv.SendDocument(alice, chat, "../../etc/notes.txt", "text/plain", []byte("some notes"), "")
	srv.SendDocument(alice, chat, "big.bin", "application/octet-stream", bytes.Repeat([]byte("B"), 5000), "too big?")
	got := h.wait(t, 3)

	if got[0].Text != "what is this?" || len(got[0].Attachments) != 1 {
		t.Fatalf("photo message %+v", got[0])
	}
	a := got[0].Attachments[0]
	if a.MediaType != "image/jpeg" || a.Size != 3000 || !bytes.Equal(readAll(t, a), photo) {
		t.Fatalf("photo attachment %+v (the largest size must be chosen)", a)
	}
	if len(got[1].Attachments) != 1 || got[1].Attachments[0].Name != "notes.txt" || got[1].Text != "[file notes.txt]" {
		t.Fatalf("document message %+v", got[1])
	}
	if string(readAll(t, got[1].Attachments[0])) != "some notes" {
		t.Fatal("document content differs")
	}
	if len(got[2].Attachments) != 0 || !strings.Contains(got[2].Text, "too big?") || !strings.Contains(got[2].Text, "big.bin (4.9 KB) was not received") {
		t.Fatalf("oversized document %+v", got[2])
	}
}

func TestSendAttachments(t *testing.T) {
	srv := tgfake.Start(t)
	ch := newChannel(t, srv, newCursors())
	run(t, ch, newHandler())
	srv.SendText(alice, tgfake.PrivateChat(alice), "send me the report")
	data := []byte("col1,col2\n1,2\n")
	err := ch.SendAttachments(context.Background(), conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply, Text: "Here it is.",
		Attachments: []conch.Attachment{{Name: "report.csv", Size: int64(len(data)), Open: func(context.Context) (rcloser, error) { return nopCloser(data), nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(alice.ID)
	if len(msgs) != 2 || msgs[0].Text != "Here it is." || msgs[1].Document == nil || msgs[1].Document.Name != "report.csv" || !bytes.Equal(msgs[1].Document.Data, data) {
		t.Fatalf("sent %+v", msgs)
	}
}

func TestBotRemovedFromGroupClosesConversation(t *testing.T) {
	srv := tgfake.Start(t)
	h := newHandler()
	run(t, newChannel(t, srv, newCursors()), h)
	srv.SendText(alice, group, "@conch_test_bot hi")
	h.wait(t, 1)
	srv.RemoveBot(alice, group)
	waitFor(t, srv, "the removal to be handled", func() bool { return srv.Pending() == 0 })
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		closed := append([]conch.ConversationKey(nil), h.closed...)
		h.mu.Unlock()
		if len(closed) == 1 && closed[0] == key(group.ID) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("closed %v, want the group", closed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// refusingHandler refuses messages whose text is "refuse" as invalid.
type refusingHandler struct{ *handler }

func (h refusingHandler) HandleInbound(ctx context.Context, in conch.Inbound) error {
	if in.Text == "refuse" {
		return conch.Errorf(conch.KindInvalid, "attachment over the limit")
	}
	return h.handler.HandleInbound(ctx, in)
}

func TestRefusedMessageIsSkipped(t *testing.T) {
	srv := tgfake.Start(t)
	h := newHandler()
	run(t, newChannel(t, srv, newCursors()), refusingHandler{h})
	srv.SendText(alice, tgfake.PrivateChat(alice), "refuse")
	srv.SendText(alice, tgfake.PrivateChat(alice), "next")
	if got := h.wait(t, 1); got[0].Text != "next" {
		t.Fatalf("got %+v: a message the gateway refused as invalid must not block the ones after it", got)
	}
}

func TestForumTopic(t *testing.T) {
	srv := tgfake.Start(t)
	h := newHandler()
	ch := newChannel(t, srv, newCursors())
	run(t, ch, h)
	srv.SendTopicText(alice, group, 7, "@conch_test_bot in the topic")
	in := h.wait(t, 1)[0]
	ctx := context.Background()
	if err := ch.SetTyping(ctx, in.Key, true); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.SendEditable(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundProgress, Text: "working", InReplyTo: in.ExternalID}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Send(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "answer", InReplyTo: in.ExternalID}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"sendChatAction", "sendMessage"} {
		for _, c := range srv.Calls(m) {
			if c.Params["message_thread_id"] != "7" {
				t.Fatalf("%s outside the topic: %v", m, c.Params)
			}
		}
	}
}
