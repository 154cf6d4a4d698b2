package hook_test

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/fake"
	"conch/hook"
	"conch/terminal/terminaltest"
)

var key = conch.ConversationKey{Channel: conch.ChannelCLI, ID: "hooks"}

// setup returns a runner over a real sandbox (a container, and the sandbox
// agent on the host) with its hook directory in the box's workspace.
func setup(t *testing.T, b *terminaltest.Box, o hook.Options) (*hook.Runner, conch.Sandbox, string) {
	o.Sandboxes = provider{b.SB}
	o.Dir = path.Join(b.WS, ".conch", "hooks")
	o.RunDir = path.Join(b.WS, ".run")
	return hook.New(o), b.SB, o.Dir
}

type provider struct{ sb conch.Sandbox }

func (p provider) Sandbox(context.Context, conch.ConversationKey) (conch.Sandbox, error) {
	return p.sb, nil
}

func write(t *testing.T, sb conch.Sandbox, p, body string, mode uint32) {
	t.Helper()
	if err := sb.WriteFile(t.Context(), p, []byte(body), fsMode(mode)); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
}

func read(t *testing.T, sb conch.Sandbox, p string) string {
	t.Helper()
	b, err := sb.ReadFile(t.Context(), p, 1<<20)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func TestHooksRunInOrderWithTheirEnvironment(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		r, sb, dir := setup(t, b, hook.Options{Operator: map[hook.Stage][]hook.Script{
			hook.PreTurn: {{Name: "00-operator", Body: []byte("#!/bin/sh\necho operator >> \"$OUT\"\n")}},
		}})
		out := path.Join(b.WS, "hooks.log")
		logLine := `#!/bin/sh
echo "$(basename "$0") turn=$CONCH_TURN conv=$CONCH_CONVERSATION msg=$CONCH_LAST_MESSAGE status=$CONCH_TURN_STATUS log=$(head -c 200 "$CONCH_TURN_LOG" | head -n 2 | tail -n 1)" >> ` + out + "\n"
		pre := path.Join(dir, "pre-turn")
		write(t, sb, path.Join(pre, "20-second"), logLine, 0o755)
		write(t, sb, path.Join(pre, "10-first"), logLine, 0o755)
		write(t, sb, path.Join(pre, ".hidden"), logLine, 0o755)
		write(t, sb, path.Join(pre, "10-first~"), logLine, 0o755)
		write(t, sb, path.Join(pre, "30-not-executable"), logLine, 0o644)
		write(t, sb, path.Join(dir, "post-turn", "50-post"), logLine, 0o755)

		turn := conch.Turn{ID: 7, Key: key, Inbound: conch.Inbound{Text: "build it", Sender: "alice"}}
		r.BeforeTurn(t.Context(), turn)
		r.AfterTurn(t.Context(), turn, "built", false)
		got := strings.Split(strings.TrimSpace(read(t, sb, out)), "\n")
		want := []string{
			"10-first turn=7 conv=cli:hooks msg=build it status= log=build it",
			"20-second turn=7 conv=cli:hooks msg=build it status= log=build it",
			"50-post turn=7 conv=cli:hooks msg=built status=abnormal log=build it",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("hooks wrote\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// The operator's hook ran first (it has no $OUT, so it failed: logged, not fatal).
		res := r.Run(t.Context(), hook.PreTurn, hook.Turn{Key: key, Turn: 8})
		if len(res) != 3 || !strings.HasSuffix(res[0].Name, "00-operator") {
			t.Fatalf("pre-turn ran %+v, want the operator's hook and then two", res)
		}
	})
}

func TestHookTimeoutAndFailureAreNotFatal(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		r, sb, dir := setup(t, b, hook.Options{Timeout: time.Second})
		pre := path.Join(dir, "pre-turn")
		write(t, sb, path.Join(pre, "1-slow"), "#!/bin/sh\nsleep 30\n", 0o755)
		write(t, sb, path.Join(pre, "2-fails"), "#!/bin/sh\necho broken; exit 3\n", 0o755)
		write(t, sb, path.Join(pre, "3-ok"), "#!/bin/sh\necho fine\n", 0o755)
		start := time.Now()
		res := r.Run(t.Context(), hook.PreTurn, hook.Turn{Key: key, Turn: 1})
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("hooks took %s; the slow one should stop after 1s", took)
		}
		if len(res) != 3 {
			t.Fatalf("ran %d hooks, want 3: %+v", len(res), res)
		}
		if res[0].Stopped != conch.StoppedTimeout {
			t.Errorf("slow hook: %+v, want stopped by the timeout", res[0])
		}
		if res[1].ExitCode != 3 || res[1].OK() {
			t.Errorf("failing hook: %+v", res[1])
		}
		if !res[2].OK() || strings.TrimSpace(res[2].Output) != "fine" {
			t.Errorf("last hook: %+v", res[2])
		}
	})
}

// Pre-stop hooks' lines reach the model as open issues, at most twice per
// turn; a failing pre-stop hook counts as no issues.
func TestPreStopIssuesReachTheModelAtMostTwice(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		r, sb, dir := setup(t, b, hook.Options{})
		stop := path.Join(dir, "pre-stop")
		write(t, sb, path.Join(stop, "10-tests"), "#!/bin/sh\necho 'tests fail: TestParse'\necho\necho \"answer was: $CONCH_LAST_MESSAGE\"\n", 0o755)
		write(t, sb, path.Join(stop, "20-broken"), "#!/bin/sh\necho 'not an issue'\nexit 1\n", 0o755)

		model := &fake.Model{}
		model.Push(fake.Text("done"), fake.Text("done, really"), fake.Text("done, truly"), fake.Text("never asked"))
		rec := &fake.Recorder{}
		rec.AddTurn(3, conch.Message{Role: conch.RoleUser, Text: "fix it"})
		ag, err := agent.New(agent.Options{Model: model, Store: rec, PreStop: r.PreStop})
		if err != nil {
			t.Fatal(err)
		}
		res, err := ag.Run(t.Context(), agent.Input{Turn: 3,
			Env: conch.ToolEnv{Conversation: key, Sandboxes: provider{sb}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "done, truly" {
			t.Errorf("answer %q, want the third (the cap is two rounds)", res.Text)
		}
		reqs := model.Requests()
		if len(reqs) != 3 {
			t.Fatalf("model asked %d times, want 3", len(reqs))
		}
		note := reqs[1].Messages[len(reqs[1].Messages)-1]
		if note.Role != conch.RoleUser || !strings.Contains(note.Text, "- tests fail: TestParse") ||
			!strings.Contains(note.Text, "- answer was: done") || strings.Contains(note.Text, "not an issue") {
			t.Errorf("second request ends with %+v", note)
		}
		if issues := r.Issues(t.Context(), hook.Turn{Key: key, Turn: 4, LastMessage: "x"}); len(issues) != 2 {
			t.Errorf("issues = %q, want the two lines of the hook that exited 0", issues)
		}
	})
}
