package main

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
)

// TestChatTerminalSurvivesKill: the model opens a terminal in the sandbox,
// runs a command and sees "done, exit N"; after kill -9 and a restart the same
// terminal (its shell state included) is still there.
func TestChatTerminalSurvivesKill(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "tt" + hex.EncodeToString(buf)
	env := append(testEnv(srv, fakellm.OpenAI, dir), engineEnv(t, e, instance)...)
	instanceContainers(t, e.Client(t), instance)

	srv.Push(
		fakellm.ToolCall("terminal_open", `{}`),
		fakellm.ToolCall("terminal_type", `{"tty":0,"expect":"bash","text":"export MARK=kept; cd /tmp; false"}`),
		fakellm.ToolCall("terminal_wait", `{"timeout_seconds":20}`),
		fakellm.Text("Terminal ready."),
	)
	p := startConch(t, env, "chat")
	if got := p.say(t, "open a terminal"); got != "Terminal ready." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	if res := lastToolResult(t, srv); !strings.Contains(res, "exit 1") {
		t.Fatalf("terminal_wait said %q, want the command's exit status 1", res)
	}
	waitNoUnfinished(t, filepath.Join(dir, "data", "conch.db"))
	p.kill9(t)

	srv.Push(
		fakellm.ToolCall("terminal_wait", `{"timeout_seconds":2}`),
		fakellm.ToolCall("terminal_type", `{"tty":0,"expect":"bash","text":"echo $MARK in $PWD"}`),
		fakellm.ToolCall("terminal_wait", `{"timeout_seconds":20}`),
		fakellm.Text("Still there."),
	)
	p = startConch(t, env, "chat")
	if got := p.say(t, "is the terminal still there?"); got != "Still there." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	if res := lastToolResult(t, srv); !strings.Contains(res, "kept in /tmp") || !strings.Contains(res, "exit 0") {
		t.Fatalf("after restart terminal_wait said %q, want the shell's state (kept in /tmp) and exit 0", res)
	}
}
