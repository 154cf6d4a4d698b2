package coder_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/egress"
	"conch/internal/testenv/fakellm"
	"conch/sandbox/sandboxd/sandboxdtest"
	"conch/terminal"
	"conch/terminal/coder"
	"conch/terminal/terminaltest"
)

// realKey is the key the host holds; the CLI only ever sees
// egress.PlaceholderKey.
const realKey = "sk-real-coder-key-0123456789abcdef"

// realCLI is one real coding-agent CLI and how its vendor's API asks it
// to write a file.
type realCLI struct {
	profile  coder.Profile
	vendor   egress.Vendor
	provider fakellm.Provider
	// write is the tool call of the CLI's own tool that writes
	// hello.txt in the workspace.
	write fakellm.Reply
	// quiet: the CLI asks for nothing but its API (its profile turns the
	// rest off), so the injector refuses nothing. Codex 0.169 still
	// fetches its announcement tip from raw.githubusercontent.com at start
	// (no setting found that stops it): refused and audited.
	quiet bool
}

func realCLIs() []realCLI {
	return []realCLI{
		{coder.Claude(), egress.Anthropic, fakellm.Anthropic,
			fakellm.ToolCall("Bash", `{"command":"printf hi > /workspace/hello.txt","description":"Write hello.txt"}`), true},
		{coder.Codex(), egress.OpenAI, fakellm.Responses,
			fakellm.ToolCall("exec", `{"input":"await tools.exec_command({cmd: \"printf hi > /workspace/hello.txt\"})"}`), false},
		{coder.Gemini(), egress.Gemini, fakellm.Gemini,
			fakellm.ToolCall("run_shell_command", `{"command":"printf hi > /workspace/hello.txt","description":"Write hello.txt"}`), true},
	}
}

// realCLIsOf is the CLIs a test drives: all of them, or with -short (the
// race detector's pass, after the full run) Claude Code alone, which keeps
// the driver's real-CLI path under the race detector at a third of the
// time.
func realCLIsOf(t *testing.T) []realCLI {
	all := realCLIs()
	if testing.Short() {
		t.Log("-short: Claude Code only")
		return all[:1]
	}
	return all
}

// The tasks of the conversation and the fake model's answers.
const (
	askWrite  = "Create the file hello.txt in the workspace with the text hi."
	wrote     = "I created hello.txt with the text hi."
	askRecall = "What did I ask you before?"
	recalled  = "Before, you asked me to create hello.txt."
	askAgain  = "Which file did you create earlier?"
	again     = "Earlier I created hello.txt."
)

// TestRealCLIs drives the REAL Claude Code, Codex and Gemini CLI, from the
// sandbox image conch builds with them, in a hardened network-less sandbox:
// each reaches a wire-exact fake of its vendor's API on the host only
// through the credential-injecting bridge, with a placeholder key. Each
// does two tasks with context (the first with a tool call that writes a
// file), is killed and started again continuing its session, and the real
// key never appears inside the container.
func TestRealCLIs(t *testing.T) {
	for _, cli := range realCLIsOf(t) {
		t.Run(cli.profile.Name, func(t *testing.T) { testRealCLI(t, cli) })
	}
}

func testRealCLI(t *testing.T, cli realCLI) {
	b := terminaltest.ContainerWith(t, terminaltest.Options{Agents: []string{"claude", "codex", "gemini"}})
	llm := fakellm.New(t)
	var mu sync.Mutex
	var asked []string // the tasks the model saw, in order
	llm.Handle(func(r fakellm.Request) fakellm.Reply {
		if r.JSONSchema != nil {
			// Gemini CLI's model router asks for a JSON verdict first.
			return fakellm.Text(`{"complexity_reasoning":"a small task","complexity_score":10}`)
		}
		last := r.Messages[len(r.Messages)-1]
		if strings.Contains(last.Text, "single-line task title") {
			return fakellm.Text("Write hello.txt") // Codex's title thread
		}
		if len(last.ToolResults) > 0 || last.Role == "tool" {
			return fakellm.Text(wrote)
		}
		task := lastUserText(r)
		mu.Lock()
		asked = append(asked, task)
		mu.Unlock()
		switch {
		case strings.Contains(task, askWrite):
			return cli.write
		case strings.Contains(task, askRecall):
			return fakellm.Text(recalled)
		case strings.Contains(task, askAgain):
			return fakellm.Text(again)
		}
		return fakellm.Error(400, "fakellm test: unexpected request: "+task)
	})

	audit := make(chan egress.Event, 64)
	c, m := realCoder(t, b, cli, llm, func(e egress.Event) {
		select {
		case audit <- e:
		default:
		}
	}, false)
	p := cli.profile
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	res, err := c.Task(ctx, askWrite, nil)
	mustTurn(t, "first task", res, err, coder.TurnIdle)
	if !res.Started || !res.Hook {
		t.Errorf("first task: got started=%v hook=%v, want the CLI started and the turn ended by its own hook", res.Started, res.Hook)
	}
	answered(t, "first task", res, wrote, coder.FileChange{Path: "hello.txt", Kind: coder.Created})
	if data, err := b.SB.ReadFile(ctx, b.WS+"/hello.txt", 1<<10); err != nil || string(data) != "hi" {
		t.Errorf("hello.txt: got %q, %v; want the CLI's tool call to have written hi", data, err)
	}

	res, err = c.Task(ctx, askRecall, nil)
	mustTurn(t, "second task", res, err, coder.TurnIdle)
	if res.Started {
		t.Errorf("second task: the CLI was started again, want the same session")
	}
	answered(t, "second task", res, recalled)
	checkHistory(t, "second task", llm, askRecall, askWrite, wrote)

	// The CLI dies (kill -9) while idle: the next task finds it gone, starts
	// it again continuing its session, and the history still holds the
	// first tasks. The answer comes at the CLI's turn-end hook, before the
	// CLI has finished its turn on screen and before it has written that
	// turn to its session file (Claude Code writes it after its redraw; a
	// loaded machine delays it by seconds): the crash comes once the screen
	// shows it idle and its session holds the answer, as a crash between
	// tasks would. A crash before that loses the CLI's own record of the
	// turn, which no driver can give back.
	waitFor(t, "the CLI to be idle on screen", func() bool {
		s, err := m.AgentSession(ctx, p.Name, false)
		if err != nil {
			return false
		}
		screen, err := s.Screen(ctx)
		if err != nil {
			return false
		}
		for _, l := range screen {
			for _, busy := range p.Busy {
				if strings.Contains(l, busy) {
					return false
				}
			}
		}
		return true
	})
	waitFor(t, "the CLI to write the answer to its session", func() bool {
		r, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: append([]string{"sh", "-c",
			`cd "$1" || exit 2; pat=$2; shift 2; grep -rqsF -- "$pat" $@`, "sh", b.WS, recalled}, p.Own...)})
		return err == nil && r.ExitCode == 0
	})
	kill, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c",
		`pids=$(grep -lxzF "$1" /proc/[0-9]*/environ 2>/dev/null | sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p'); [ -n "$pids" ] && kill -9 $pids`,
		"kill", coder.Mark(p.Name, m.Options().RunDir)}})
	if err != nil || kill.ExitCode != 0 {
		t.Fatalf("kill the CLI: %v %s", err, kill.Output)
	}
	waitFor(t, "the CLI to be gone", func() bool {
		s, _ := m.AgentSession(ctx, p.Name, false)
		cur, _ := s.Command(ctx)
		return cur == "bash"
	})
	res, err = c.Task(ctx, askAgain, nil)
	mustTurn(t, "task after the crash", res, err, coder.TurnIdle)
	if !res.Started || !res.Restarted || !res.Resumed {
		t.Errorf("task after the crash: got started=%v restarted=%v resumed=%v (%s), want the CLI started again continuing its session", res.Started, res.Restarted, res.Resumed, res.ResumeError)
	}
	answered(t, "task after the crash", res, again)
	checkHistory(t, "task after the crash", llm, askAgain, askWrite, askRecall)

	// The key: the upstream got the real one, added on the host; the
	// container never held it.
	for _, r := range llm.Requests() {
		if r.APIKey != realKey {
			t.Fatalf("%s: the upstream got key %q, want the real key added by the injector", r.Path, r.APIKey)
		}
	}
	noKeyInside(t, ctx, b, m)
	mu.Lock()
	t.Logf("%s: %d requests; tasks the model saw: %q", p.Name, len(llm.Requests()), asked)
	mu.Unlock()
	for _, e := range drain(audit) {
		if e.Allowed {
			continue
		}
		if cli.quiet {
			t.Errorf("%s: asked for something besides its API (refused and audited): %s %s (%s)", p.Name, e.Method, e.Target, e.Reason)
		} else {
			t.Logf("%s: refused and audited: %s %s (%s)", p.Name, e.Method, e.Target, e.Reason)
		}
	}
}

// TestRealCLIsAsk: with coder.approvals = ask each real CLI keeps its
// permission prompt: the command that writes the file waits, the driver
// tells the model that the CLI asks (its Asking markers, checked here
// against the real screens), and the answer given with Respond lets it go
// on.
func TestRealCLIsAsk(t *testing.T) {
	for _, cli := range realCLIsOf(t) {
		t.Run(cli.profile.Name, func(t *testing.T) { testRealCLIAsk(t, cli) })
	}
}

func testRealCLIAsk(t *testing.T, cli realCLI) {
	b := terminaltest.ContainerWith(t, terminaltest.Options{Agents: []string{"claude", "codex", "gemini"}})
	llm := fakellm.New(t)
	llm.Handle(func(r fakellm.Request) fakellm.Reply {
		if r.JSONSchema != nil {
			return fakellm.Text(`{"complexity_reasoning":"a small task","complexity_score":10}`)
		}
		last := r.Messages[len(r.Messages)-1]
		switch {
		case strings.Contains(last.Text, "single-line task title"):
			return fakellm.Text("Write hello.txt")
		case len(last.ToolResults) > 0 || last.Role == "tool":
			return fakellm.Text(wrote)
		}
		return cli.write
	})
	c, _ := realCoder(t, b, cli, llm, nil, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if cli.profile.NoAsk != "" {
		// Codex: refused, never run without the prompts that were asked for.
		var ae *coder.AgentError
		if _, err := c.Task(ctx, askWrite, nil); !errors.As(err, &ae) || !strings.Contains(ae.Msg, "approvals = ask") {
			t.Fatalf("ask mode: got %v, want the driver to refuse it, saying why", err)
		}
		if len(llm.Requests()) != 0 {
			t.Errorf("ask mode: the CLI reached its API, want it never started")
		}
		return
	}

	res, err := c.Task(ctx, askWrite, nil)
	mustTurn(t, "task", res, err, coder.TurnAsking)
	if _, err := b.SB.ReadFile(ctx, b.WS+"/hello.txt", 16); err == nil {
		t.Errorf("hello.txt was written before the permission was given")
	}
	contains(t, "task", res.String(), "The coding agent is asking something")
	t.Logf("%s asks:\n%s", cli.profile.Name, res.Text)

	res, err = c.Respond(ctx, "1", nil)
	mustTurn(t, "answer", res, err, coder.TurnIdle)
	answered(t, "answer", res, wrote, coder.FileChange{Path: "hello.txt", Kind: coder.Created})
	if data, err := b.SB.ReadFile(ctx, b.WS+"/hello.txt", 16); err != nil || string(data) != "hi" {
		t.Errorf("hello.txt after the permission: got %q, %v; want hi", data, err)
	}
}

// answered checks that the turn ended by the CLI's hook with the answer
// want, exactly as the CLI gave it, and the files changed.
func answered(t *testing.T, what string, res coder.TurnResult, want string, changes ...coder.FileChange) {
	t.Helper()
	if !res.Hook || res.Answer != want {
		t.Errorf("%s: got answer %q (hook %v), want %q from the CLI's turn-end hook; screen:\n%s", what, res.Answer, res.Hook, want, res.Text)
	}
	if !res.ChangesListed || !slices.Equal(res.Changes, changes) {
		t.Errorf("%s: got changes %v (listed %v), want %v", what, res.Changes, res.ChangesListed, changes)
	}
	contains(t, what, res.String(), "Its answer:\n"+want)
}

// realCoder is the driver of cli in box, reaching llm (its vendor's fake
// API) through an Injector that holds realKey, on the fixed bridge port;
// audit, if set, hears of every request the Injector took or refused.
func realCoder(tb testing.TB, box *box, cli realCLI, llm *fakellm.Server, audit func(egress.Event), ask bool) (*coder.Coder, *terminal.Manager) {
	tb.Helper()
	in, err := egress.NewInjector(egress.InjectorOptions{Vendor: cli.vendor, Key: realKey, BaseURL: llm.BaseURL(cli.provider), OnRequest: audit})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { in.Close() })
	bridges := egress.NewBridges(in, egress.BridgeOptions{Port: egress.DefaultBridgePort})
	tb.Cleanup(func() { bridges.Close() })
	m := terminal.NewManager(box.SB, terminal.NewMemRegistry(), box.Opts)
	tb.Cleanup(m.Detach)
	p := cli.profile
	c := coder.For(m, testKey, p, coder.Options{
		StartTimeout: 3 * time.Minute,
		TurnTimeout:  3 * time.Minute,
		APIKey:       egress.PlaceholderKey,
		Env:          cliEnv(p),
		Ask:          ask,
		Route: func(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) (string, error) {
			origin, err := bridges.URL(ctx, key, sb)
			if err != nil {
				return "", err
			}
			return in.ClientBaseURL(origin), nil
		},
	})
	return c, m
}

// cliEnv is the CLI's environment as conch up gives it: the placeholder
// key, and the bridge as HTTPS_PROXY so that requests to other hosts are
// refused and audited (the loopback itself not proxied).
func cliEnv(p coder.Profile) []string {
	origin := "http://127.0.0.1:" + strconv.Itoa(egress.DefaultBridgePort)
	return []string{p.APIKeyEnv + "=" + egress.PlaceholderKey,
		"HTTPS_PROXY=" + origin, "https_proxy=" + origin, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
}

// lastUserText is the text of the request's last user message that is
// not only tool results.
func lastUserText(r fakellm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && strings.TrimSpace(m.Text) != "" {
			return m.Text
		}
	}
	return ""
}

// checkHistory: the last request that carried task also carried the
// earlier words.
func checkHistory(t *testing.T, what string, llm *fakellm.Server, task string, earlier ...string) {
	t.Helper()
	reqs := llm.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		var all strings.Builder
		for _, m := range reqs[i].Messages {
			fmt.Fprintf(&all, "%s: %s\n", m.Role, m.Text)
		}
		if !strings.Contains(all.String(), task) || strings.Contains(all.String(), "single-line task title") {
			continue // Codex's title thread quotes the task too
		}
		for _, w := range earlier {
			if !strings.Contains(all.String(), w) {
				t.Errorf("%s: the request for %q does not carry %q; history:\n%s", what, task, w, all.String())
			}
		}
		return
	}
	t.Errorf("%s: no request carried %q", what, task)
}

// noKeyInside: the real key is in no process environment, no file of the
// workspace or /tmp, and no terminal's scrollback.
func noKeyInside(t *testing.T, ctx context.Context, b *box, m *terminal.Manager) {
	t.Helper()
	sock := m.Options().Socket
	res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", `
n=0
grep -lzF "$1" /proc/[0-9]*/environ 2>/dev/null && n=1
grep -rlF "$1" "$2" /tmp 2>/dev/null && n=1
for p in $(tmux -S "$3" list-panes -a -F '#{pane_id}' 2>/dev/null); do
	tmux -S "$3" capture-pane -p -S - -t "$p" | grep -F "$1" && n=1
done
echo "found=$n"`, "probe", realKey, b.WS, sock}, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("look for the key: %v %s", err, res.Output)
	}
	if !strings.Contains(string(res.Output), "found=0") {
		t.Fatalf("the real key is inside the container:\n%s", res.Output)
	}
}

func drain(ch chan egress.Event) []egress.Event {
	var out []egress.Event
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// BenchmarkRealCLITurn measures, per real CLI, a task's round trip through
// the driver and splits it: delivery (Task called → the CLI's request
// reaches the fake API), the CLI's own time (request → its turn-end hook
// ran, read from the hook's timestamp file) and notice (hook → Task
// returned, conch's overhead at the end; goals.tsv row 7). The fake API
// answers at once. Each CLI takes at least minCLISamples tasks, whatever
// b.N is.
//
//	go test -run X -bench RealCLITurn -benchtime 10x ./terminal/coder/
func BenchmarkRealCLITurn(b *testing.B) {
	for _, cli := range realCLIs() {
		b.Run(cli.profile.Name, func(b *testing.B) { benchRealCLI(b, cli) })
	}
}

func benchRealCLI(b *testing.B, cli realCLI) {
	box := terminaltest.ContainerWith(b, terminaltest.Options{Agents: []string{"claude", "codex", "gemini"}})
	llm := fakellm.New(b)
	var mu sync.Mutex
	var arrived time.Time
	llm.Handle(func(r fakellm.Request) fakellm.Reply {
		if r.JSONSchema != nil {
			return fakellm.Text(`{"complexity_reasoning":"a small task","complexity_score":10}`)
		}
		if task := lastUserText(r); strings.Contains(task, "single-line task title") {
			return fakellm.Text("Say ok")
		}
		mu.Lock()
		if arrived.IsZero() {
			arrived = time.Now()
		}
		mu.Unlock()
		return fakellm.Text("ok")
	})
	c, m := realCoder(b, box, cli, llm, nil, false)
	p := cli.profile
	ctx := context.Background()
	if res, err := c.Task(ctx, "Say ok once to warm up.", nil); err != nil || res.State != coder.TurnIdle {
		b.Fatalf("warm-up: %v %s", err, res)
	}
	var total, deliver, own, notice []time.Duration
	b.ResetTimer()
	for i := range max(b.N, minCLISamples) {
		mu.Lock()
		arrived = time.Time{}
		mu.Unlock()
		begin := time.Now()
		res, err := c.Task(ctx, fmt.Sprintf("Say ok, number %d.", i), nil)
		end := time.Now()
		if err != nil || res.State != coder.TurnIdle || !res.Hook {
			b.Fatalf("task %d: %v %s", i, err, res)
		}
		hook, err := lastHook(ctx, box, m, p.Name)
		if err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		at := arrived
		mu.Unlock()
		total = append(total, end.Sub(begin))
		deliver = append(deliver, at.Sub(begin))
		own = append(own, hook.Sub(at))
		notice = append(notice, end.Sub(hook))
	}
	b.StopTimer()
	ms := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(total), "total-p50-ms")
	b.ReportMetric(ms(deliver), "deliver-p50-ms")
	b.ReportMetric(ms(own), "cli-own-p50-ms")
	b.ReportMetric(ms(notice), "notice-p50-ms")
	b.ReportMetric(float64(sandboxdtest.Pct(notice, 0.99))/float64(time.Millisecond), "notice-p99-ms")
	b.ReportMetric(ms(notice)/max(ms(own), 0.001), "notice/cli-own")
	b.ReportMetric(0, "ns/op")
}

// minCLISamples is how many tasks BenchmarkRealCLITurn gives each CLI at
// least (a task takes about half a second).
const minCLISamples = 20

// lastHook reads the time of the CLI's last turn-end hook from its marker
// file in the sandbox (one date +%s.%N line per turn).
func lastHook(ctx context.Context, box *box, m *terminal.Manager, name string) (time.Time, error) {
	data, err := box.SB.ReadFile(ctx, m.Options().RunDir+"/turn-"+name, 1<<20)
	if err != nil {
		return time.Time{}, err
	}
	lines := strings.Fields(string(data))
	if len(lines) == 0 {
		return time.Time{}, fmt.Errorf("no turn-end marker for %s", name)
	}
	var sec, nsec int64
	if _, err := fmt.Sscanf(lines[len(lines)-1], "%d.%d", &sec, &nsec); err != nil {
		return time.Time{}, fmt.Errorf("turn-end marker %q: %w", lines[len(lines)-1], err)
	}
	return time.Unix(sec, nsec), nil
}
