package tool_test

import (
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
