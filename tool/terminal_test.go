package tool_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/sandbox/sandboxd/sandboxdtest"
	"conch/terminal"
	"conch/terminal/terminaltest"
	"conch/tool"
)

func runTool(t *testing.T, tl conch.Tool, env conch.ToolEnv, args string) conch.ToolOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := tl.Run(ctx, env, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s %s: Go error %v", tl.Spec().Name, args, err)
	}
	return out
}

func TestTerminalTools(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		pool := terminal.NewPool(sandboxdtest.Provider(b.SB), terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(pool.Close)
		tools := map[string]conch.Tool{}
		for _, tl := range append(tool.TerminalTools(pool), &tool.TerminalRead{P: pool}) {
			var schema map[string]any
			if err := json.Unmarshal(tl.Spec().Parameters, &schema); err != nil {
				t.Fatalf("%s: parameters are not JSON: %v", tl.Spec().Name, err)
			}
			tools[tl.Spec().Name] = tl
		}
		env := conch.ToolEnv{Conversation: conch.ConversationKey{Channel: conch.ChannelCLI, ID: "t"}, Sandboxes: sandboxdtest.Provider(b.SB)}
		steps := []struct {
			tool, args string
			fail       bool
			want       string
		}{
			{"terminal_wait", `{}`, false, "no terminals are open"},
			{"terminal_open", `{}`, false, "Opened terminal 0 (19 more"},
			{"terminal_type", `{"tty":0,"expect":"python3","text":"ls"}`, true, `running "bash", not "python3"`},
			{"terminal_type", `{"tty":3,"expect":"bash","text":"ls"}`, true, "terminal 3 is not open"},
			{"terminal_type", `{"tty":0,"text":"ls"}`, true, "expect is required"},
			{"terminal_type", `{"tty":0,"expect":"bash","text":"ls","bogus":1}`, true, "unknown field"},
			{"terminal_type", `{"tty":0,"expect":"bash","text":"printf 'a\\nb\\n'; exit_status() { return 5; }; exit_status"}`, false, "Typed into terminal 0"},
			{"terminal_read", `{"tty":0}`, false, "[tty 0] screen now"}, // looking is not observing:
			{"terminal_type", `{"tty":0,"expect":"bash","text":"ls"}`, true, "have not seen"},
			{"terminal_wait", `{"timeout_seconds":10}`, false, "[tty 0 · bash] done, exit 5"},
			{"terminal_read", `{"tty":0,"history":100}`, false, "exit_status"},
			{"terminal_read", `{"tty":4}`, true, "terminal 4 is not open (open: [0])"},
			{"terminal_read", `{"tty":0,"history":-1}`, true, "history must be"},
			{"terminal_read", `{}`, true, "takes"},
			{"terminal_wait", `{"timeout_seconds":-1}`, true, "positive"},
			{"terminal_close", `{"tty":0}`, false, "its scrollback is in " + b.WS + "/.conch/terminals/tty_0-"},
			{"terminal_close", `{"tty":0}`, true, "terminal 0 is not open"},
			{"terminal_open", `{"command":"a\nb"}`, true, "one line"},
		}
		for _, s := range steps {
			out := runTool(t, tools[s.tool], env, s.args)
			if out.IsError != s.fail || !strings.Contains(out.Content, s.want) {
				t.Fatalf("%s %s: got error=%v %q, want error=%v containing %q", s.tool, s.args, out.IsError, out.Content, s.fail, s.want)
			}
		}
	})
}

func TestTerminalToolsWithoutRuntime(t *testing.T) {
	for _, tl := range tool.TerminalTools(nil) {
		out := runTool(t, tl, conch.ToolEnv{}, `{"tty":0,"expect":"bash","text":"x"}`)
		if tl.Spec().Name == "terminal_open" || tl.Spec().Name == "terminal_wait" {
			out = runTool(t, tl, conch.ToolEnv{}, `{}`)
		}
		if tl.Spec().Name == "terminal_close" {
			out = runTool(t, tl, conch.ToolEnv{}, `{"tty":0}`)
		}
		if !out.IsError || !strings.Contains(out.Content, "no computer") {
			t.Errorf("%s without a runtime: got %v %q, want a failure saying there is no computer", tl.Spec().Name, out.IsError, out.Content)
		}
	}
}
