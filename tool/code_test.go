package tool_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/sandbox/sandboxd/sandboxdtest"
	"conch/terminal"
	"conch/terminal/coder"
	"conch/terminal/terminaltest"
	"conch/tool"
)

func TestCodeTools(t *testing.T) {
	b := terminaltest.Host(t)
	pool := terminal.NewPool(sandboxdtest.Provider(b.SB), terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(pool.Close)
	tools := tool.CodeTools(pool, tool.CodeOptions{
		Profile: coder.FakeCLI(terminaltest.FakeCLI(t, b), 0),
		// Ask: the permission prompt goes to respond_to_agent.
		Coder: coder.Options{TurnTimeout: time.Minute, Ask: true},
	})
	code, respond := tools[0], tools[1]
	var mu sync.Mutex
	var progress []string
	env := conch.ToolEnv{
		Conversation: conch.ConversationKey{Channel: conch.ChannelCLI, ID: "code"},
		Sandboxes:    sandboxdtest.Provider(b.SB),
		Progress:     func(s string) { mu.Lock(); progress = append(progress, s); mu.Unlock() },
	}
	steps := []struct {
		tool conch.Tool
		args string
		fail bool
		want string
	}{
		{respond, `{"text":"yes"}`, true, "no coding agent is running"},
		{code, `{"task":""}`, true, "non-empty task"},
		{code, `{"task":"refactor it, work 1s"}`, false, "finished its turn.\n"},
		{code, `{"task":"deploy, with permission"}`, false, "asking something"},
		{respond, `{"text":"2"}`, false, "permission denied"},
		{respond, `{}`, true, `takes {"text": string}`},
		{code, `{"task":"crash please"}`, true, "crashed (exit status 3) and was started again"},
	}
	for _, s := range steps {
		out := runTool(t, s.tool, env, s.args)
		if out.IsError != s.fail || !strings.Contains(out.Content, s.want) {
			t.Fatalf("%s %s: got error=%v %q, want error=%v containing %q", s.tool.Spec().Name, s.args, out.IsError, out.Content, s.fail, s.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 || !strings.HasPrefix(progress[0], "coding agent:\n") {
		t.Errorf("progress: got %q, want reports of the agent's screen", progress)
	}
}

func TestCodeStartFailureIsToldToTheModel(t *testing.T) {
	b := terminaltest.Host(t)
	pool := terminal.NewPool(sandboxdtest.Provider(b.SB), terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(pool.Close)
	p := coder.Gemini()
	p.Command = "gemini-not-installed-here"
	tools := tool.CodeTools(pool, tool.CodeOptions{Profile: p})
	env := conch.ToolEnv{Conversation: conch.ConversationKey{Channel: conch.ChannelCLI, ID: "nocli"}, Sandboxes: sandboxdtest.Provider(b.SB)}
	out := runTool(t, tools[0], env, `{"task":"anything"}`)
	if !out.IsError || !strings.Contains(out.Content, "exited while starting (status 127)") {
		t.Fatalf("missing CLI: got error=%v %q, want a failure telling it exited with 127", out.IsError, out.Content)
	}
}

// scriptedApprover answers questions with choices in order, recording them.
type scriptedApprover struct {
	mu      sync.Mutex
	choices []conch.ApprovalChoice
	asked   []conch.ApprovalRequest
	calls   []string
}

func (a *scriptedApprover) Approve(_ context.Context, callID string, req conch.ApprovalRequest) (conch.ApprovalDecision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked, a.calls = append(a.asked, req), append(a.calls, callID)
	c := a.choices[0]
	a.choices = a.choices[1:]
	return conch.ApprovalDecision{Choice: c, Reason: conch.ApprovalReasonPerson, By: "alice"}, nil
}

// TestCodePermissionPromptsGoToPeople: with coder.approvals = person, the
// CLI's permission menu (fakecli in a real sandbox) goes to the
// conversation's people, whose choice answers it; the model's
// respond_to_agent text is never typed into a menu; nobody to ask leaves
// the prompt open and says so.
func TestCodePermissionPromptsGoToPeople(t *testing.T) {
	b := terminaltest.Host(t)
	pool := terminal.NewPool(sandboxdtest.Provider(b.SB), terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(pool.Close)
	tools := tool.CodeTools(pool, tool.CodeOptions{
		Profile: coder.FakeCLI(terminaltest.FakeCLI(t, b), 0),
		Coder:   coder.Options{TurnTimeout: time.Minute, Ask: true},
		Person:  true,
	})
	code, respond := tools[0], tools[1]
	people := &scriptedApprover{choices: []conch.ApprovalChoice{conch.ApproveOnce, conch.ApproveDeny, conch.ApproveOnce}}
	env := conch.ToolEnv{
		Conversation: conch.ConversationKey{Channel: conch.ChannelCLI, ID: "person"},
		Sandboxes:    sandboxdtest.Provider(b.SB),
		CallID:       "call_1",
		Approvals:    people,
	}
	out := runTool(t, code, env, `{"task":"deploy, with permission"}`)
	if out.IsError || !strings.Contains(out.Content, "permission granted") || !strings.Contains(out.Content, "allowed (Allow once) by alice") {
		t.Fatalf("allowed: %q", out.Content)
	}
	env.CallID = "call_2"
	out = runTool(t, code, env, `{"task":"deploy again, with permission"}`)
	if out.IsError || !strings.Contains(out.Content, "permission denied") || !strings.Contains(out.Content, "denied by alice") {
		t.Fatalf("denied: %q", out.Content)
	}
	people.mu.Lock()
	if len(people.asked) != 2 || people.asked[0].Kind != "coder" || !strings.Contains(people.asked[0].Title, "make deploy") ||
		people.asked[0].Scope != "coder:fakecli" || people.calls[0] != "call_1#1" || people.asked[0].Resumable {
		t.Fatalf("questions %+v calls %v", people.asked, people.calls)
	}
	people.mu.Unlock()

	// The model's answer is not typed into a menu: the CLI asks, people decide.
	env.CallID = "call_3"
	out = runTool(t, code, env, `{"task":"third deploy, with permission"}`)
	if !strings.Contains(out.Content, "permission granted") {
		t.Fatalf("third: %q", out.Content)
	}
	// Without anyone to ask, the prompt stays open and the model is told.
	env.CallID, env.Approvals = "call_4", nil
	out = runTool(t, code, env, `{"task":"fourth deploy, with permission"}`)
	if !strings.Contains(out.Content, "nobody can be asked here") || !strings.Contains(out.Content, "asking something") {
		t.Fatalf("nobody to ask: %q", out.Content)
	}
	env.Approvals = &scriptedApprover{choices: []conch.ApprovalChoice{conch.ApproveDeny}}
	env.CallID = "call_5"
	out = runTool(t, respond, env, `{"text":"1"}`)
	if !strings.Contains(out.Content, "your text was not sent") || !strings.Contains(out.Content, "permission denied") {
		t.Fatalf("respond_to_agent while asking: %q", out.Content)
	}
}
