package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/homeserver"
	testmail "conch/internal/testenv/mail"
	tgfake "conch/internal/testenv/telegram"
	"conch/sqlite"
)

// TestUpTelegramGroupSendersAtOnce: several people in one Telegram group
// write to the bot at the same moment, through the real `conch up` and its
// store. Every message is answered once, by its own turn (the answer
// replies to it and carries its words), in the order Telegram delivered
// them.
func TestUpTelegramGroupSendersAtOnce(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	llm.Handle(func(r fakellm.Request) fakellm.Reply { return fakellm.Text("re: " + r.LastUserText()) })
	tg := tgfake.Start(t)
	people := []tgfake.User{
		tgfake.Person(1001, "ann", "Ann"), tgfake.Person(1002, "ben", "Ben"),
		tgfake.Person(1003, "cat", "Cat"), tgfake.Person(1004, "dan", "Dan"),
	}
	group := tgfake.Group(-100777, "team")
	p := startConch(t, telegramEnv(t, llm, tg, t.TempDir(), "1001,1002,1003,1004"), "up")
	p.waitStderr(t, "telegram polling")

	const each = 3
	var mu sync.Mutex
	sent := map[int64]string{} // message id → its token
	var wg sync.WaitGroup
	for _, u := range people {
		wg.Go(func() {
			for i := range each {
				token := fmt.Sprintf("q-%s-%d", u.Username, i)
				m := tg.SendText(u, group, "@conch_test_bot "+token)
				mu.Lock()
				sent[m.MessageID] = token
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := len(people) * each
	// The answers, not the "queued (position N)" notices.
	answers := func() []tgfake.Sent {
		var out []tgfake.Sent
		for _, m := range tg.Messages(group.ID) {
			if !strings.HasPrefix(m.Text, "queued (") {
				out = append(out, m)
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool { return len(answers()) >= total }); err != nil {
		t.Fatalf("%d of %d answers: %v; stderr:\n%s", len(answers()), total, err, p.stderr)
	}
	answered := map[int64]int{}
	var order []int64
	for _, m := range answers() {
		token, ok := sent[m.ReplyTo]
		if !ok {
			t.Errorf("bot message %q replies to %d, none of the questions", m.Text, m.ReplyTo)
			continue
		}
		if !strings.Contains(m.Text, token) {
			t.Errorf("the answer to %q is %q: another message's reply", token, m.Text)
		}
		answered[m.ReplyTo]++
		order = append(order, m.ReplyTo)
	}
	for id, token := range sent {
		if answered[id] != 1 {
			t.Errorf("%q answered %d times", token, answered[id])
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("answered in the order %v, want the order Telegram delivered them", order)
	}
	if n := llm.Count(); n != total {
		t.Errorf("the model was asked %d times for %d messages", n, total)
	}
}

// TestUpMatrixGroupSendersAtOnce: three people in one Matrix room write at
// the same moment, through the real `conch up`, a real homeserver and the
// store. Every message is answered once, by its own turn (the answer is a
// reply to it and carries its words), in the room's timeline order.
func TestUpMatrixGroupSendersAtOnce(t *testing.T) {
	testenv.Short(t)
	hs := homeserver.Start(t)
	botID, botToken, _ := hs.Register(t, "conch")
	type person struct {
		id  string
		cli *matrixUser
	}
	var people []person
	for _, name := range []string{"alice", "bob", "carol"} {
		uid, tok, _ := hs.Register(t, name)
		people = append(people, person{id: uid, cli: newMatrixUser(t, hs.URL, uid, tok)})
	}
	llm := fakellm.New(t)
	llm.Handle(func(r fakellm.Request) fakellm.Reply { return fakellm.Text("re: " + r.LastUserText()) })
	env := append(testEnv(llm, fakellm.OpenAI, t.TempDir()),
		"CONCH_GATEWAY_LISTEN="+freeAddr(t),
		"CONCH_MATRIX_HOMESERVER="+hs.URL,
		"CONCH_MATRIX_USER_ID="+botID,
		"CONCH_MATRIX_ACCESS_TOKEN="+botToken,
		"CONCH_MATRIX_ALLOW_FROM="+people[0].id+","+people[1].id+","+people[2].id,
	)
	p := startConch(t, env, "up")
	p.waitStderr(t, "matrix first sync")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alice := people[0].cli
	invite := []id.UserID{id.UserID(botID), id.UserID(people[1].id), id.UserID(people[2].id)}
	room, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: invite})
	if err != nil {
		t.Fatal(err)
	}
	for _, pp := range people[1:] {
		if _, err := pp.cli.cli.JoinRoomByID(ctx, room.RoomID); err != nil {
			t.Fatal(err)
		}
	}
	// The bot has joined once its members list has it.
	deadline := time.Now().Add(time.Minute)
	for {
		members, err := alice.cli.JoinedMembers(ctx, room.RoomID)
		if err == nil && members.Joined[id.UserID(botID)].DisplayName != "" || err == nil && len(members.Joined) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bot did not join: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	const each = 3
	var mu sync.Mutex
	asked := map[id.EventID]string{}
	var wg sync.WaitGroup
	for i, pp := range people {
		wg.Go(func() {
			for n := range each {
				token := fmt.Sprintf("q-%d-%d", i, n)
				resp, err := pp.cli.cli.SendText(ctx, room.RoomID, token)
				if err != nil {
					t.Errorf("send %s: %v", token, err)
					return
				}
				mu.Lock()
				asked[resp.EventID] = token
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := len(people) * each
	// Alice's client sees the room's timeline in order: the questions and
	// the bot's answers (m.text; notices such as "queued" are m.notice).
	replies := map[id.EventID][]string{}
	var answerOrder []id.EventID
	for len(answerOrder) < total {
		alice.mu.Lock()
		evs := alice.msgs
		alice.msgs = nil
		alice.mu.Unlock()
		for _, evt := range evs {
			if evt.RoomID != room.RoomID {
				continue
			}
			_ = evt.Content.ParseRaw(evt.Type)
			msg := evt.Content.AsMessage()
			if string(evt.Sender) != botID {
				continue
			}
			if msg.MsgType != event.MsgText || msg.RelatesTo == nil || msg.RelatesTo.GetReplyTo() == "" {
				continue
			}
			to := msg.RelatesTo.GetReplyTo()
			replies[to] = append(replies[to], msg.Body)
			answerOrder = append(answerOrder, to)
		}
		if len(answerOrder) >= total {
			break
		}
		select {
		case <-alice.note:
		case <-ctx.Done():
			t.Fatalf("%d of %d answers; stderr:\n%s", len(answerOrder), total, p.stderr)
		}
	}
	for ev, token := range asked {
		if got := replies[ev]; len(got) != 1 || !strings.Contains(got[0], token) {
			t.Errorf("%s answered %q, want once with its own words", token, got)
		}
	}
	// Arrival order is the order the bot received them in: its turns' order.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	if got, want := tokensOf(answerOrder, asked), turnOrder(t, env, "matrix:"+string(room.RoomID)); !slices.Equal(got, want) {
		t.Errorf("answers came in the order %v; the turns (arrival order) are %v", got, want)
	}
	if n := llm.Count(); n != total {
		t.Errorf("the model was asked %d times for %d messages", n, total)
	}
}

func tokensOf(evs []id.EventID, asked map[id.EventID]string) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = asked[ev]
	}
	return out
}

// turnOrder returns the texts of a conversation's messages in turn order,
// from `conch transcript` (conch must be stopped).
func turnOrder(t *testing.T, env []string, conv string) []string {
	t.Helper()
	out, errOut, code := conchRun(t, env, "transcript "+conv+" --format jsonl")
	if code != 0 {
		t.Fatalf("transcript: exit %d: %s", code, errOut)
	}
	var texts []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Type, Role, Text string
			Note             bool
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		if e.Type == "message" && e.Role == "user" && !e.Note {
			texts = append(texts, e.Text)
		}
	}
	return texts
}

// TestUpEmailBurst: a burst of mails in one thread reaches conch at once,
// through the real `conch up`, dovecot, postfix and the store. Every mail is
// answered once, by its own turn (the reply is In-Reply-To it and carries
// its words), in the order conch received them (its turns' order).
func TestUpEmailBurst(t *testing.T) {
	testenv.Short(t)
	ms := testmail.Start(t)
	conchUser, alice := ms.AddUser(t, "conch"), ms.AddUser(t, "alice")
	llm := fakellm.New(t)
	llm.Handle(func(r fakellm.Request) fakellm.Reply { return fakellm.Text("re: " + r.LastUserText()) })
	env := append(testEnv(llm, fakellm.OpenAI, t.TempDir()), "CONCH_GATEWAY_LISTEN=")
	env = append(env, emailEnv(ms, conchUser, alice)...)
	env = append(env, "CONCH_EMAIL_ALLOW_FROM="+alice.Address)
	p := startConch(t, env, "up")
	p.waitStderr(t, "email: watching mailbox")

	const burst = 6
	from := "Alice <" + alice.Address + ">"
	token := func(i int) string { return fmt.Sprintf("burst-question-%d", i) }
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			var extra []string
			subject := "Burst"
			if i > 0 {
				subject = "Re: Burst"
				extra = []string{"In-Reply-To: <b0@example.test>", "References: <b0@example.test>"}
			}
			ms.MustSend(t, alice.Address, []string{conchUser.Address}, personMail(from, conchUser.Address, subject, fmt.Sprintf("b%d@example.test", i), token(i), extra...))
		})
	}
	wg.Wait()
	// The answers, not the "queued (position N)" notices.
	answers := func() []testmail.Message {
		msgs, _ := ms.Messages(alice)
		var out []testmail.Message
		for _, m := range msgs {
			if !strings.Contains(string(m.Raw), "queued (position") {
				out = append(out, m)
			}
		}
		return out
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(answers()) < burst {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d answers; stderr:\n%s", len(answers()), burst, p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // a duplicate would show by now
	replies := map[string]int{}
	for _, m := range answers() {
		to := m.Header.Get("In-Reply-To")
		var i int
		if _, err := fmt.Sscanf(to, "<b%d@example.test>", &i); err != nil {
			t.Errorf("a reply In-Reply-To %q", to)
			continue
		}
		body := string(m.Raw)
		if !strings.Contains(body, "re: ") || !strings.Contains(body, token(i)) {
			t.Errorf("the reply to mail %d does not answer it:\n%s", i, m.Raw)
		}
		for j := range burst {
			if j != i && strings.Contains(body, token(j)+"\r") {
				t.Errorf("the reply to mail %d carries mail %d's words:\n%s", i, j, m.Raw)
			}
		}
		replies[to]++
	}
	for i := range burst {
		if n := replies[fmt.Sprintf("<b%d@example.test>", i)]; n != 1 {
			t.Errorf("mail %d answered %d times", i, n)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	// The thread is one conversation; its turns are the arrival order.
	// The store's record: the answers went out in turn order, each its
	// own turn's.
	checkAnsweredInTurnOrder(t, dataDirOf(env), conch.ChannelEmail, burst)
	if n := llm.Count(); n != burst {
		t.Errorf("the model was asked %d times for %d mails", n, burst)
	}
}

// dataDirOf returns the data dir an environment names.
func dataDirOf(env []string) string {
	for _, kv := range env {
		if dir, ok := strings.CutPrefix(kv, "CONCH_DATA_DIR="); ok {
			return dir
		}
	}
	return ""
}

// checkAnsweredInTurnOrder reads the store of a stopped conch: a channel's
// answers (assistant message events) went out in turn-id order, one per
// turn, each carrying its own turn's message (the scripted model answers
// "re: " and what it was asked).
func checkAnsweredInTurnOrder(t *testing.T, dataDir string, ch conch.ChannelName, want int) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(dataDir, "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys, err := db.Conversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	for _, k := range keys {
		if k.Channel != ch {
			continue
		}
		turns, err := db.Turns(ctx, k, 1000)
		if err != nil {
			t.Fatal(err)
		}
		asked := map[conch.TurnID]string{}
		for _, tr := range turns {
			asked[tr.ID] = strings.TrimSpace(tr.Inbound.Text)
		}
		evs, err := db.EventsSince(ctx, k, 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		var last conch.TurnID
		for _, ev := range evs {
			m, ok := ev.Data.(conch.MessageEvent)
			if !ok || m.Role != conch.RoleAssistant {
				continue
			}
			answers++
			if ev.Turn <= last {
				t.Errorf("%s: turn %d answered after turn %d", k, ev.Turn, last)
			}
			last = ev.Turn
			if !strings.HasPrefix(m.Text, "re: ") || !strings.Contains(m.Text, asked[ev.Turn]) {
				t.Errorf("%s: turn %d (%q) answered %q", k, ev.Turn, asked[ev.Turn], m.Text)
			}
		}
	}
	if answers != want {
		t.Errorf("%d answers in the store, want %d", answers, want)
	}
}
