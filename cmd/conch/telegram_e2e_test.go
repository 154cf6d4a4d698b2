package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	tgfake "conch/internal/testenv/telegram"
)

func telegramEnv(t *testing.T, llm *fakellm.Server, tg *tgfake.Server, dir string, allow string) []string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return append(testEnv(llm, fakellm.OpenAI, dir),
		"CONCH_GATEWAY_LISTEN="+addr,
		"CONCH_TELEGRAM_BOT_TOKEN="+tg.Token,
		"CONCH_TELEGRAM_API_URL="+tg.URL,
		"CONCH_TELEGRAM_ALLOW_FROM="+allow,
	)
}

// TestUpTelegramEndToEnd runs the real `conch up` binary against the fake
// Bot API: a message is answered in Telegram HTML, the command menu is
// registered, and a person not on the allowlist gets nothing.
func TestUpTelegramEndToEnd(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	alice := tgfake.Person(4242, "alice", "Alice")
	mallory := tgfake.Person(6666, "mallory", "Mallory")
	p := startConch(t, telegramEnv(t, llm, tg, t.TempDir(), "4242"), "up")
	p.waitStderr(t, "telegram polling")

	tg.SendText(mallory, tgfake.PrivateChat(mallory), "answer me")
	llm.Push(fakellm.Text("Here is **bold** news."))
	tg.SendText(alice, tgfake.PrivateChat(alice), "what's new?")
	msgs := tg.WaitMessages(t, alice.ID, 1, 30*time.Second)
	if m := msgs[0]; m.Text != "Here is bold news." || m.ParseMode != "HTML" || len(m.Entities) != 1 || m.Entities[0].Type != "bold" || m.Silent {
		t.Fatalf("reply %+v; stderr:\n%s", m, p.stderr)
	}
	if len(tg.Commands()) != 5 {
		t.Fatalf("commands %v", tg.Commands())
	}
	var typing bool
	for _, s := range tg.Sent(alice.ID) {
		typing = typing || s.Action == "typing"
	}
	if !typing {
		t.Fatal("no typing action while the turn ran")
	}
	if n := len(tg.Sent(mallory.ID)); n != 0 || llm.Count() != 1 {
		t.Fatalf("mallory got %d answers and the model was asked %d times; want 0 and 1", n, llm.Count())
	}
}

// TestUpTelegramKill9: conch is killed after it took a message from
// getUpdates and before it answered. After the restart the message is
// answered exactly once: it was stored before the offset moved, the turn
// resumes, and Telegram does not hand the update over again.
func TestUpTelegramKill9(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	alice := tgfake.Person(4242, "alice", "Alice")
	env := telegramEnv(t, llm, tg, t.TempDir(), "4242,@alice")

	llm.Push(fakellm.Hang())
	p := startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")
	tg.SendText(alice, tgfake.PrivateChat(alice), "hello, remember me")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := llm.Wait(ctx, 1); err != nil {
		t.Fatalf("the model was never asked; stderr:\n%s", p.stderr)
	}
	// The next poll carries the stored offset: the update is confirmed.
	if err := tg.Wait(ctx, func() bool {
		offs := tg.Offsets()
		return tg.Pending() == 0 && len(offs) > 0 && offs[len(offs)-1] > 0
	}); err != nil {
		t.Fatalf("the offset never moved past the message; stderr:\n%s", p.stderr)
	}
	stored := tg.Offsets()[len(tg.Offsets())-1]
	p.kill9(t)
	if n := len(tg.Messages(alice.ID)); n != 0 {
		t.Fatalf("%d answer(s) before the kill, want none", n)
	}

	llm.Push(fakellm.Text("Welcome back."))
	restartAt := len(tg.Offsets())
	p = startConch(t, env, "up")
	msgs := tg.WaitMessages(t, alice.ID, 1, 30*time.Second)
	if msgs[0].Text != "Welcome back." {
		t.Fatalf("answer %+v; stderr:\n%s", msgs[0], p.stderr)
	}
	// The resumed turn may answer before the first poll: wait for it.
	if err := tg.Wait(ctx, func() bool { return len(tg.Offsets()) > restartAt }); err != nil {
		t.Fatalf("no poll after the restart; stderr:\n%s", p.stderr)
	}
	if first := tg.Offsets()[restartAt]; first != stored {
		t.Fatalf("first poll after the restart asked for offset %d, want the stored %d", first, stored)
	}
	// Nothing more comes: no second answer, no second model call.
	time.Sleep(1500 * time.Millisecond)
	if n := len(tg.Messages(alice.ID)); n != 1 {
		t.Fatalf("%d answers after the restart, want exactly 1: %+v", n, tg.Messages(alice.ID))
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

// TestDoctorTelegram: doctor names the bot for a good token and the key
// to fix for a refused one.
func TestDoctorTelegram(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	run := func(token string) (string, error) {
		env := telegramEnv(t, llm, tg, t.TempDir(), "42")
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(env, "CONCH_TEST_ARGS=doctor", "CONCH_TELEGRAM_BOT_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, _ := run(tg.Token)
	if !strings.Contains(out, "✓ telegram bot: @conch_test_bot at "+tg.URL) {
		t.Fatalf("doctor with a valid token:\n%s", out)
	}
	out, err := run(strconv.FormatInt(tg.Bot.ID, 10) + ":revoked-token-0123456789")
	if err == nil || !strings.Contains(out, "✗ telegram bot") || !strings.Contains(out, "telegram.bot_token") {
		t.Fatalf("doctor with a refused token (err %v):\n%s", err, out)
	}
}
