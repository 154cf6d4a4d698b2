package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	tgfake "conch/internal/testenv/telegram"
)

// TestUpIdleReleasesStoreCaches: when conch up goes quiet after work, the
// store's kept model views and the writer's page cache are given back with
// the heap (internal/idletrim, sqlite.ReleaseMemory), and the next turn's
// model request still holds the whole conversation, read again from the
// store (the real binary, the Telegram fake, the SQLite store).
func TestUpIdleReleasesStoreCaches(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	llm.Handle(func(r fakellm.Request) fakellm.Reply { return fakellm.Text("re: " + r.LastUserText()) })
	tg := tgfake.Start(t)
	alice := tgfake.Person(4343, "alice", "Alice")
	chat := tgfake.PrivateChat(alice)
	env := append(telegramEnv(t, llm, tg, t.TempDir(), "4343"), "CONCH_LOG_LEVEL=debug")
	p := startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")

	const before = 3
	for i := range before {
		tg.SendText(alice, chat, fmt.Sprintf("note %d", i))
		tg.WaitMessages(t, alice.ID, i+1, 30*time.Second)
	}
	// idletrim looks every 10 s: a busy period, then the first quiet one.
	deadline := time.Now().Add(45 * time.Second)
	for !strings.Contains(p.stderr.String(), "caches_released=true") {
		if time.Now().After(deadline) {
			t.Fatalf("no idle release within 45 s of the last answer; stderr:\n%s", p.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(p.stderr.String(), "caches not released") || strings.Contains(p.stderr.String(), "pages not released") {
		t.Fatalf("the release failed; stderr:\n%s", p.stderr)
	}
	// The program's pages the work touched were unmapped: most of the
	// file-backed resident memory is gone (it was three quarters of all).
	if !strings.Contains(p.stderr.String(), "program pages released") {
		t.Fatalf("the program's pages were not released; stderr:\n%s", p.stderr)
	}
	st := readStatus(t, p.cmd.Process.Pid)
	t.Logf("after the idle release: VmRSS %.1f MiB, RssFile %.1f MiB", st.mib("VmRSS"), st.mib("RssFile"))
	if st.mib("RssFile") > 20 {
		t.Errorf("RssFile %.1f MiB after the idle release, want under 20 (about 40 before)", st.mib("RssFile"))
	}

	tg.SendText(alice, chat, "what did I note?")
	tg.WaitMessages(t, alice.ID, before+1, 30*time.Second)
	req, _ := llm.Last()
	var users, answers []string
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			users = append(users, m.Text)
		case "assistant":
			answers = append(answers, m.Text)
		}
	}
	wantUsers := []string{"note 0", "note 1", "note 2", "what did I note?"}
	if len(users) != len(wantUsers) || len(answers) != before {
		t.Fatalf("after the release the model got users %q and answers %q, want %q and %d answers", users, answers, wantUsers, before)
	}
	for i, w := range wantUsers {
		if !strings.Contains(users[i], w) {
			t.Fatalf("user message %d is %q, want %q (all: %q)", i, users[i], w, users)
		}
		if i < before && !strings.Contains(answers[i], "re: ") {
			t.Fatalf("answer %d is %q", i, answers[i])
		}
	}
}
