package coder_test

import (
	"context"
	"slices"
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

// fakeStartup is how long the fake CLI takes to start; keys it gets
// earlier are lost, as with the real CLIs.
const fakeStartup = 1500 * time.Millisecond

func newCoder(t *testing.T, b *box, m *terminal.Manager, mod func(*coder.Profile), o coder.Options) *coder.Coder {
	t.Helper()
	p := coder.FakeCLI(terminaltest.FakeCLI(t, b), fakeStartup)
	if mod != nil {
		mod(&p)
	}
	if o.TurnTimeout == 0 {
		o.TurnTimeout = time.Minute
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	return coder.For(m, testKey, p, o)
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
		// Ask: the CLI keeps its permission prompts.
		c := newCoder(t, b, m, nil, coder.Options{Ask: true})
		if _, err := c.Respond(ctx, "hello?", nil); err == nil {
			t.Fatal("Respond before any task: got nil error, want ErrNoAgent")
		}

		var mu sync.Mutex
		var progress []string
		report := func(s string) { mu.Lock(); progress = append(progress, s); mu.Unlock() }
		// Sent right after the start: the driver must wait for the CLI's
		// signals, or the task is lost while it starts.
		res, err := c.Task(ctx, "say hello, then work 1s", report)
		mustTurn(t, "first task", res, err, coder.TurnIdle)
		if !res.Started || !res.Hook {
			t.Errorf("first task: got started=%v hook=%v, want the CLI started and the turn ended by its hook", res.Started, res.Hook)
		}
		contains(t, "first task", res.Text, "● Done: say hello, then work 1s")
		// The final message as the CLI's hook gave it; the CLI's own files
		// (its session in ~/.fakecli) are not the task's changes.
		if res.Answer != "Done: say hello, then work 1s" || !res.ChangesListed || len(res.Changes) != 0 {
			t.Errorf("first task: got answer %q, changes %v (listed %v); want the hook's message and no files changed", res.Answer, res.Changes, res.ChangesListed)
		}
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

		res, err = c.Task(ctx, "spawn helper", nil)
		mustTurn(t, "helper", res, err, coder.TurnIdle)
		contains(t, "helper", res.Text, "helper ")

		res, err = c.Task(ctx, "please crash now", nil)
		mustTurn(t, "crash", res, err, coder.TurnCrashed)
		if res.CrashStatus != 3 || !res.Started || !res.Resumed {
			t.Errorf("crash: got status %d started=%v resumed=%v, want 3, restarted and resumed", res.CrashStatus, res.Started, res.Resumed)
		}
		contains(t, "crash", res.Text, "fatal: simulated crash")
		contains(t, "crash", res.String(), "continuing its previous session")
		// The helper the crashed CLI left is gone.
		if out := helpers(t, b, m); out != "" {
			t.Errorf("processes of the crashed CLI left running: %s", out)
		}
		res, err = c.Task(ctx, "what did I ask before?", nil)
		mustTurn(t, "after crash", res, err, coder.TurnIdle)
		contains(t, "after crash", res.Text, "Earlier you asked: say hello, then work 1s | needs permission to deploy")
		contains(t, "after crash", res.Text, "please crash now")
	})
}

// helpers lists the processes still carrying the fake CLI's mark, besides
// the CLI itself.
func helpers(t *testing.T, b *box, m *terminal.Manager) string {
	t.Helper()
	res, err := b.SB.Exec(ctxT(t), conch.ExecRequest{Argv: []string{"sh", "-c",
		`for f in $(grep -lxzF "$1" /proc/[0-9]*/environ 2>/dev/null); do d=${f%/environ}; c=$(tr '\0' ' ' 2>/dev/null < $d/cmdline); case "$c" in *fakecli*) ;; *) echo "${d#/proc/} $c";; esac; done`,
		"helpers", coder.Mark("fakecli", m.Options().RunDir)}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("list helpers: %v %s", err, res.Output)
	}
	return strings.TrimSpace(string(res.Output))
}

// TestCoderAuto: by default the CLI runs in its full-auto mode, so a task
// that would ask for permission completes; a CLI that died between tasks
// is noticed before the next one is typed into its dead screen.
func TestCoderAuto(t *testing.T) {
	b := terminaltest.Host(t)
	ctx := ctxT(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	c := newCoder(t, b, m, nil, coder.Options{})
	res, err := c.Task(ctx, "needs permission to deploy", nil)
	mustTurn(t, "permission task", res, err, coder.TurnIdle)
	contains(t, "permission task", res.Text, "permission auto-granted")

	// The files a task changed are told, however the CLI shows them.
	if _, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "echo a > keep.txt"}, Dir: b.Opts.Workspace}); err != nil {
		t.Fatal(err)
	}
	res, err = c.Task(ctx, "create file notes.txt and clean up", nil)
	mustTurn(t, "files task", res, err, coder.TurnIdle)
	if want := []coder.FileChange{{Path: "notes.txt", Kind: coder.Created}}; !res.ChangesListed || !slices.Equal(res.Changes, want) {
		t.Errorf("files task: got changes %v (listed %v), want %v", res.Changes, res.ChangesListed, want)
	}
	contains(t, "files task", res.String(), "Files changed in the workspace: notes.txt (created).")

	// The CLI ends behind the driver's back (C-c in its terminal).
	s, err := m.AgentSession(ctx, "fakecli", false)
	if err != nil || s == nil {
		t.Fatalf("agent session: %v", err)
	}
	if err := s.Keys(ctx, "C-c"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the CLI to end", func() bool { cur, _ := s.Command(ctx); return cur == "bash" })
	res, err = c.Task(ctx, "what did I ask before?", nil)
	mustTurn(t, "after the CLI ended", res, err, coder.TurnIdle)
	if !res.Started {
		t.Errorf("after the CLI ended: got started=false, want it started again")
	}
	contains(t, "after the CLI ended", res.Text, "Earlier you asked: ")
}

// TestCoderLostInput: a task the CLI dropped without showing it (it was
// not ready after all) is typed again once its screen stays quiet, and
// taken once.
func TestCoderLostInput(t *testing.T) {
	b := terminaltest.Host(t)
	ctx := ctxT(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	c := newCoder(t, b, m, nil, coder.Options{Env: []string{"FAKECLI_LOSE_FIRST_INPUT=1"}})
	res, err := c.Task(ctx, "say hello once", nil)
	mustTurn(t, "lost task", res, err, coder.TurnIdle)
	if res.Answer != "Done: say hello once" {
		t.Errorf("lost task: got answer %q, want the task taken once, as sent", res.Answer)
	}
}

// TestCoderStop: a /stop of the turn interrupts the CLI's work; a shutdown
// (another cause) leaves it working.
func TestCoderStop(t *testing.T) {
	b := terminaltest.Host(t)
	ctx := ctxT(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	c := newCoder(t, b, m, nil, coder.Options{})
	sctx, stop := context.WithCancelCause(ctx)
	time.AfterFunc(5*time.Second, func() { stop(conch.ErrStopped) })
	if res, err := c.Task(sctx, "work 60s on it", nil); err == nil {
		t.Fatalf("stopped task: got nil error and %s", res)
	} else {
		t.Logf("stopped task: %v", err)
	}
	res, err := c.Respond(ctx, "", nil)
	mustTurn(t, "after /stop", res, err, coder.TurnIdle)
	if res.Elapsed > 30*time.Second {
		t.Errorf("after /stop: the CLI worked on for %s, want it interrupted", res.Elapsed)
	}
	s, _ := m.AgentSession(ctx, "fakecli", false)
	screen, _ := s.Screen(ctx)
	contains(t, "after /stop", strings.Join(screen, "\n"), "Interrupted.")

	sctx, shut := context.WithCancelCause(ctx)
	time.AfterFunc(3*time.Second, func() { shut(context.Canceled) })
	if _, err := c.Task(sctx, "work 6s on it", nil); err == nil {
		t.Fatal("task cut by shutdown: got nil error")
	}
	res, err = c.Respond(ctx, "", nil)
	mustTurn(t, "after shutdown", res, err, coder.TurnIdle)
	contains(t, "after shutdown", res.Text, "● Done: work 6s on it")
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCoderSwallowedEnterIsRetried(t *testing.T) {
	b := terminaltest.Host(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	// Enter 1 ms after the text: the fake CLI swallows it, as the real
	// ones do; the Coder must notice and press it again.
	c := newCoder(t, b, m, func(p *coder.Profile) { p.EnterDelay = time.Millisecond }, coder.Options{})
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
		routes := 0
		route := func(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) (string, error) {
			routes++
			return "http://127.0.0.1:4480", nil
		}
		c1 := coder.For(m1, testKey, coder.FakeCLI(bin, fakeStartup), coder.Options{TurnTimeout: 300 * time.Millisecond, Route: route})
		res, err := c1.Task(ctx, "work 2s on it", nil)
		mustTurn(t, "long turn", res, err, coder.TurnWorking)
		m1.Detach() // conch restarts while the agent works

		m2 := terminal.NewManager(b.SB, reg, b.Opts)
		t.Cleanup(m2.Detach)
		c2 := coder.For(m2, testKey, coder.FakeCLI(bin, fakeStartup), coder.Options{TurnTimeout: time.Minute, Route: route})
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		res, err = c2.Respond(rctx, "", nil)
		mustTurn(t, "keep waiting after restart", res, err, coder.TurnIdle)
		contains(t, "after restart", res.Text, "● Done: work 2s on it")
		// The route the running CLI was started with is brought back.
		if routes != 2 {
			t.Errorf("Route called %d times, want 2: at the start and when the running CLI was found again", routes)
		}
		res, err = c2.Task(ctx, "next one: show base url", nil)
		mustTurn(t, "next task", res, err, coder.TurnIdle)
		if res.Started {
			t.Errorf("next task: the CLI was started again, want the running one found")
		}
		contains(t, "next task", res.Text, "base url: http://127.0.0.1:4480")
	})
}

// TestCoderKeyNeverOnScreen: the CLI's API key reaches its environment but
// never the screen the model reads (it is not typed on the command line).
func TestCoderKeyNeverOnScreen(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		const key = "sk-test-0123456789abcdef"
		c := coder.For(m, testKey, coder.FakeCLI(terminaltest.FakeCLI(t, b), 0), coder.Options{
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
