package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"conch/internal/testenv/fakellm"
)

// TestInitOnATerminal: conch init on a real terminal (a pty) asks its
// questions, takes the key without echoing it (the terminal never shows
// it), lists the models the key can use and takes a choice by number.
func TestInitOnATerminal(t *testing.T) {
	const key = "sk-typed-on-a-terminal-42"
	srv := fakellm.New(t)
	srv.RequireKey(key)
	dir := t.TempDir()
	cmd, tty, screen := initOnPty(t, dir, srv.BaseURL(fakellm.OpenAI))
	seen := 0 // answer each prompt once, after it appeared
	answer := func(prompt, text string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := screen()
			if i := strings.Index(s[seen:], prompt); i >= 0 {
				seen += i + len(prompt)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("never asked %q; the terminal shows:\n%s", prompt, s)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := tty.Write([]byte(text + "\r")); err != nil {
			t.Fatal(err)
		}
	}
	answer("Model provider (openai, anthropic, gemini) [openai]: ", "")
	answer("API key for openai (input hidden): ", key)
	answer("Model (number or name) [test-model]: ", "2")
	answer("Open Telegram (a bot token from @BotFather)? (y/N): ", "")
	answer("Open Matrix (a bot account's access token)? (y/N): ", "")
	answer("Open email (an IMAP and SMTP mailbox of its own)? (y/N): ", "")
	answer("Install conch as a systemd service (starts now and at boot)? (y/N): ", "n")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("conch init: %v\n%s", err, screen())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("conch init did not end")
	}
	time.Sleep(100 * time.Millisecond) // the reader takes the last output
	s := screen()
	if strings.Contains(s, key) || strings.Contains(s, key[:10]) {
		t.Fatalf("the key was echoed on the terminal:\n%s", s)
	}
	if !strings.Contains(s, " 2. test-model-mini") || !strings.Contains(s, "/login?token=") {
		t.Fatalf("the terminal shows:\n%s", s)
	}
	toml, _ := os.ReadFile(filepath.Join(dir, "config", "conch", "conch.toml"))
	if !strings.Contains(string(toml), `name = "test-model-mini"`) {
		t.Fatalf("conch.toml:\n%s", toml)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "config", "conch", modelKeyFile)); strings.TrimSpace(string(b)) != key {
		t.Fatal("the typed key was not saved")
	}
}

// TestInitInterruptedOnATerminal: ctrl-C while conch init waits for the
// hidden key ends it (exit 130) at once, and the terminal echoes again.
func TestInitInterruptedOnATerminal(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	cmd, tty, screen := initOnPty(t, dir, srv.BaseURL(fakellm.OpenAI))
	waitFor := func(prompt string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := screen()
			if strings.Contains(s, prompt) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never asked %q; the terminal shows:\n%s", prompt, s)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("[openai]: ")
	tty.Write([]byte("\r"))
	waitFor("(input hidden): ")
	if echoing(t, tty) {
		t.Fatal("the terminal echoes while the key is asked for")
	}
	tty.Write([]byte("sk-half-typed\x03")) // ctrl-C
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("conch init after ctrl-C: %v, want exit status 130", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("ctrl-C did not end conch init")
	}
	if !echoing(t, tty) {
		t.Fatal("conch init left the terminal without echo")
	}
	if _, err := os.Stat(filepath.Join(dir, "config", "conch", modelKeyFile)); err == nil {
		t.Fatal("an interrupted init saved a key")
	}
}

// echoing reports whether the pty's terminal echoes what is typed.
func echoing(t *testing.T, tty *os.File) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatalf("read the terminal's settings: %v", err)
	}
	return tio.Lflag&unix.ECHO != 0
}

// initOnPty starts conch init on a pty; screen returns what the terminal
// showed so far.
func initOnPty(t *testing.T, dir, baseURL string) (cmd *exec.Cmd, tty *os.File, screen func() string) {
	t.Helper()
	cmd = exec.Command(os.Args[0])
	cmd.Env = append(initEnv(dir), "CONCH_TEST_ARGS=init --engine none --base-url "+baseURL, "TERM=dumb")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatalf("pty: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	var mu sync.Mutex
	var shown bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			mu.Lock()
			shown.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return cmd, tty, func() string {
		mu.Lock()
		defer mu.Unlock()
		return shown.String()
	}
}
