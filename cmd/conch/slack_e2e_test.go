package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	slackfake "conch/internal/testenv/slack"
)

func slackEnv(t *testing.T, llm *fakellm.Server, sl *slackfake.Server, dir string, allow string) []string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return append(testEnv(llm, fakellm.OpenAI, dir),
		"CONCH_GATEWAY_LISTEN="+addr,
		"CONCH_SLACK_BOT_TOKEN="+sl.BotToken,
		"CONCH_SLACK_APP_TOKEN="+sl.AppToken,
		"CONCH_SLACK_API_URL="+sl.APIURL(),
		"CONCH_SLACK_ALLOW_FROM="+allow,
	)
}

// TestUpSlackEndToEnd runs the real `conch up` binary against the fake
// Slack: a DM is answered in mrkdwn while its message carries the working
// reaction; a mention in a channel is answered in a thread under it, and a
// follow-up in that thread without a mention too; a person not on the
// allowlist gets nothing.
func TestUpSlackEndToEnd(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	sl := slackfake.Start(t)
	alice := sl.Person("U0ALICE", "alice")
	bob := sl.Person("U0BOB", "bob")
	mallory := sl.Person("U0MALLORY", "mallory")
	gen := sl.Channel("C0GENERAL", "general")
	p := startConch(t, slackEnv(t, llm, sl, t.TempDir(), "U0ALICE,T0CONCH:U0BOB"), "up")
	p.waitStderr(t, "slack socket mode connected")

	sl.Post(mallory, sl.DM(mallory), "answer me")
	llm.Push(fakellm.Text("Here is **bold** news."))
	dm := sl.DM(alice)
	asked := sl.Post(alice, dm, "what's new?")
	msgs := sl.WaitMessages(t, dm, "", 1, 30*time.Second)
	if m := msgs[0]; m.Text != "Here is *bold* news." || m.ThreadTS != "" {
		t.Fatalf("reply %+v; stderr:\n%s", m, p.stderr)
	}
	var added, removed bool
	for _, s := range sl.Sent(dm) {
		added = added || (s.Method == "reactions.add" && s.TS == asked)
		removed = removed || (s.Method == "reactions.remove" && s.TS == asked)
	}
	if !added {
		t.Fatalf("no working reaction while the turn ran: %+v", sl.Sent(dm))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sl.Wait(ctx, func() bool {
		for _, s := range sl.Sent(dm) {
			removed = removed || (s.Method == "reactions.remove" && s.TS == asked)
		}
		return removed
	}); err != nil {
		t.Fatalf("working reaction never removed: %+v", sl.Sent(dm))
	}

	llm.Push(fakellm.Text("In the thread."), fakellm.Text("Still here."))
	root := sl.Post(bob, gen, "<@"+sl.Bot.ID+"> can you help?")
	thread := sl.WaitMessages(t, gen, root, 1, 30*time.Second)
	if thread[0].Text != "In the thread." {
		t.Fatalf("thread reply %+v", thread)
	}
	sl.Post(alice, gen, "one more thing", slackfake.InThread(root))
	replies := func() []string {
		var out []string
		for _, m := range sl.Messages(gen, root) {
			if !strings.HasPrefix(m.Text, "queued") { // the gateway's notice if the first turn is still closing
				out = append(out, m.Text)
			}
		}
		return out
	}
	if err := sl.Wait(ctx, func() bool { return len(replies()) >= 2 }); err != nil || replies()[1] != "Still here." {
		t.Fatalf("thread replies %q; stderr:\n%s", replies(), p.stderr)
	}
	if n := len(sl.Messages(sl.DM(mallory), "")); n != 0 || llm.Count() != 3 {
		t.Fatalf("mallory got %d answers and the model was asked %d times; want 0 and 3", n, llm.Count())
	}
}

// TestUpSlackKill9: conch is killed after it took a message and before it
// answered, and the ack of the message's envelope is lost on the way (so
// Slack delivers it again after the restart). The message is answered
// exactly once: it was stored before the ack, the turn resumes, and the
// redelivered copy is recognised by its id.
func TestUpSlackKill9(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	sl := slackfake.Start(t)
	sl.SetAckTimeout(time.Hour) // redelivered only on the next connection
	alice := sl.Person("U0ALICE", "alice")
	dm := sl.DM(alice)
	env := slackEnv(t, llm, sl, t.TempDir(), "U0ALICE")

	llm.Push(fakellm.Hang())
	p := startConch(t, env, "up")
	p.waitStderr(t, "slack socket mode connected")
	sl.IgnoreAcks(true)
	sl.Post(alice, dm, "hello, remember me")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := llm.Wait(ctx, 1); err != nil {
		t.Fatalf("the model was never asked; stderr:\n%s", p.stderr)
	}
	p.kill9(t)
	if sl.Unacked() != 1 {
		t.Fatalf("%d unacked envelopes, want the message's 1", sl.Unacked())
	}
	sl.IgnoreAcks(false)
	if n := len(sl.Messages(dm, "")); n != 0 {
		t.Fatalf("%d answer(s) before the kill, want none", n)
	}

	llm.Push(fakellm.Text("Welcome back."))
	p = startConch(t, env, "up")
	msgs := sl.WaitMessages(t, dm, "", 1, 30*time.Second)
	if msgs[0].Text != "Welcome back." {
		t.Fatalf("answer %+v; stderr:\n%s", msgs[0], p.stderr)
	}
	if err := sl.Wait(ctx, func() bool { return sl.Unacked() == 0 }); err != nil {
		t.Fatalf("the redelivered envelope was never acknowledged; stderr:\n%s", p.stderr)
	}
	if sl.Redelivered() < 1 {
		t.Fatal("the envelope was not delivered again")
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(sl.Messages(dm, "")); n != 1 {
		t.Fatalf("%d answers after the restart, want exactly 1: %+v", n, sl.Messages(dm, ""))
	}
	if llm.Count() != 2 {
		t.Fatalf("the model was asked %d times, want 2 (the interrupted call and the resumed turn)", llm.Count())
	}
	last, _ := llm.Last()
	seen := 0
	for _, m := range last.Messages {
		if strings.Contains(m.Text, "hello, remember me") {
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("the resumed turn's history holds the message %d times, want once: %+v", seen, last.Messages)
	}
}

// TestUpSlackManySendersOneThread: several people write in one thread at
// once. Each message is answered exactly once by its own turn (the
// answer names the message it read last), in the order Slack delivered
// them.
func TestUpSlackManySendersOneThread(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	sl := slackfake.Start(t)
	gen := sl.Channel("C0GENERAL", "general")
	const n = 6
	var people []slackfake.User
	var allow []string
	for i := range n {
		u := sl.Person(fmt.Sprintf("U0P%d", i), fmt.Sprintf("person%d", i))
		people = append(people, u)
		allow = append(allow, u.ID)
	}
	tag := regexp.MustCompile(`msg-\d+`)
	llm.Handle(func(r fakellm.Request) fakellm.Reply {
		for i := len(r.Messages) - 1; i >= 0; i-- {
			if m := r.Messages[i]; m.Role == "user" {
				if got := tag.FindString(m.Text); got != "" {
					return fakellm.Text("re " + got)
				}
			}
		}
		return fakellm.Text("re nothing")
	})
	p := startConch(t, slackEnv(t, llm, sl, t.TempDir(), strings.Join(allow, ",")), "up")
	p.waitStderr(t, "slack socket mode connected")

	root := sl.Post(people[0], gen, "<@"+sl.Bot.ID+"> msg-0")
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sl.Post(people[i], gen, fmt.Sprintf("msg-%d", i), slackfake.InThread(root))
		}()
	}
	wg.Wait()
	answers := func() []slackfake.Message {
		var out []slackfake.Message
		for _, m := range sl.Messages(gen, root) {
			if strings.HasPrefix(m.Text, "re ") {
				out = append(out, m)
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := sl.Wait(ctx, func() bool { return len(answers()) >= n }); err != nil {
		t.Fatalf("%d answers, want %d: %+v; stderr:\n%s", len(answers()), n, sl.Messages(gen, root), p.stderr)
	}
	time.Sleep(time.Second)
	msgs := answers()
	var order []string
	got := map[string]int{}
	for _, m := range msgs {
		got[m.Text]++
	}
	for i := range n {
		if want := fmt.Sprintf("re msg-%d", i); got[want] != 1 {
			t.Fatalf("%q answered %d times, want once; answers %+v; stderr:\n%s", want, got[want], msgs, p.stderr)
		}
	}
	if len(msgs) != n {
		t.Fatalf("%d answers, want %d: %+v", len(msgs), n, msgs)
	}
	// In arrival order: the order the messages were stored in the thread.
	var posted []string
	for _, m := range sl.ThreadOf(gen, root) {
		if m.BotID == "" {
			posted = append(posted, "re "+tag.FindString(m.Text))
		}
	}
	for _, m := range msgs {
		order = append(order, m.Text)
	}
	if strings.Join(order, ",") != strings.Join(posted, ",") {
		t.Fatalf("answers in order %v, messages arrived in order %v", order, posted)
	}
}

// TestDoctorSlack: doctor names the bot for good tokens and the key to fix
// for a refused one.
func TestDoctorSlack(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	sl := slackfake.Start(t)
	run := func(extra ...string) (string, error) {
		env := slackEnv(t, llm, sl, t.TempDir(), "U0ALICE")
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(append(env, "CONCH_TEST_ARGS=doctor"), extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, _ := run()
	if !strings.Contains(out, "✓ slack app: @conch in Conch Test") {
		t.Fatalf("doctor with valid tokens:\n%s", out)
	}
	out, err := run("CONCH_SLACK_APP_TOKEN=xapp-1-revoked")
	if err == nil || !strings.Contains(out, "✗ slack app") || !strings.Contains(out, "slack.app_token") {
		t.Fatalf("doctor with a refused app token (err %v):\n%s", err, out)
	}
}

// TestUpSlackEventsAPI: with slack.mode = events, Slack's signed requests
// reach conch up's HTTP host at /slack/events: the URL is verified, a DM is
// answered, a forged request is refused.
func TestUpSlackEventsAPI(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	sl := slackfake.Start(t)
	alice := sl.Person("U0ALICE", "alice")
	const secret = "e2e-signing-secret-0123456789"
	env := append(slackEnv(t, llm, sl, t.TempDir(), "U0ALICE"), "CONCH_SLACK_MODE=events", "CONCH_SLACK_SIGNING_SECRET="+secret,
		"CONCH_SLACK_APP_TOKEN=")
	var addr string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CONCH_GATEWAY_LISTEN="); ok {
			addr = v
		}
	}
	p := startConch(t, env, "up")
	p.waitStderr(t, "slack events api")
	url := "http://" + addr + "/slack/events"
	deadline := time.Now().Add(30 * time.Second)
	for err := sl.VerifyURL(url, secret); err != nil; err = sl.VerifyURL(url, secret) {
		if time.Now().After(deadline) {
			t.Fatalf("url verification: %v; stderr:\n%s", err, p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sl.DeliverEvents(url, secret)
	llm.Push(fakellm.Text("Over HTTPS."))
	dm := sl.DM(alice)
	sl.Post(alice, dm, "hello via events")
	if msgs := sl.WaitMessages(t, dm, "", 1, 30*time.Second); msgs[0].Text != "Over HTTPS." {
		t.Fatalf("reply %+v", msgs[0])
	}
	resp, err := http.DefaultClient.Do(slackfake.SignedRequest(url, "wrong-secret", time.Now(), []byte(`{"type":"event_callback"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged request: HTTP %d", resp.StatusCode)
	}
}
