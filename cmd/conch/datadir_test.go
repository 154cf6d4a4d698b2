package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"
)

// exitOf waits for the process and returns its stderr and exit error.
func (p *conchProc) exitOf(t *testing.T) (string, error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return p.stderr.String(), err
	case <-time.After(60 * time.Second):
		t.Fatalf("conch did not exit; stderr:\n%s", p.stderr)
	}
	return "", nil
}

// TestOneGatewayPerDataDir: a second chat (or up) on a data dir in use
// exits at once, naming the holder's pid, and answers nothing.
func TestOneGatewayPerDataDir(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := testEnv(srv, fakellm.OpenAI, dir)
	srv.Push(fakellm.Text("first is here"))
	first := startConch(t, env, "chat")
	if got := first.say(t, "hello"); got != "first is here" {
		t.Fatalf("first chat answered %q", got)
	}
	for _, cmd := range []string{"chat", "up"} {
		second := startConch(t, env, cmd)
		second.stdin.Close()
		stderr, err := second.exitOf(t)
		if err == nil || !strings.Contains(stderr, "in use by another conch process (pid "+strconv.Itoa(first.cmd.Process.Pid)+")") {
			t.Fatalf("second %s: exit %v, stderr:\n%s", cmd, err, stderr)
		}
	}
	first.finish(t)
	if n := srv.Count(); n != 1 {
		t.Fatalf("the model was asked %d times, want 1", n)
	}
}

// TestEmptiedStoreIsRefused: a store truncated to 0 bytes (or deleted) in a
// data dir that was used is not silently replaced by an empty one.
func TestEmptiedStoreIsRefused(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := testEnv(srv, fakellm.OpenAI, dir)
	srv.Push(fakellm.Text("noted"))
	p := startConch(t, env, "chat")
	p.say(t, "remember this")
	p.finish(t)

	data := filepath.Join(dir, "data")
	for path, want := range map[string]os.FileMode{data: 0o700, filepath.Join(data, "conch.db"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s has mode %v (%v), want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	for _, f := range []string{"conch.db-wal", "conch.db-shm"} {
		if fi, err := os.Stat(filepath.Join(data, f)); err == nil && fi.Mode().Perm()&0o077 != 0 {
			t.Fatalf("%s has mode %v: readable by others", f, fi.Mode().Perm())
		}
	}

	if err := os.Truncate(filepath.Join(data, "conch.db"), 0); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(data, "conch.db-wal"))
	os.Remove(filepath.Join(data, "conch.db-shm"))
	p = startConch(t, env, "chat")
	p.stdin.Close()
	stderr, err := p.exitOf(t)
	if err == nil || !strings.Contains(stderr, "is empty (0 bytes)") || !strings.Contains(stderr, "--new-store") {
		t.Fatalf("chat on an emptied store: exit %v, stderr:\n%s", err, stderr)
	}
	srv.Push(fakellm.Text("fresh start"))
	p = startConch(t, env, "chat --new-store")
	if got := p.say(t, "hello again"); got != "fresh start" {
		t.Fatalf("with --new-store got %q", got)
	}
	p.finish(t)
}

// TestChatFailsWhenTheModelIsDown: a script that pipes messages in learns
// from the exit status that answers are missing.
func TestChatFailsWhenTheModelIsDown(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := append(testEnv(srv, fakellm.OpenAI, dir),
		"CONCH_MODEL_BASE_URL=http://127.0.0.1:1/v1", "CONCH_AGENT_MAX_RETRIES=1")
	p := startConch(t, env, "chat")
	reply := p.say(t, "anyone there?")
	if !strings.Contains(reply, "unavailable") {
		t.Fatalf("reply %q, want a clear 'unavailable'", reply)
	}
	p.stdin.Close()
	stderr, err := p.exitOf(t)
	if err == nil || !strings.Contains(stderr, "1 message(s) could not be answered") {
		t.Fatalf("exit %v, stderr:\n%s", err, stderr)
	}
}
