package terminal

import (
	"context"
	"fmt"
	"time"

	"conch"
)

// agentSession is the tmux session of the coding agent.
const agentSession = "code"

// Snapshot is the event state of an AgentSession at one moment.
type Snapshot struct {
	// Seq counts events (output, markers, input); it grows on every change.
	Seq uint64
	// TurnSeq is the Seq of the last turn-end marker (a CLI's hook ran).
	TurnSeq uint64
	// ReadySeq is the Seq of the last session-start marker (a CLI's
	// ReadyHook ran).
	ReadySeq uint64
	// PasteOn is set while the pane's program has bracketed paste on;
	// PasteSeq is the Seq when it last switched it on. A TUI does so when
	// its input is ready, so a PasteSeq after the CLI started is a signal
	// that it takes input (conch's shell switches it off when it runs a
	// command).
	PasteOn  bool
	PasteSeq uint64
	// DoneSeq is the Seq of the last prompt of conch's shell.
	DoneSeq uint64
	// Status is the exit status of the last command (or of the pane).
	Status int
	// Dead is set when the pane's program ended.
	Dead bool
	// Ended is set when the control client's stream ended (it attaches
	// again on the next command).
	Ended bool
	// LastOutput is when output last came.
	LastOutput time.Time
}

// AgentSession is the coding agent's terminal as a program drives it
// (terminal/coder): conch's shell, with its markers, in its own tmux
// session ("code"), apart from the numbered TTYs the model types into.
type AgentSession struct {
	m *Manager
	t *tty
}

// AgentSession returns the Manager's coding-agent session: the one in use,
// one a previous conch left in the sandbox (attached again), or, with
// create, a new one whose first prompt has been awaited. label names the
// agent in the registry. Without create and without a session it returns
// nil, nil.
func (m *Manager) AgentSession(ctx context.Context, label string, create bool) (*AgentSession, error) {
	m.agentMu.Lock()
	defer m.agentMu.Unlock()
	m.mu.Lock()
	t, closed := m.agent, m.closed
	m.mu.Unlock()
	if closed {
		return nil, errManagerClosed
	}
	if t != nil {
		return &AgentSession{m: m, t: t}, nil
	}
	t, err := m.findAgent(ctx, label)
	if err == nil && t == nil && create {
		t, err = m.startAgent(ctx, label)
	}
	if err != nil || t == nil {
		return nil, err
	}
	m.mu.Lock()
	m.agent = t
	m.mu.Unlock()
	return &AgentSession{m: m, t: t}, nil
}

func (m *Manager) startAgent(ctx context.Context, label string) (*tty, error) {
	now := m.o.Now()
	t := &tty{n: CodeTTY, name: agentSession, shell: true, profile: label, openedAt: now}
	t.seq, t.typeSeq, t.lastType = 1, 1, now
	t.scan.nonce = newNonce()
	if err := m.start(ctx, t, ""); err != nil {
		return nil, fmt.Errorf("coding agent: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, m.o.OpenWait)
	m.waitReady(wctx, []*tty{t}, false)
	cancel()
	return t, nil
}

// findAgent attaches to the agent session of a previous conch, if any.
func (m *Manager) findAgent(ctx context.Context, label string) (*tty, error) {
	if err := m.ensureSetup(ctx); err != nil {
		return nil, err
	}
	res, err := m.sb.Exec(ctx, conch.ExecRequest{
		Argv: append(m.tmuxArgs(), "has-session", "-t", agentSession),
		Env:  m.env(), Dir: m.o.Workspace, Timeout: 30 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("coding agent: %w", err)
	}
	if res.ExitCode != 0 {
		return nil, nil
	}
	t := &tty{n: CodeTTY, name: agentSession, shell: true, profile: label, openedAt: m.o.Now(), mark: -1}
	recs, err := m.reg.LoadTerminals(ctx, m.o.Scope)
	if err != nil {
		return nil, fmt.Errorf("coding agent: %w", err)
	}
	for _, r := range recs {
		if r.TTY == CodeTTY {
			t.scan.nonce, t.openedAt = r.Nonce, r.OpenedAt
		}
	}
	if err := m.attach(ctx, t); err != nil {
		return nil, fmt.Errorf("coding agent: %w", err)
	}
	return t, nil
}

// Workspace is the directory the session starts in.
func (s *AgentSession) Workspace() string { return s.m.o.Workspace }

// RunDir is conch's private runtime directory in the sandbox.
func (s *AgentSession) RunDir() string { return s.m.o.RunDir }

// Hook returns the shell command line a CLI's turn-end hook runs: it
// records the turn in RunDir/turn-<name> and tells the session at once
// (Snapshot.TurnSeq).
func (s *AgentSession) Hook(name string) string {
	return "sh " + shellQuote(s.m.hookPath()) + " " + shellQuote(name) + " " + s.t.scan.nonce
}

// ReadyHook returns the shell command line a CLI's session-start hook
// runs: it tells the session that the CLI started (Snapshot.ReadySeq).
func (s *AgentSession) ReadyHook(name string) string {
	return s.Hook(name) + " ready"
}

// Run types line into the shell and presses Enter, counted as typing. It
// returns the Seq before: a Snapshot.DoneSeq above it means the shell's
// prompt came back, so the command ended.
func (s *AgentSession) Run(ctx context.Context, line string) (uint64, error) {
	m, t := s.m, s.t
	m.mu.Lock()
	before := t.seq
	t.seq++
	t.typeSeq = t.seq
	m.mu.Unlock()
	cmds := append(typeCommands(t.pane, line), "send-keys -t "+quote(t.pane)+" Enter")
	return before, m.send(ctx, t, cmds...)
}

// Type types text literally.
func (s *AgentSession) Type(ctx context.Context, text string) error {
	return s.m.send(ctx, s.t, typeCommands(s.t.pane, text)...)
}

// Paste sends text as one bracketed paste.
func (s *AgentSession) Paste(ctx context.Context, text string) error {
	return s.m.send(ctx, s.t, pasteCommands(s.t.pane, text)...)
}

// Keys sends tmux key names (Enter, C-c, …).
func (s *AgentSession) Keys(ctx context.Context, keys ...string) error {
	cmds := make([]string, len(keys))
	for i, k := range keys {
		cmds[i] = "send-keys -t " + quote(s.t.pane) + " " + quote(k)
	}
	return s.m.send(ctx, s.t, cmds...)
}

// Screen returns the visible screen, trailing blank lines dropped.
func (s *AgentSession) Screen(ctx context.Context) ([]string, error) {
	return s.m.screen(ctx, s.t)
}

// Observe returns the lines new since the last Observe, whole, and makes
// them seen.
func (s *AgentSession) Observe(ctx context.Context) ([]string, error) {
	_, lines, err := s.m.observeLines(ctx, s.t)
	return lines, err
}

// Command returns the foreground program (tmux pane_current_command).
func (s *AgentSession) Command(ctx context.Context) (string, error) {
	cc, err := s.m.client(ctx, s.t)
	if err != nil {
		return "", err
	}
	return s.m.currentCommand(ctx, cc, s.t)
}

// Snapshot returns the session's event state and a channel closed at the
// next change.
func (s *AgentSession) Snapshot() (Snapshot, <-chan struct{}) {
	m, t := s.m, s.t
	m.mu.Lock()
	defer m.mu.Unlock()
	sn := Snapshot{Seq: t.seq, TurnSeq: t.turnSeq, ReadySeq: t.readySeq, PasteOn: t.pasteOn, PasteSeq: t.pasteSeq, DoneSeq: t.doneSeq, Status: t.status, Dead: t.dead, Ended: t.ended, LastOutput: t.lastOutput}
	if t.exited {
		sn.Dead, sn.Status = true, t.exitCode
	}
	return sn, m.changed
}

// Now is the Manager's clock.
func (s *AgentSession) Now() time.Time { return s.m.o.Now() }

// Keep returns the value the Manager keeps under key, made by mk on first
// use. A driver built on the Manager's sessions (the coding agent) keeps
// its state here, so that it lives and ends with the conversation's
// terminals. key should be of a type private to the caller.
func (m *Manager) Keep(key any, mk func() any) any {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.kept[key]; ok {
		return v
	}
	v := mk()
	m.kept[key] = v
	return v
}
