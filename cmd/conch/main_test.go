package main

import (
	"bufio"
	"bytes"
	"conch/internal/testenv"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"
	"conch/sqlite"
)

// TestMain lets tests run this test binary as the conch command itself, so
// end-to-end tests exercise main() in a real process that can be killed.
func TestMain(m *testing.M) {
	if os.Getenv("CONCH_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"conch"}, strings.Fields(os.Getenv("CONCH_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// conchProc is conch running as a child process.
type conchProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *testenv.SyncBuffer
}

// waitStderr waits until the process has written want to stderr.
func (p *conchProc) waitStderr(t testing.TB, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never showed %q:\n%s", want, p.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// env is the environment of a conch process talking to srv with its data in dir.
func testEnv(srv *fakellm.Server, provider fakellm.Provider, dir string) []string {
	return append(os.Environ(),
		"CONCH_TEST_AS_MAIN=1",
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"CONCH_DATA_DIR="+filepath.Join(dir, "data"),
		"CONCH_MODEL_PROVIDER="+string(provider),
		"CONCH_MODEL_BASE_URL="+srv.BaseURL(provider),
		"CONCH_MODEL_API_KEY=test-key",
		"CONCH_MODEL=test-model",
		"CONCH_SANDBOX_ENGINE=none",
		"CONCH_AGENT_RETRY_BASE=10ms",
	)
}

func startConch(t testing.TB, env []string, args string) *conchProc {
	t.Helper()
	for _, kv := range env {
		if dir, ok := strings.CutPrefix(kv, "CONCH_DATA_DIR="); ok {
			dumpLogsOnFailure(t, dir)
		}
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(env, "CONCH_TEST_ARGS="+args)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &conchProc{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(out), stderr: &testenv.SyncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

// dumpLogsOnFailure shows conch's log files when the test fails.
func dumpLogsOnFailure(t testing.TB, dataDir string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(dataDir, "logs", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("%s (tail):\n%s", filepath.Base(l), b)
		}
	})
}

// say writes one line and returns the next reply line.
func (p *conchProc) say(t *testing.T, line string) string {
	t.Helper()
	return p.sayWithin(t, line, 30*time.Second)
}

// sayWithin is say with a longer wait, for a turn that does real work.
func (p *conchProc) sayWithin(t *testing.T, line string, wait time.Duration) string {
	t.Helper()
	if _, err := fmt.Fprintln(p.stdin, line); err != nil {
		t.Fatal(err)
	}
	return p.readLineWithin(t, wait)
}

func (p *conchProc) readLine(t *testing.T) string {
	t.Helper()
	return p.readLineWithin(t, 30*time.Second)
}

func (p *conchProc) readLineWithin(t *testing.T, wait time.Duration) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	c := make(chan res, 1)
	go func() {
		s, err := p.stdout.ReadString('\n')
		c <- res{s, err}
	}()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatalf("read reply: %v; stderr:\n%s", r.err, p.stderr)
		}
		return strings.TrimSuffix(r.s, "\n")
	case <-time.After(wait):
		t.Fatalf("no reply within %s; stderr:\n%s", wait, p.stderr)
	}
	return ""
}

func (p *conchProc) finish(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("conch exited with %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("conch did not exit at EOF; stderr:\n%s", p.stderr)
	}
}

func (p *conchProc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
}

// TestChatRemembersAcrossRestartsAndKill drives `conch chat` through the
// real SDK of each provider: a remembered fact appears in the next turn's
// system prompt, and survives a restart and a kill -9 between turns.
func TestChatRemembersAcrossRestartsAndKill(t *testing.T) {
	for _, provider := range []fakellm.Provider{fakellm.OpenAI, fakellm.Anthropic, fakellm.Gemini} {
		t.Run(string(provider), func(t *testing.T) {
			srv := fakellm.New(t)
			dir := t.TempDir()
			env := testEnv(srv, provider, dir)

			srv.Push(fakellm.ToolCall("remember", `{"key":"name","value":"Alice"}`), fakellm.Text("Nice to meet you, Alice."))
			p := startConch(t, env, "chat")
			if got := p.say(t, "Hi, I am Alice."); got != "Nice to meet you, Alice." {
				t.Fatalf("reply %q", got)
			}
			srv.Push(fakellm.Text("You are Alice."))
			if got := p.say(t, "Who am I?"); got != "You are Alice." {
				t.Fatalf("reply %q", got)
			}
			last, _ := srv.Last()
			if !strings.Contains(last.System, "<memory>\n- name: Alice\n</memory>") {
				t.Fatalf("next turn's system prompt lacks the fact:\n%s", last.System)
			}
			// kill -9 between two turns: once the store has recorded the
			// turn as finished (before that, a restart re-delivers the
			// stored answer: delivery is at least once).
			waitNoUnfinished(t, filepath.Join(dir, "data", "conch.db"))
			p.kill9(t)

			srv.Push(fakellm.Text("Still Alice."))
			p = startConch(t, env, "chat")
			if got := p.say(t, "And now?"); got != "Still Alice." {
				t.Fatalf("reply %q", got)
			}
			p.finish(t)
			last, _ = srv.Last()
			if !strings.Contains(last.System, "- name: Alice") {
				t.Fatalf("fact lost after kill -9:\n%s", last.System)
			}
			var users []string
			for _, m := range last.Messages {
				if m.Role == "user" && m.Text != "" {
					users = append(users, m.Text)
				}
			}
			if want := "Hi, I am Alice.|Who am I?|And now?"; strings.Join(users, "|") != want {
				t.Fatalf("history after kill -9 has user messages %q, want %q", users, want)
			}
		})
	}
}

func waitNoUnfinished(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for {
		turns, err := db.UnfinishedTurns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(turns) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("turns still unfinished: %+v", turns)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestChatKilledMidTurnResumes kills conch while the model is answering; the
// stored message is answered by the next run.
func TestChatKilledMidTurnResumes(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := testEnv(srv, fakellm.OpenAI, dir)
	srv.Push(fakellm.Hang())
	p := startConch(t, env, "chat")
	fmt.Fprintln(p.stdin, "a question that will be interrupted")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p.kill9(t)

	srv.Push(fakellm.Text("Here is the answer after all."))
	p = startConch(t, env, "chat")
	p.stdin.Close()
	if got := p.readLine(t); got != "Here is the answer after all." {
		t.Fatalf("reply %q", got)
	}
	p.finish(t)
}

// TestChatScriptedStdin pipes several lines at once: each gets its reply in
// order and progress stays on stderr.
func TestChatScriptedStdin(t *testing.T) {
	srv := fakellm.New(t)
	env := testEnv(srv, fakellm.Anthropic, t.TempDir())
	srv.Push(fakellm.Text("one"), fakellm.ToolCall("remember", `{"key":"k","value":"v"}`), fakellm.Text("two"), fakellm.Text("three"))
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(env, "CONCH_TEST_ARGS=chat")
	cmd.Stdin = strings.NewReader("first\nsecond\nthird\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	if got := stdout.String(); got != "one\ntwo\nthree\n" {
		t.Fatalf("stdout %q, want the three replies in order", got)
	}
	if !strings.Contains(stderr.String(), "remember") {
		t.Fatalf("stderr %q lacks the tool progress", stderr.String())
	}
}

func TestConfigErrorNamesTheKey(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CONCH_TEST_AS_MAIN=1", "CONCH_TEST_ARGS=up",
		"XDG_CONFIG_HOME="+dir, "CONCH_DATA_DIR="+dir, "CONCH_MODEL=", "CONCH_MODEL_API_KEY=", "OPENAI_API_KEY=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("conch up started without a model")
	}
	for _, want := range []string{"model.name", "CONCH_MODEL", "model.api_key"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestUpServesAndStopsOnSIGTERM runs `conch up` on the embedded defaults plus
// a model: the health endpoint answers, SIGTERM ends it cleanly.
func TestUpServesAndStopsOnSIGTERM(t *testing.T) {
	srv := fakellm.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := append(testEnv(srv, fakellm.OpenAI, t.TempDir()), "CONCH_GATEWAY_LISTEN="+addr)
	p := startConch(t, env, "up")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
				t.Fatalf("healthz: %d %q", resp.StatusCode, body)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("health endpoint never answered: %v; stderr:\n%s", err, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("conch up exited with %v after SIGTERM; stderr:\n%s", err, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "conch is up") {
		t.Fatalf("stderr lacks the start line:\n%s", p.stderr)
	}
}

// TestChatModelErrors drives the error classes through the real SDK: a 429
// with Retry-After and a 500 are retried (shown on stderr), a 401 ends the
// turn with a safe message.
func TestChatModelErrors(t *testing.T) {
	srv := fakellm.New(t)
	env := testEnv(srv, fakellm.Anthropic, t.TempDir())
	srv.Push(
		fakellm.Error(429, "slow down").RetryAfter(50*time.Millisecond),
		fakellm.Error(500, "oops"),
		fakellm.Text("finally"),
		fakellm.Error(401, "invalid x-api-key sk-secret"),
	)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(env, "CONCH_TEST_ARGS=chat")
	cmd.Stdin = strings.NewReader("first\nsecond\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The 401 leaves one message unanswered: the exit status says so.
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "1 message(s) could not be answered") {
		t.Fatalf("exit %v, want a failure naming the unanswered message; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 || lines[0] != "finally" || !strings.Contains(lines[1], "API key") || strings.Contains(stdout.String(), "sk-secret") {
		t.Fatalf("stdout %q: want the answer after retries, then a safe auth message", stdout.String())
	}
	if n := strings.Count(stderr.String(), "retrying"); n != 2 {
		t.Fatalf("stderr shows %d retries, want 2:\n%s", n, stderr.String())
	}
}
