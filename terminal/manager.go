// Package terminal gives a conversation persistent, numbered terminals
// (TTYs) and a coding-agent CLI session, both held by tmux inside the
// conversation's sandbox, so they outlive conch.
//
// Output is pushed: each terminal has a tmux control-mode client (`tmux -C`)
// running as one long-lived conch.Sandbox Exec whose standard input carries
// tmux commands and whose output carries %output notifications. What the
// model reads comes from capture-pane (the rendered screen, no escape codes),
// diffed against what it saw last.
//
// Completion comes with evidence where there is some: a shell TTY runs bash
// with an rcfile whose prompt prints an invisible marker carrying the exit
// status and working directory, so "done, exit 2" is known as the prompt
// returns; any other program is done when it has been quiet for
// Options.Settle. Coding-agent CLIs report their turn end through their own
// hook (see terminal/coder).
//
// Everything goes through the conch.Sandbox interface, so the package works
// over any sandbox with a streaming Exec.
package terminal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"conch"
)

// Defaults of Options.
const (
	DefaultRunDir    = "/tmp/conch"
	DefaultWorkspace = "/workspace"
	DefaultSettle    = 1500 * time.Millisecond
	DefaultMaxWait   = 60 * time.Second
	DefaultOpenWait  = 5 * time.Second
	DefaultMaxTTYs   = 20
	DefaultWidth     = 160
	DefaultHeight    = 48
	// CodeTTY is the registry number of the coding-agent session.
	CodeTTY = -1
)

// Options configures a Manager.
type Options struct {
	// Scope keys the Registry records: the conversation. Required.
	Scope string
	// RunDir holds runtime files in the sandbox (tmux socket, rcfile,
	// hook script); "" means DefaultRunDir. It must be writable; it need
	// not survive a sandbox restart (tmux does not either).
	RunDir string
	// Socket is the tmux socket; "" means RunDir/tmux.sock.
	Socket string
	// Workspace is the persistent directory; "" means DefaultWorkspace.
	// Scrollback archives go to Workspace/.conch/terminals.
	Workspace string
	// Settle is how long a program must be quiet to count as done when
	// there is no marker; 0 means DefaultSettle.
	Settle time.Duration
	// MaxWait caps a Wait; 0 means DefaultMaxWait.
	MaxWait time.Duration
	// OpenWait caps how long Open waits for the first prompt; 0 means
	// DefaultOpenWait.
	OpenWait time.Duration
	// MaxTTYs is the number of TTYs (numbered 0…MaxTTYs-1); 0 means 20.
	MaxTTYs int
	// Width and Height are the terminal size; 0 means 160×48.
	Width, Height int
	// InlineLines is the most new lines shown whole; longer output shows
	// HeadLines and TailLines with the elision marked. 0 means 20, 8, 12.
	InlineLines, HeadLines, TailLines int
	// NoMarkers disables the shell's completion markers, so shells settle
	// like any program (the baseline of the benchmark).
	NoMarkers bool
	// Env is added to the environment of the tmux server and so of every
	// terminal (for example LANG=C.UTF-8, which is always set).
	Env []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the terminals' logs; nil discards them.
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.RunDir == "" {
		o.RunDir = DefaultRunDir
	}
	if o.Socket == "" {
		o.Socket = path.Join(o.RunDir, "tmux.sock")
	}
	if o.Workspace == "" {
		o.Workspace = DefaultWorkspace
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.OpenWait <= 0 {
		o.OpenWait = DefaultOpenWait
	}
	if o.MaxTTYs <= 0 {
		o.MaxTTYs = DefaultMaxTTYs
	}
	if o.Width <= 0 {
		o.Width = DefaultWidth
	}
	if o.Height <= 0 {
		o.Height = DefaultHeight
	}
	if o.InlineLines <= 0 {
		o.InlineLines = 20
	}
	if o.HeadLines <= 0 {
		o.HeadLines = 8
	}
	if o.TailLines <= 0 {
		o.TailLines = 12
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Manager owns the terminals of one conversation's sandbox.
type Manager struct {
	sb  conch.Sandbox
	reg Registry
	o   Options

	setupMu sync.Mutex
	setup   bool

	mu      sync.Mutex
	ttys    map[int]*tty
	changed chan struct{} // closed and replaced on every event
	closed  bool
	notices []string // told by the next Wait
	agent   *tty     // the coding agent's session, once attached
	kept    map[any]any

	agentMu sync.Mutex // serialises finding or starting the agent session
}

// errManagerClosed is returned after Detach.
var errManagerClosed = errors.New("terminal manager closed")

// NewManager returns a Manager for sb. Call Recover before use to find the
// terminals a previous conch left in the sandbox.
func NewManager(sb conch.Sandbox, reg Registry, o Options) *Manager {
	o.defaults()
	if reg == nil {
		reg = NewMemRegistry()
	}
	if o.Scope == "" {
		o.Scope = sb.ID()
	}
	return &Manager{sb: sb, reg: reg, o: o, ttys: map[int]*tty{}, kept: map[any]any{}, changed: make(chan struct{})}
}

// Sandbox returns the sandbox the Manager works in.
func (m *Manager) Sandbox() conch.Sandbox { return m.sb }

// Options returns the Manager's options with defaults filled in.
func (m *Manager) Options() Options { return m.o }

// notifyLocked wakes everything waiting for a change.
func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Manager) env() []string {
	return append([]string{"LANG=C.UTF-8", "LC_ALL=C.UTF-8"}, m.o.Env...)
}

func (m *Manager) rcPath() string     { return path.Join(m.o.RunDir, "bashrc") }
func (m *Manager) confPath() string   { return path.Join(m.o.RunDir, "tmux.conf") }
func (m *Manager) hookPath() string   { return path.Join(m.o.RunDir, "turn-end.sh") }
func (m *Manager) archiveDir() string { return path.Join(m.o.Workspace, ".conch", "terminals") }
func (m *Manager) tmuxArgs() []string {
	return []string{"tmux", "-u", "-S", m.o.Socket, "-f", m.confPath()}
}
func sessionName(n int) string         { return "tty_" + strconv.Itoa(n) }
func (m *Manager) programPath() string { return path.Join(m.o.RunDir, "run-program.sh") }

// ensureSetup writes the runtime files into the sandbox once per Manager.
func (m *Manager) ensureSetup(ctx context.Context) error {
	m.setupMu.Lock()
	defer m.setupMu.Unlock()
	if m.setup {
		return nil
	}
	res, err := m.sb.Exec(ctx, conch.ExecRequest{Argv: []string{"mkdir", "-p", m.o.RunDir, m.archiveDir()}, Dir: m.o.Workspace, Timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("terminal setup: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("terminal setup: mkdir exited %d: %s", res.ExitCode, res.Output)
	}
	files := []struct {
		path string
		data string
		mode uint32
	}{
		{m.confPath(), tmuxConf, 0o644},
		{m.rcPath(), bashRC, 0o644},
		{m.programPath(), programScript, 0o644},
		{m.hookPath(), turnEndScript(m.o.RunDir), 0o755},
	}
	for _, f := range files {
		if err := m.sb.WriteFile(ctx, f.path, []byte(f.data), fsMode(f.mode)); err != nil {
			return fmt.Errorf("terminal setup: %w", err)
		}
	}
	m.setup = true
	return nil
}

// startArgv returns what a TTY runs: conch's shell, or command under a
// wrapper that reports its exit.
func (m *Manager) startArgv(command string) (argv string, env []string) {
	if command == "" {
		return "exec bash --rcfile " + shellQuote(m.rcPath()) + " -i", nil
	}
	return "exec bash --noprofile --norc " + shellQuote(m.programPath()), []string{"CONCH_TTY_CMD=" + command}
}

// OpenResult tells what Open started.
type OpenResult struct {
	TTY int
	// Free is how many more TTYs can be opened.
	Free int
	// First is the terminal's first screen, already counted as seen.
	First Observation
}

// ErrNoFreeTTY is returned when every TTY number is in use.
var ErrNoFreeTTY = errors.New("no free terminal")

// Open starts a terminal running command (a shell command line; "" starts
// an interactive bash) in the workspace, waits up to Options.OpenWait for it
// to be ready, and returns its first screen.
func (m *Manager) Open(ctx context.Context, command string) (OpenResult, error) {
	if strings.ContainsAny(command, "\n\r") {
		return OpenResult{}, conch.Errorf(conch.KindInvalid, "command must be one line")
	}
	if err := m.ensureSetup(ctx); err != nil {
		return OpenResult{}, err
	}
	var t *tty
	for skip := map[int]bool{}; t == nil; {
		m.mu.Lock()
		n := -1
		for i := 0; i < m.o.MaxTTYs; i++ {
			if m.ttys[i] == nil && !skip[i] {
				n = i
				break
			}
		}
		if m.closed {
			m.mu.Unlock()
			return OpenResult{}, fmt.Errorf("open terminal: %w", errManagerClosed)
		}
		if n < 0 {
			m.mu.Unlock()
			return OpenResult{}, fmt.Errorf("open terminal: all %d in use: %w", m.o.MaxTTYs, ErrNoFreeTTY)
		}
		now := m.o.Now()
		c := &tty{n: n, name: sessionName(n), command: command, shell: command == "" && !m.o.NoMarkers, openedAt: now}
		// Starting counts as typing: Open waits for the first prompt (or
		// for the program's output to settle) like Wait does after a Type.
		c.seq, c.typeSeq, c.lastType = 1, 1, now
		c.scan.nonce = newNonce()
		m.ttys[n] = c // reserve the number
		m.mu.Unlock()

		err := m.start(ctx, c, command)
		if err == nil {
			t = c
			break
		}
		m.mu.Lock()
		delete(m.ttys, n)
		m.mu.Unlock()
		if !errors.Is(err, errDuplicateSession) {
			return OpenResult{}, fmt.Errorf("open terminal %d: %w", n, err)
		}
		// A session this Manager does not know (left without Recover):
		// take the next number.
		skip[n] = true
	}
	n := t.n
	wctx, cancel := context.WithTimeout(ctx, m.o.OpenWait)
	m.waitReady(wctx, []*tty{t}, false)
	cancel()
	obs, err := m.observe(ctx, t)
	if err != nil {
		return OpenResult{}, fmt.Errorf("open terminal %d: %w", n, err)
	}
	if obs.State != StateExited {
		obs.State = StateOpened
	}
	m.mu.Lock()
	free := m.o.MaxTTYs - len(m.ttys)
	m.mu.Unlock()
	return OpenResult{TTY: n, Free: free, First: obs}, nil
}

// start creates the tmux session of t with a control client attached.
func (m *Manager) start(ctx context.Context, t *tty, command string) error {
	shellCmd, extraEnv := m.startArgv(command)
	if command == "" && m.o.NoMarkers {
		shellCmd = "exec bash --norc -i"
	}
	args := append(m.tmuxArgs(), "-C", "new-session", "-s", t.name,
		"-x", strconv.Itoa(m.o.Width), "-y", strconv.Itoa(m.o.Height), "-c", m.o.Workspace)
	args = append(args, "-e", "CONCH_NONCE="+t.scan.nonce)
	for _, e := range extraEnv {
		args = append(args, "-e", e)
	}
	args = append(args, shellCmd)
	cc, err := startControl(ctx, m.sb, m.env(), m.o.Workspace, args, &ttyEvents{m: m, t: t})
	if err != nil {
		return err
	}
	m.mu.Lock()
	t.cc = cc
	m.mu.Unlock()
	err = m.resolvePane(ctx, t)
	if err == nil {
		err = m.saveRecord(ctx, t)
	}
	if err != nil {
		// Leave nothing behind: neither the control client nor the session
		// (a later Open would find the number taken).
		cc.close()
		m.killSession(context.WithoutCancel(ctx), t.name)
		m.mu.Lock()
		t.cc = nil
		m.mu.Unlock()
	}
	return err
}

// attach attaches a control client to an existing session.
func (m *Manager) attach(ctx context.Context, t *tty) error {
	args := append(m.tmuxArgs(), "-C", "attach-session", "-t", t.name)
	cc, err := startControl(ctx, m.sb, m.env(), m.o.Workspace, args, &ttyEvents{m: m, t: t})
	if err != nil {
		return err
	}
	m.mu.Lock()
	t.cc = cc
	t.ended = false
	// Events may have been missed while no client was attached: the
	// shell's state is unknown until its next marker, and the next Wait
	// lets the terminal settle as if it had just been typed into.
	t.busy = false
	t.seq++
	t.typeSeq, t.lastType = t.seq, m.o.Now()
	m.mu.Unlock()
	return m.resolvePane(ctx, t)
}

// deadSubscription names the format each control client subscribes to
// (refresh-client -B): whether its session's pane is dead. tmux checks it
// every second, so a pane's death is pushed even when nothing else tells:
// the "[dead]" rename comes only if the pane printed after tmux last
// looked at the window's name, and the exit marker can be dropped with a
// dead pane's output.
const deadSubscription = "conch-dead"

func (m *Manager) resolvePane(ctx context.Context, t *tty) error {
	lines, err := t.cc.command(ctx, "display-message -p -t "+quote(t.name)+" '#{pane_id} #{window_id}'")
	if err != nil {
		return err
	}
	// A tmux older than 3.2 has no subscriptions: deaths then come by the
	// rename only.
	if _, err := t.cc.command(ctx, "refresh-client -B "+quote(deadSubscription+"::#{pane_dead}")); err != nil {
		m.o.Logger.Warn("terminal: subscribe to the pane's death", "tty", t.n, "err", err)
	}
	if len(lines) == 0 {
		return errors.New("tmux: no pane")
	}
	f := strings.Fields(lines[0])
	m.mu.Lock()
	t.pane = f[0]
	if len(f) > 1 {
		t.window = f[1]
	}
	m.mu.Unlock()
	return nil
}

func (m *Manager) saveRecord(ctx context.Context, t *tty) error {
	m.mu.Lock()
	rec := Record{TTY: t.n, Session: t.name, Command: t.command, Shell: t.shell, Nonce: t.scan.nonce, OpenedAt: t.openedAt,
		Mark: t.mark, Seen: slices.Clone(t.seen), Observed: t.typeSeq <= t.obsSeq}
	m.mu.Unlock()
	if t.n == CodeTTY {
		rec.Command = t.profile
	}
	if err := m.reg.SaveTerminal(ctx, m.o.Scope, rec); err != nil {
		return fmt.Errorf("save terminal %d: %w", t.n, err)
	}
	return nil
}

// client returns t's control client, attaching again when the stream
// broke while the session lives on.
func (m *Manager) client(ctx context.Context, t *tty) (*control, error) {
	m.mu.Lock()
	cc, ended := t.cc, t.ended
	m.mu.Unlock()
	if cc != nil && !ended {
		return cc, nil
	}
	if err := m.attach(ctx, t); err != nil {
		return nil, fmt.Errorf("terminal %d: reattach: %w", t.n, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return t.cc, nil
}

// Close ends terminal n, archiving its scrollback in the workspace; it
// returns the archive's path.
func (m *Manager) Close(ctx context.Context, n int) (string, error) {
	m.mu.Lock()
	t := m.ttys[n]
	m.mu.Unlock()
	if t == nil {
		return "", conch.Errorf(conch.KindNotFound, "terminal %d is not open", n)
	}
	return m.closeTTY(ctx, t)
}

func (m *Manager) closeTTY(ctx context.Context, t *tty) (string, error) {
	t.opMu.Lock()
	defer t.opMu.Unlock()
	archive := path.Join(m.archiveDir(), fmt.Sprintf("%s-%s.log", t.name, m.o.Now().UTC().Format("20060102T150405.000Z")))
	if cc, err := m.client(ctx, t); err == nil {
		buf := "conch-archive-" + t.name
		_, aerr := cc.command(ctx, fmt.Sprintf("capture-pane -t %s -S - -E - -b %s", quote(t.pane), quote(buf)),
			fmt.Sprintf("save-buffer -b %s %s", quote(buf), quote(archive)),
			"delete-buffer -b "+quote(buf))
		if aerr != nil {
			m.o.Logger.Warn("terminal: archive scrollback", "tty", t.n, "err", aerr)
			archive = ""
		}
		_, _ = cc.command(ctx, "kill-session -t "+quote(t.name))
		cc.close()
	} else {
		archive = ""
		m.killSession(ctx, t.name)
	}
	m.mu.Lock()
	if m.ttys[t.n] == t {
		delete(m.ttys, t.n)
	}
	m.notifyLocked()
	m.mu.Unlock()
	if err := m.reg.DeleteTerminal(ctx, m.o.Scope, t.n); err != nil {
		return archive, fmt.Errorf("close terminal %d: %w", t.n, err)
	}
	return archive, nil
}

func (m *Manager) killSession(ctx context.Context, name string) {
	_, _ = m.sb.Exec(ctx, conch.ExecRequest{Argv: append(m.tmuxArgs(), "kill-session", "-t", name), Env: m.env(), Dir: m.o.Workspace, Timeout: 10 * time.Second})
}

// List returns the open terminal numbers.
func (m *Manager) List() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for _, t := range m.sortedLocked() {
		out = append(out, t.n)
	}
	return out
}

func (m *Manager) sortedLocked() []*tty {
	out := make([]*tty, 0, len(m.ttys))
	for _, t := range m.ttys {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *tty) int { return a.n - b.n })
	return out
}

// Detach drops the control clients and leaves every terminal running in
// the sandbox, as a stopping conch does.
func (m *Manager) Detach() {
	m.mu.Lock()
	m.closed = true
	var ccs []*control
	for _, t := range m.ttys {
		if t.cc != nil {
			ccs = append(ccs, t.cc)
		}
	}
	if m.agent != nil && m.agent.cc != nil {
		ccs = append(ccs, m.agent.cc)
	}
	m.notifyLocked()
	m.mu.Unlock()
	for _, cc := range ccs {
		cc.close()
	}
}
