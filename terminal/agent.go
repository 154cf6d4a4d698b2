package terminal

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"conch"
)

// Defaults of CoderOptions.
const (
	DefaultStartTimeout  = 90 * time.Second
	DefaultTurnTimeout   = 5 * time.Minute
	DefaultProgressEvery = 5 * time.Second
	DefaultIPCThreshold  = 500
	codeSession          = "code"
)

// CoderOptions configures a coding-agent session.
type CoderOptions struct {
	// StartTimeout bounds the CLI's start until its input box shows; 0
	// means DefaultStartTimeout.
	StartTimeout time.Duration
	// TurnTimeout bounds one Task or Respond call; the agent keeps working
	// after it and a later Respond("") waits on. 0 means
	// DefaultTurnTimeout.
	TurnTimeout time.Duration
	// ProgressEvery limits progress reports; 0 means DefaultProgressEvery.
	ProgressEvery time.Duration
	// IPCThreshold: longer tasks (and any with a line break) go through a
	// file in Workspace/.ipc with a short reference typed; 0 means 500.
	IPCThreshold int
	// Env is added to the CLI's environment (KEY=value): its base URL,
	// and whatever key it needs.
	Env []string
	// APIKey is given to Profile.Files (Claude Code approves a key by its
	// last characters); it is not written anywhere else.
	APIKey string
	// Egress, if set, is called before the CLI starts and returns the
	// proxy URL it must use (set as HTTPS_PROXY and https_proxy): the
	// sandbox stays without network and the CLI reaches its API through
	// conch's allowlisting proxy (egress.Bridges.ProxyURL fits).
	Egress func(ctx context.Context, sb conch.Sandbox) (string, error)
}

func (o *CoderOptions) defaults() {
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = DefaultTurnTimeout
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	if o.IPCThreshold <= 0 {
		o.IPCThreshold = DefaultIPCThreshold
	}
}

// TurnState is where a coding agent is when a call returns.
type TurnState string

// Turn states.
const (
	// TurnIdle: the agent finished its turn and waits for a task.
	TurnIdle TurnState = "idle"
	// TurnAsking: the agent asks a question or for permission; answer
	// with Respond.
	TurnAsking TurnState = "asking"
	// TurnWorking: the call's time ran out while the agent works on.
	TurnWorking TurnState = "working"
	// TurnCrashed: the CLI ended during the turn; it was started again.
	TurnCrashed TurnState = "crashed"
)

// TurnResult is what a Task or Respond call saw.
type TurnResult struct {
	State TurnState
	// Text is what the agent showed since the input was sent, decoration
	// left out, long runs elided.
	Text string
	// Started is set when the CLI was (re)started by this call.
	Started bool
	// CrashStatus is the CLI's exit status for TurnCrashed.
	CrashStatus int
	// IPCFile is the file the task was written to, if it was long.
	IPCFile string
	// Hook is set when the CLI's own turn-end hook ended the turn (rather
	// than the screen settling).
	Hook    bool
	Elapsed time.Duration
}

// String renders the result for the model.
func (r TurnResult) String() string {
	var b strings.Builder
	switch r.State {
	case TurnIdle:
		b.WriteString("The coding agent finished its turn.")
	case TurnAsking:
		b.WriteString("The coding agent is asking something: answer with respond_to_agent.")
	case TurnWorking:
		fmt.Fprintf(&b, "The coding agent is still working after %s: call respond_to_agent with an empty text to keep waiting.", r.Elapsed.Round(time.Second))
	case TurnCrashed:
		fmt.Fprintf(&b, "The coding agent crashed (exit status %d) and was started again; it has lost the conversation. Send the task again with code if it is still needed.", r.CrashStatus)
	}
	if r.IPCFile != "" {
		fmt.Fprintf(&b, " (The task was long, so it was written to %s.)", r.IPCFile)
	}
	if r.Text != "" {
		b.WriteString("\n")
		b.WriteString(r.Text)
	}
	return b.String()
}

// ErrNoAgent is returned by Respond when no coding agent has been started.
var ErrNoAgent = errors.New("no coding agent is running")

// AgentError is a failure of the coding-agent CLI itself (it would not
// start, or would not take input), told to the model rather than ending
// the turn.
type AgentError struct{ Msg string }

func (e *AgentError) Error() string { return e.Msg }

// Coder is the conversation's coding-agent CLI, running in its own tmux
// session ("code") inside conch's shell. Calls are serialised.
type Coder struct {
	m *Manager
	p Profile
	o CoderOptions

	mu      sync.Mutex
	t       *tty
	cliSeq  uint64 // seq when the CLI was started; a later prompt means it ended
	running bool
}

// Coder returns the Manager's coding-agent session for p, creating it on
// first use (the CLI itself starts lazily, on the first Task). A Manager
// has one; asking for another profile replaces it after detaching.
func (m *Manager) Coder(p Profile, o CoderOptions) *Coder {
	o.defaults()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.coder != nil && m.coder.p.Name == p.Name {
		return m.coder
	}
	m.coder = &Coder{m: m, p: p, o: o}
	return m.coder
}

// Task gives the agent a new task, starting the CLI if it is not running
// (or restarting it after a crash), and waits until the turn ends, the
// agent asks something, or TurnTimeout. progress receives rate-limited
// snippets of the agent's screen.
func (c *Coder) Task(ctx context.Context, task string, progress func(string)) (TurnResult, error) {
	if strings.TrimSpace(task) == "" {
		return TurnResult{}, conch.Errorf(conch.KindInvalid, "the task is empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	begin := c.m.o.Now()
	started, err := c.ensure(ctx)
	if err != nil {
		return TurnResult{}, err
	}
	res, err := c.sendAndWait(ctx, task, progress)
	res.Started = res.Started || started
	res.Elapsed = c.m.o.Now().Sub(begin)
	return res, err
}

// Respond answers the agent's question (or, with an empty text, just waits
// for the turn to go on), then waits like Task.
func (c *Coder) Respond(ctx context.Context, text string, progress func(string)) (TurnResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	begin := c.m.o.Now()
	if c.t == nil {
		if err := c.reattach(ctx); err != nil {
			return TurnResult{}, err
		}
	}
	if c.t == nil || !c.running {
		return TurnResult{}, ErrNoAgent
	}
	var res TurnResult
	var err error
	if text == "" {
		res, err = c.waitTurn(ctx, c.seq(), progress)
	} else {
		res, err = c.sendAndWait(ctx, text, progress)
	}
	res.Elapsed = c.m.o.Now().Sub(begin)
	return res, err
}

func (c *Coder) seq() uint64 {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.t.seq
}

// ensure makes the CLI run: it finds a session a previous conch left,
// creates one, and (re)starts the CLI when the shell prompt is back.
func (c *Coder) ensure(ctx context.Context) (started bool, err error) {
	if c.t == nil {
		if err := c.reattach(ctx); err != nil {
			return false, err
		}
	}
	if c.t == nil {
		t := &tty{n: CodeTTY, name: codeSession, shell: true, profile: c.p.Name, openedAt: c.m.o.Now()}
		t.seq, t.typeSeq, t.lastType = 1, 1, c.m.o.Now()
		t.scan.nonce = newNonce()
		if err := c.m.start(ctx, t, ""); err != nil {
			return false, fmt.Errorf("coding agent: %w", err)
		}
		wctx, cancel := context.WithTimeout(ctx, c.m.o.OpenWait)
		c.m.waitReady(wctx, []*tty{t}, false)
		cancel()
		c.t = t
	}
	if c.running && !c.exitedLocked() {
		return false, nil
	}
	if err := c.startCLI(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// reattach finds the "code" session of a previous conch.
func (c *Coder) reattach(ctx context.Context) error {
	if err := c.m.ensureSetup(ctx); err != nil {
		return err
	}
	res, err := c.m.sb.Exec(ctx, conch.ExecRequest{
		Argv: append(c.m.tmuxArgs(), "has-session", "-t", codeSession),
		Env:  c.m.env(), Dir: c.m.o.Workspace, Timeout: 30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("coding agent: %w", err)
	}
	if res.ExitCode != 0 {
		return nil
	}
	t := &tty{n: CodeTTY, name: codeSession, shell: true, profile: c.p.Name, openedAt: c.m.o.Now(), mark: -1}
	recs, err := c.m.reg.LoadTerminals(ctx, c.m.o.Scope)
	if err != nil {
		return fmt.Errorf("coding agent: %w", err)
	}
	for _, r := range recs {
		if r.TTY == CodeTTY {
			t.scan.nonce, t.openedAt = r.Nonce, r.OpenedAt
		}
	}
	if err := c.m.attach(ctx, t); err != nil {
		return fmt.Errorf("coding agent: %w", err)
	}
	cc, err := c.m.client(ctx, t)
	if err != nil {
		return err
	}
	cur, err := c.m.currentCommand(ctx, cc, t)
	if err != nil {
		return err
	}
	c.t = t
	c.running = cur != "bash" && cur != ""
	c.cliSeq = c.seq()
	// What is on the screen now was shown before; start from here.
	if _, _, err := c.m.observeLines(ctx, t); err != nil {
		return err
	}
	return nil
}

// exitedLocked reports whether the CLI ended: conch's shell printed its
// prompt after the CLI was started, or the pane died.
func (c *Coder) exitedLocked() bool {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.t.doneSeq > c.cliSeq || c.t.dead || c.t.exited
}

func (c *Coder) home(ctx context.Context) (string, error) {
	res, err := c.m.sb.Exec(ctx, conch.ExecRequest{
		Argv: []string{"sh", "-c", `printf %s "$HOME"`}, Dir: c.m.o.Workspace, Env: c.m.env(), Timeout: 30 * time.Second,
	})
	if err != nil {
		return "", fmt.Errorf("coding agent: home: %w", err)
	}
	home := strings.TrimSpace(string(res.Output))
	if res.ExitCode != 0 || !path.IsAbs(home) {
		return "", fmt.Errorf("coding agent: no home directory in the sandbox (%q)", home)
	}
	return home, nil
}

// redact hides the API key in text the model will read (a CLI may print
// its configuration or an error that quotes the key).
func (c *Coder) redact(text string) string {
	if len(c.o.APIKey) < 8 {
		return text
	}
	return strings.ReplaceAll(text, c.o.APIKey, "[redacted]")
}

// startCLI writes the profile's files and starts the CLI in the shell,
// then waits for its input box.
func (c *Coder) startCLI(ctx context.Context) error {
	home, err := c.home(ctx)
	if err != nil {
		return err
	}
	if c.p.Files != nil {
		files, err := c.p.Files(Setup{Home: home, Workspace: c.m.o.Workspace, Hook: "sh " + shellQuote(c.m.hookPath()) + " " + shellQuote(c.p.Name) + " " + c.t.scan.nonce, APIKey: c.o.APIKey})
		if err != nil {
			return err
		}
		for _, f := range files {
			if res, err := c.m.sb.Exec(ctx, conch.ExecRequest{Argv: []string{"mkdir", "-p", path.Dir(f.Path)}, Dir: c.m.o.Workspace, Timeout: 30 * time.Second}); err != nil || res.ExitCode != 0 {
				return fmt.Errorf("coding agent: mkdir %s: %v %s", path.Dir(f.Path), err, res.Output)
			}
			if err := c.m.sb.WriteFile(ctx, f.Path, f.Data, f.Mode); err != nil {
				return fmt.Errorf("coding agent: %w", err)
			}
		}
	}
	env := c.o.Env
	if c.o.Egress != nil {
		proxy, err := c.o.Egress(ctx, c.m.sb)
		if err != nil {
			return fmt.Errorf("coding agent: egress: %w", err)
		}
		env = append(env[:len(env):len(env)], "HTTPS_PROXY="+proxy, "https_proxy="+proxy)
	}
	// The environment (which holds the API key) goes through a private file
	// the shell reads and removes: typed, it would stay on the screen,
	// which the model reads.
	var envFile strings.Builder
	for _, e := range env {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return conch.Errorf(conch.KindInvalid, "coding agent: environment entry %q is not KEY=value", e)
		}
		envFile.WriteString("export " + k + "=" + shellQuote(v) + "\n")
	}
	envPath := path.Join(c.m.o.RunDir, "coder-"+c.t.scan.nonce+".env")
	if err := c.m.sb.WriteFile(ctx, envPath, []byte(envFile.String()), 0o600); err != nil {
		return fmt.Errorf("coding agent: %w", err)
	}
	var line strings.Builder
	line.WriteString("cd " + shellQuote(c.m.o.Workspace) + " && . " + shellQuote(envPath) + " && rm -f " + shellQuote(envPath) + " && ")
	line.WriteString(c.p.Command)
	c.m.mu.Lock()
	c.cliSeq = c.t.seq
	c.t.seq++
	c.t.typeSeq = c.t.seq
	c.m.mu.Unlock()
	// A leading space keeps the line (and any key in it) out of history.
	cmds := typeCommands(c.t.pane, " "+line.String())
	cmds = append(cmds, "send-keys -t "+quote(c.t.pane)+" Enter")
	if err := c.m.send(ctx, c.t, cmds...); err != nil {
		return fmt.Errorf("coding agent: start: %w", err)
	}
	c.running = true
	sctx, cancel := context.WithTimeout(ctx, c.o.StartTimeout)
	defer cancel()
	var last []string
	err = c.watch(sctx, func(screen []string, s snap) (bool, time.Time, error) {
		last = screen
		if s.doneSeq > c.cliSeq || s.dead {
			return false, time.Time{}, &AgentError{fmt.Sprintf("the coding agent (%s) exited while starting (status %d); its screen:\n%s", c.p.Name, s.status, c.redact(strings.Join(tailLines(screen, 15), "\n")))}
		}
		return hasAny(screen, c.p.Ready) && !hasAny(screen, c.p.Busy), time.Time{}, nil
	})
	if err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			return &AgentError{fmt.Sprintf("the coding agent (%s) did not show its input box within %s; its screen:\n%s", c.p.Name, c.o.StartTimeout, c.redact(strings.Join(tailLines(last, 15), "\n")))}
		}
		return err
	}
	// The start-up screen is not news to the model.
	_, _, err = c.m.observeLines(ctx, c.t)
	return err
}

// sendAndWait types text (through a file when long), presses Enter until
// the CLI takes it, and waits for the turn.
func (c *Coder) sendAndWait(ctx context.Context, text string, progress func(string)) (TurnResult, error) {
	var res TurnResult
	if len(text) > c.o.IPCThreshold || strings.ContainsAny(text, "\n\r") {
		file := path.Join(c.m.o.Workspace, ".ipc", fmt.Sprintf("task-%s.md", c.m.o.Now().UTC().Format("20060102T150405.000")))
		if r, err := c.m.sb.Exec(ctx, conch.ExecRequest{Argv: []string{"mkdir", "-p", path.Dir(file)}, Dir: c.m.o.Workspace, Timeout: 30 * time.Second}); err != nil || r.ExitCode != 0 {
			return res, fmt.Errorf("coding agent: mkdir .ipc: %v %s", err, r.Output)
		}
		if err := c.m.sb.WriteFile(ctx, file, []byte(text), 0o644); err != nil {
			return res, fmt.Errorf("coding agent: %w", err)
		}
		res.IPCFile = file
		text = fmt.Sprintf("Read the task in %s and do it.", file)
	}
	// Make everything on the screen seen, so the result is what follows.
	if _, _, err := c.m.observeLines(ctx, c.t); err != nil {
		return res, err
	}
	start := c.seq()
	input := typeCommands(c.t.pane, text)
	if c.p.Paste {
		input = pasteCommands(c.t.pane, text)
	}
	if err := c.m.send(ctx, c.t, input...); err != nil {
		return res, fmt.Errorf("coding agent: type: %w", err)
	}
	if err := sleepCtx(ctx, c.p.enterDelay()); err != nil {
		return res, err
	}
	probe := text
	if r := []rune(probe); len(r) > 24 {
		probe = string(r[:24])
	}
	// The text must be on the screen before its disappearance can mean the
	// CLI took it: under load the screen may not show it yet.
	vctx, vcancel := context.WithTimeout(ctx, 2*time.Second)
	_ = c.watch(vctx, func(screen []string, _ snap) (bool, time.Time, error) {
		return strings.Contains(strings.Join(tailLines(screen, 6), "\n"), probe), time.Time{}, nil
	})
	vcancel()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	taken := false
	for attempt := 0; attempt < 4 && !taken; attempt++ {
		if err := c.m.send(ctx, c.t, "send-keys -t "+quote(c.t.pane)+" Enter"); err != nil {
			return res, fmt.Errorf("coding agent: enter: %w", err)
		}
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.watch(actx, func(screen []string, s snap) (bool, time.Time, error) {
			if s.turnSeq > start || s.doneSeq > c.cliSeq || s.dead || hasAny(screen, c.p.Busy) {
				return true, time.Time{}, nil
			}
			return !strings.Contains(strings.Join(tailLines(screen, 6), "\n"), probe), time.Time{}, nil
		})
		cancel()
		switch {
		case err == nil:
			taken = true
		case ctx.Err() != nil:
			return res, ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return res, err
		}
	}
	if !taken {
		screen, _ := c.m.screen(ctx, c.t)
		return res, &AgentError{fmt.Sprintf("the coding agent (%s) did not take the input after 4 presses of Enter; its screen:\n%s", c.p.Name, strings.Join(tailLines(screen, 15), "\n"))}
	}
	tr, err := c.waitTurn(ctx, start, progress)
	tr.IPCFile = res.IPCFile
	return tr, err
}

// waitTurn waits for the end of the turn that began at seq start.
func (c *Coder) waitTurn(ctx context.Context, start uint64, progress func(string)) (TurnResult, error) {
	var res TurnResult
	tctx, cancel := context.WithTimeout(ctx, c.o.TurnTimeout)
	defer cancel()
	lastProgress := c.m.o.Now()
	var reported []string
	err := c.watch(tctx, func(screen []string, s snap) (bool, time.Time, error) {
		now := c.m.o.Now()
		if s.doneSeq > c.cliSeq || s.dead {
			res.State, res.CrashStatus = TurnCrashed, s.status
			return true, time.Time{}, nil
		}
		busy := hasAny(screen, c.p.Busy)
		asking := hasAny(screen, c.p.Asking)
		if progress != nil && now.Sub(lastProgress) >= c.o.ProgressEvery {
			if snippet := c.fresh(screen, reported); snippet != "" {
				progress(c.redact(snippet))
			}
			reported, lastProgress = screen, now
		}
		quiet := now.Sub(s.lastOutput)
		switch {
		case s.turnSeq > start && !busy:
			// The CLI's own hook said the turn ended; the screen agrees.
			res.State, res.Hook = TurnIdle, true
			if asking {
				res.State = TurnAsking
			}
			return true, time.Time{}, nil
		case asking && !busy:
			if quiet >= 300*time.Millisecond {
				res.State = TurnAsking
				return true, time.Time{}, nil
			}
			return false, s.lastOutput.Add(300 * time.Millisecond), nil
		case !busy && hasAny(screen, c.p.Ready):
			// No hook (yet): an idle, quiet screen for long enough.
			if quiet >= c.p.settle() {
				res.State = TurnIdle
				return true, time.Time{}, nil
			}
			return false, s.lastOutput.Add(c.p.settle()), nil
		}
		return false, time.Time{}, nil
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return res, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		res.State = TurnWorking
	default:
		return res, err
	}
	_, lines, err := c.m.observeLines(ctx, c.t)
	if err != nil {
		return res, err
	}
	res.Text = c.redact(elide(c.clean(lines), 60, 20, 30))
	if res.State == TurnCrashed {
		c.running = false
		screen := res.Text
		if err := c.startCLI(ctx); err != nil {
			return res, err
		}
		res.Started = true
		res.Text = screen
	}
	return res, nil
}

// fresh returns the lines of screen not in before, decoration left out.
func (c *Coder) fresh(screen, before []string) string {
	old := map[string]bool{}
	for _, l := range before {
		old[l] = true
	}
	var out []string
	for _, l := range c.clean(screen) {
		if !old[l] && !hasAny([]string{l}, c.p.Busy) {
			out = append(out, l)
		}
	}
	if len(out) > 8 {
		out = out[len(out)-8:]
	}
	return strings.Join(out, "\n")
}

var boxOnly = regexp.MustCompile(`^[\s╭╮╰╯─│┌┐└┘━┃▔▁]*$`)

// clean drops decoration: box borders, the empty input box, chrome lines.
func (c *Coder) clean(lines []string) []string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t != "" && boxOnly.MatchString(t):
			continue
		case hasAny([]string{l}, c.p.Chrome):
			continue
		case strings.HasPrefix(t, "│ >") && strings.TrimSpace(strings.Trim(t, "│> ")) == "":
			continue
		}
		out = append(out, l)
	}
	return trimBlankTail(out)
}

// snap is the event state of a terminal at one moment.
type snap struct {
	seq, turnSeq, doneSeq uint64
	status                int
	dead                  bool
	lastOutput            time.Time
}

// watch calls check with the screen whenever the terminal changed (at most
// every 50 ms) or when check asked to be called again, until check says
// done or ctx ends.
func (c *Coder) watch(ctx context.Context, check func(screen []string, s snap) (done bool, recheck time.Time, err error)) error {
	const minGap = 50 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastSeq uint64
	first := true
	for {
		c.m.mu.Lock()
		t := c.t
		s := snap{seq: t.seq, turnSeq: t.turnSeq, doneSeq: t.doneSeq, status: t.status, dead: t.dead || t.ended, lastOutput: t.lastOutput}
		if t.exited {
			s.dead, s.status = true, t.exitCode
		}
		ch := c.m.changed
		c.m.mu.Unlock()
		var recheck time.Time
		if first || s.seq != lastSeq {
			screen, err := c.m.screen(ctx, t)
			if err != nil {
				return err
			}
			done, at, err := check(screen, s)
			if err != nil || done {
				return err
			}
			recheck = at
			lastSeq, first = s.seq, false
		}
		wait := time.Hour
		if !recheck.IsZero() {
			wait = max(recheck.Sub(c.m.o.Now()), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ch:
			// Let a burst of output (a spinner) land before looking.
			if err := sleepCtx(ctx, minGap); err != nil {
				return err
			}
		case <-timer.C:
			first = true
		case <-ctx.Done():
			return ctx.Err()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func hasAny(lines []string, markers []string) bool {
	for _, l := range lines {
		for _, m := range markers {
			if m != "" && strings.Contains(l, m) {
				return true
			}
		}
	}
	return false
}

func tailLines(lines []string, n int) []string {
	lines = trimBlankTail(lines)
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

// sleepCtx waits d: a required delay (the CLI ignores an Enter sooner), not
// a stand-in for a signal.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
