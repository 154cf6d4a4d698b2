package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"conch/internal/testenv"
	dcfake "conch/internal/testenv/discord"
	"conch/internal/testenv/fakellm"
)

func discordEnv(t *testing.T, llm *fakellm.Server, dc *dcfake.Server, dir string, allow string) []string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return append(testEnv(llm, fakellm.OpenAI, dir),
		"CONCH_GATEWAY_LISTEN="+addr,
		"CONCH_DISCORD_BOT_TOKEN="+dc.Token,
		"CONCH_DISCORD_API_URL="+dc.APIURL(),
		"CONCH_DISCORD_ALLOW_FROM="+allow,
	)
}

const e2eGuild = "3000000000000000001"

// TestUpDiscordEndToEnd runs the real `conch up` binary against the fake
// Discord: a DM is answered while typing shows; a mention in a server
// channel is answered as a reply to it (the allowlist names the server);
// a person not on the allowlist gets nothing.
func TestUpDiscordEndToEnd(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	dc := dcfake.Start(t)
	alice := dc.Person("2000000000000000001", "alice")
	bob := dc.Person("2000000000000000002", "bob")
	mallory := dc.Person("2000000000000000666", "mallory")
	general := dc.TextChannel(e2eGuild, "general")
	p := startConch(t, discordEnv(t, llm, dc, t.TempDir(), alice.ID+","+e2eGuild+":"+bob.ID), "up")
	p.waitStderr(t, "discord gateway session")

	dc.Post(mallory, dc.DM(mallory), "answer me")
	llm.Push(fakellm.Text("Here is **bold** news."))
	dm := dc.DM(alice)
	dc.Post(alice, dm, "what's new?")
	msgs := dc.WaitMessages(t, dm, 1, 30*time.Second)
	if msgs[0].Content != "Here is **bold** news." {
		t.Fatalf("reply %+v; stderr:\n%s", msgs[0], p.stderr)
	}
	typing := false
	for _, s := range dc.Sent(dm) {
		typing = typing || s.Method == "typing"
	}
	if !typing {
		t.Fatal("no typing while the turn ran")
	}
	llm.Push(fakellm.Text("Sure."))
	asked := dc.Post(bob, general, "can you help?", dcfake.Mention())
	got := dc.WaitMessages(t, general, 1, 30*time.Second)
	if got[0].Content != "Sure." || got[0].Reference == nil || got[0].Reference.MessageID != asked {
		t.Fatalf("server reply %+v", got[0])
	}
	if n := len(dc.Messages(dc.DM(mallory))); n != 0 || llm.Count() != 2 {
		t.Fatalf("mallory got %d answers and the model was asked %d times; want 0 and 2", n, llm.Count())
	}
}

// TestUpDiscordKill9: conch is killed after it took a message and before
// it answered; another message arrives while it is down. After the
// restart both are answered exactly once: the first was stored before its
// position moved and its turn resumes, the second is read over REST from
// the stored position.
func TestUpDiscordKill9(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	dc := dcfake.Start(t)
	alice := dc.Person("2000000000000000001", "alice")
	dm := dc.DM(alice)
	env := discordEnv(t, llm, dc, t.TempDir(), alice.ID)

	llm.Push(fakellm.Hang())
	p := startConch(t, env, "up")
	p.waitStderr(t, "discord gateway session")
	dc.Post(alice, dm, "hello, remember me")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := llm.Wait(ctx, 1); err != nil {
		t.Fatalf("the model was never asked; stderr:\n%s", p.stderr)
	}
	p.kill9(t)
	dc.Post(alice, dm, "and this, while you were away")
	if n := len(dc.Messages(dm)); n != 0 {
		t.Fatalf("%d answer(s) before the kill, want none", n)
	}

	llm.Handle(func(r fakellm.Request) fakellm.Reply {
		last := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				last = m.Text
			}
		}
		if strings.Contains(last, "away") {
			return fakellm.Text("Caught up.")
		}
		return fakellm.Text("Welcome back.")
	})
	p = startConch(t, env, "up")
	answers := func() []string {
		var texts []string
		for _, m := range dc.Messages(dm) {
			if !strings.HasPrefix(m.Content, "queued") { // the gateway's notice when the second waits
				texts = append(texts, m.Content)
			}
		}
		return texts
	}
	if err := dc.Wait(ctx, func() bool { return len(answers()) >= 2 }); err != nil {
		t.Fatalf("answers %q; stderr:\n%s", answers(), p.stderr)
	}
	time.Sleep(1500 * time.Millisecond)
	texts := answers()
	if strings.Join(texts, "|") != "Welcome back.|Caught up." {
		t.Fatalf("answers %q, want each message answered once, in order; stderr:\n%s", texts, p.stderr)
	}
	if llm.Count() != 3 {
		t.Fatalf("the model was asked %d times, want 3 (the interrupted call, the resumed turn, the backfilled one)", llm.Count())
	}
}

// TestUpDiscordManySendersOneThread: several people write in a thread the
// bot was mentioned in, at once. Each message is answered exactly once by
// its own turn, in the order Discord delivered them.
func TestUpDiscordManySendersOneThread(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	dc := dcfake.Start(t)
	dc.SetBucket(50, time.Second)
	general := dc.TextChannel(e2eGuild, "general")
	thread := dc.Thread(general, "plans")
	const n = 6
	var people []dcfake.User
	var allow []string
	for i := range n {
		u := dc.Person(fmt.Sprintf("20000000000000001%02d", i), fmt.Sprintf("person%d", i))
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
	p := startConch(t, discordEnv(t, llm, dc, t.TempDir(), strings.Join(allow, ",")), "up")
	p.waitStderr(t, "discord gateway session")

	dc.Post(people[0], thread, "msg-0", dcfake.Mention())
	dc.WaitMessages(t, thread, 1, 30*time.Second)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dc.Post(people[i], thread, fmt.Sprintf("msg-%d", i))
		}()
	}
	wg.Wait()
	answers := func() []string {
		var out []string
		for _, m := range dc.Messages(thread) {
			if strings.HasPrefix(m.Content, "re ") {
				out = append(out, m.Content)
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := dc.Wait(ctx, func() bool { return len(answers()) >= n }); err != nil {
		t.Fatalf("%d answers, want %d: %q; stderr:\n%s", len(answers()), n, answers(), p.stderr)
	}
	time.Sleep(time.Second)
	var posted []string
	for _, m := range dc.All(thread) {
		if !m.Author.Bot {
			posted = append(posted, "re "+tag.FindString(m.Content))
		}
	}
	if got := answers(); strings.Join(got, ",") != strings.Join(posted, ",") {
		t.Fatalf("answers %q, messages arrived in order %q", got, posted)
	}
}

// TestDoctorDiscord: doctor names the bot for a good token and the key to
// fix for a refused one.
func TestDoctorDiscord(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	dc := dcfake.Start(t)
	run := func(extra ...string) (string, error) {
		env := discordEnv(t, llm, dc, t.TempDir(), "2000000000000000001")
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(append(env, "CONCH_TEST_ARGS=doctor"), extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, _ := run()
	if !strings.Contains(out, "✓ discord bot: conch ("+dc.Bot.ID+")") {
		t.Fatalf("doctor with a valid token:\n%s", out)
	}
	out, err := run("CONCH_DISCORD_BOT_TOKEN=MTA.revoked.token")
	if err == nil || !strings.Contains(out, "✗ discord bot") || !strings.Contains(out, "discord.bot_token") {
		t.Fatalf("doctor with a refused token (err %v):\n%s", err, out)
	}
}
