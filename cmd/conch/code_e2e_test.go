package main

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/terminal/terminaltest"
)

// TestChatCodeWithClaude is the "done when", tried as a new user
// would: only CONCH_CODER_AGENT=claude and the vendor's own key variable
// (plus a base URL, since the vendor is faked on this machine). conch
// builds the image with Claude Code, the orchestrator's code tool hands it
// a task, the real CLI writes a file through its own tool, and its vendor
// API gets the real key, which never entered the sandbox.
func TestChatCodeWithClaude(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	// The image with the CLI is built once per engine (conch finds it by
	// its hash); building it here keeps the chat's wait for its answer
	// short.
	terminaltest.ContainerWith(t, terminaltest.Options{Agents: []string{"claude"}})

	orch := fakellm.New(t)
	vendor := fakellm.New(t)
	const key = "sk-ant-real-key-of-the-user-0123456789"
	const wrote = "I created hello.txt with the text hi."
	vendor.Handle(func(r fakellm.Request) fakellm.Reply {
		last := r.Messages[len(r.Messages)-1]
		if len(last.ToolResults) > 0 {
			return fakellm.Text(wrote)
		}
		return fakellm.ToolCall("Bash", `{"command":"printf hi > /workspace/hello.txt","description":"Write hello.txt"}`)
	})

	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "cd" + hex.EncodeToString(buf)
	env := append(testEnv(orch, fakellm.OpenAI, dir),
		"CONCH_CODER_AGENT=claude",
		"ANTHROPIC_API_KEY="+key,
		"CONCH_CODER_BASE_URL="+vendor.URL(),
	)
	env = append(env, engineEnv(t, e, instance)...)
	instanceContainers(t, e.Client(t), instance)

	orch.Push(
		fakellm.ToolCall("code", `{"task":"Create the file hello.txt in the workspace with the text hi."}`),
		fakellm.ToolCall("bash", `{"command":"sh -c 'cat /workspace/hello.txt; grep -slzF `+key+` /proc/[0-9]*/environ; grep -srlF `+key+` /workspace /tmp; echo; echo checked'"}`),
		fakellm.Text("Claude Code did it."),
	)
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "please have the coding agent create hello.txt", 3*time.Minute); got != "Claude Code did it." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)

	reqs := orch.Requests()
	var code, check string
	for _, r := range reqs {
		for _, res := range r.ToolResults() {
			switch {
			case strings.Contains(res.Content, "checked"):
				check = res.Content
			case strings.Contains(res.Content, "coding agent"):
				code = res.Content
			}
		}
	}
	if !strings.Contains(code, "finished its turn") || !strings.Contains(code, "Its answer:\n"+wrote) || !strings.Contains(code, "hello.txt (created)") {
		t.Errorf("code tool result: got %q, want the CLI's finished turn with its answer and the file it wrote", code)
	}
	if !strings.Contains(check, "hi\nchecked") || strings.Contains(check, "/proc/") || strings.Contains(check, "/workspace/") {
		t.Errorf("in the sandbox: got %q, want hello.txt written (hi) and the key in no process or file", check)
	}
	for _, r := range vendor.Requests() {
		if r.APIKey != key {
			t.Fatalf("the vendor API got key %q, want the user's key added on the host", r.APIKey)
		}
	}
	if len(vendor.Requests()) < 2 {
		t.Fatalf("the vendor API got %d requests, want the task and the tool result", len(vendor.Requests()))
	}
}
