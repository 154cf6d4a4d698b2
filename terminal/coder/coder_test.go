package coder_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/terminal"
	"conch/terminal/coder"
	"conch/terminal/terminaltest"
)

type box = terminaltest.Box

func eachBox(t *testing.T, f func(t *testing.T, b *box)) { terminaltest.Each(t, f) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func contains(t testing.TB, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("%s: got %q, want it to contain %q", what, got, want)
	}
}

var testKey = conch.ConversationKey{Channel: conch.ChannelCLI, ID: "coder"}

func newCoder(t *testing.T, b *box, m *terminal.Manager, mod func(*coder.Profile)) *coder.Coder {
	t.Helper()
	p := coder.FakeCLI(terminaltest.FakeCLI(t, b))
	if mod != nil {
		mod(&p)
	}
	return coder.For(m, testKey, p, coder.Options{TurnTimeout: time.Minute, StartTimeout: 30 * time.Second})
}

func mustTurn(t *testing.T, what string, res coder.TurnResult, err error, want coder.TurnState) coder.TurnResult {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if res.State != want {
		t.Fatalf("%s: got state %s, want %s\n%s", what, res.State, want, res)
	}
	return res
}

func TestCoderTurns(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		c := newCoder(t, b, m, nil)
		if _, err := c.Respond(ctx, "hello?", nil); err == nil {
			t.Fatal("Respond before any task: got nil error, want ErrNoAgent")
		}

		var mu sync.Mutex
		var progress []string
		report := func(s string) { mu.Lock(); progress = append(progress, s); mu.Unlock() }
		res, err := c.Task(ctx, "say hello, then work 1s", report)
		mustTurn(t, "first task", res, err, coder.TurnIdle)
		if !res.Started || !res.Hook {
			t.Errorf("first task: got started=%v hook=%v, want the CLI started and the turn ended by its hook", res.Started, res.Hook)
		}
		contains(t, "first task", res.Text, "● Done: say hello, then work 1s")
		if strings.Contains(res.Text, "╭") || strings.Contains(res.Text, "? for shortcuts") {
			t.Errorf("first task: decoration left in the text:\n%s", res.Text)
		}
		mu.Lock()
		if len(progress) == 0 {
			t.Errorf("no progress reported during a 1 s turn")
		}
		mu.Unlock()
		// The marker file of the turn-end hook is there too.
		if data, err := b.SB.ReadFile(ctx, m.Options().RunDir+"/turn-fakecli", 1<<10); err != nil || len(data) == 0 {
			t.Errorf("turn marker file: got %q, %v; want a line per turn", data, err)
		}

		res, err = c.Task(ctx, "needs permission to deploy", nil)
		mustTurn(t, "permission task", res, err, coder.TurnAsking)
		contains(t, "permission task", res.Text, "Allow fakecli to run `make deploy`?")
		res, err = c.Respond(ctx, "1", nil)
		mustTurn(t, "answer", res, err, coder.TurnIdle)
		contains(t, "answer", res.Text, "permission granted")
		if res.Started {
			t.Errorf("answer: the CLI was restarted, want the same session")
		}

		long := "Line one of a long task\n" + strings.Repeat("more detail. ", 60)
		res, err = c.Task(ctx, long, nil)
		mustTurn(t, "long task", res, err, coder.TurnIdle)
		if !strings.HasPrefix(res.IPCFile, b.WS+"/.ipc/task-") {
			t.Errorf("long task: IPC file %q, want one under %s/.ipc", res.IPCFile, b.WS)
		}
		contains(t, "long task", res.Text, "task file says: Line one of a long task")

		res, err = c.Task(ctx, "please crash now", nil)
		mustTurn(t, "crash", res, err, coder.TurnCrashed)
		if res.CrashStatus != 3 || !res.Started {
			t.Errorf("crash: got status %d started=%v, want 3 and restarted", res.CrashStatus, res.Started)
		}
		contains(t, "crash", res.Text, "fatal: simulated crash")
		res, err = c.Task(ctx, "after the failure", nil)
		mustTurn(t, "after crash", res, err, coder.TurnIdle)
		contains(t, "after crash", res.Text, "● Done: after the failure")
	})
}

func TestCoderSwallowedEnterIsRetried(t *testing.T) {
	b := terminaltest.Host(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	// Enter 1 ms after the text: the fake CLI swallows it, as the real
	// ones do; the Coder must notice and press it again.
	c := newCoder(t, b, m, func(p *coder.Profile) { p.EnterDelay = time.Millisecond })
	res, err := c.Task(ctxT(t), "quick one", nil)
	mustTurn(t, "task", res, err, coder.TurnIdle)
	contains(t, "task", res.Text, "● Done: quick one")
}

func TestCoderTimeoutAndRecovery(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		reg := terminal.NewMemRegistry()
		m1 := terminal.NewManager(b.SB, reg, b.Opts)
		bin := terminaltest.FakeCLI(t, b)
		c1 := coder.For(m1, testKey, coder.FakeCLI(bin), coder.Options{TurnTimeout: 300 * time.Millisecond})
		res, err := c1.Task(ctx, "work 2s on it", nil)
		mustTurn(t, "long turn", res, err, coder.TurnWorking)
		m1.Detach() // conch restarts while the agent works

		m2 := terminal.NewManager(b.SB, reg, b.Opts)
		t.Cleanup(m2.Detach)
		c2 := coder.For(m2, testKey, coder.FakeCLI(bin), coder.Options{TurnTimeout: time.Minute})
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		res, err = c2.Respond(rctx, "", nil)
		mustTurn(t, "keep waiting after restart", res, err, coder.TurnIdle)
		contains(t, "after restart", res.Text, "● Done: work 2s on it")
		res, err = c2.Task(ctx, "next one", nil)
		mustTurn(t, "next task", res, err, coder.TurnIdle)
		if res.Started {
			t.Errorf("next task: the CLI was started again, want the running one found")
		}
	})
}

func TestCoderEgressProxy(t *testing.T) {
	b := terminaltest.Host(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	calls := 0
	c := coder.For(m, testKey, coder.FakeCLI(terminaltest.FakeCLI(t, b)), coder.Options{
		Env: []string{"FAKE_KEY=it's secret"},
		Egress: func(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) (string, error) {
			calls++
			return "http://127.0.0.1:3128", nil
		},
	})
	res, err := c.Task(ctxT(t), "show proxy", nil)
	mustTurn(t, "task", res, err, coder.TurnIdle)
	contains(t, "task", res.Text, "proxy: http://127.0.0.1:3128")
	if calls != 1 {
		t.Errorf("Egress called %d times, want 1", calls)
	}
}

// TestCoderKeyNeverOnScreen: the CLI's API key reaches its environment but
// never the screen the model reads (it is not typed on the command line).
func TestCoderKeyNeverOnScreen(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		const key = "sk-test-0123456789abcdef"
		c := coder.For(m, testKey, coder.FakeCLI(terminaltest.FakeCLI(t, b)), coder.Options{
			TurnTimeout: time.Minute, StartTimeout: 30 * time.Second,
			APIKey: key, Env: []string{"CONCH_TEST_KEY=" + key},
		})
		res, err := c.Task(ctx, "say hello", nil)
		mustTurn(t, "task", res, err, coder.TurnIdle)
		// Every pane's whole scrollback, as tmux holds it.
		capture, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c",
			"for p in $(tmux -S " + m.Options().Socket + " list-panes -a -F '#{pane_id}'); do tmux -S " + m.Options().Socket + " capture-pane -p -S - -t $p; done"}})
		if err != nil || capture.ExitCode != 0 || len(capture.Output) == 0 {
			t.Fatalf("capture panes: %v %d %q", err, capture.ExitCode, capture.Output)
		}
		if screen := string(capture.Output) + res.Text; strings.Contains(screen, key) {
			t.Fatalf("the API key is on the screen:\n%s", screen)
		}
		env, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c CONCH_TEST_KEY=" + key}})
		if err != nil || strings.TrimSpace(string(env.Output)) == "0" {
			t.Fatalf("the key did not reach the CLI's environment: %v %q", err, env.Output)
		}
	})
}
