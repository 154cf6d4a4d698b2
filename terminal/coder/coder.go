// Package coder drives a coding-agent CLI (Gemini CLI, Claude Code, Codex)
// in a terminal of the conversation's sandbox: it starts the CLI with its
// settings and turn-end hook, hands it tasks, answers its questions and
// tells when a turn ended, from the CLI's own hook confirmed by its screen.
//
// It works on a terminal only through Session, which terminal.AgentSession
// implements; For binds it to a conversation's terminal.Manager.
package coder

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"conch"
	"conch/terminal"
)

// Defaults of Options.
const (
	DefaultStartTimeout = 90 * time.Second
	DefaultTurnTimeout  = 5 * time.Minute
	DefaultIPCThreshold = 500
)

// Session is the terminal the agent runs in: conch's shell with its
// completion markers, in a tmux session of its own.
type Session interface {
	// Workspace is the project directory; RunDir conch's private one.
	Workspace() string
	RunDir() string
	// Hook is the shell command line the CLI's turn-end hook must run;
	// ReadyHook the one its session-start hook must run.
	Hook(name string) string
	ReadyHook(name string) string
	// Run types a command line and Enter into the shell; it returns the
	// Seq before, which a later Snapshot.DoneSeq exceeds once the shell's
	// prompt is back (the command ended).
	Run(ctx context.Context, line string) (uint64, error)
	// Type types text literally, Paste pastes it (bracketed), Keys sends
	// key names.
	Type(ctx context.Context, text string) error
	Paste(ctx context.Context, text string) error
	Keys(ctx context.Context, keys ...string) error
	// Screen is the visible screen; Observe the lines new since the last
	// Observe, which become seen.
	Screen(ctx context.Context) ([]string, error)
	Observe(ctx context.Context) ([]string, error)
	// Command is the foreground program.
	Command(ctx context.Context) (string, error)
	// Snapshot is the event state and a channel closed at the next change.
	Snapshot() (terminal.Snapshot, <-chan struct{})
}

// Opener gives the agent's Session: with create, a new one when there is
// none; without, nil and no error when there is none.
type Opener func(ctx context.Context, create bool) (Session, error)

// Options configures a coding-agent driver.
type Options struct {
	// StartTimeout bounds the CLI's start until its input box shows; 0
	// means DefaultStartTimeout.
	StartTimeout time.Duration
	// TurnTimeout bounds one Task or Respond call; the agent keeps working
	// after it and a later Respond("") waits on. 0 means
	// DefaultTurnTimeout.
	TurnTimeout time.Duration
	// IPCThreshold: longer tasks (and any with a line break) go through a
	// file in Workspace/.ipc with a short reference typed; 0 means 500.
	IPCThreshold int
	// Env is added to the CLI's environment (KEY=value): whatever key it
	// needs (a placeholder when Route injects the real one on the host).
	Env []string
	// APIKey is given to Profile.Files (Claude Code approves a key by its
	// last characters); it is not written anywhere else.
	APIKey string
	// Route, if set, is called before the CLI starts and whenever the
	// driver finds a CLI a previous conch left running; it returns the
	// CLI's API base URL in the sandbox (conch's credential-injecting
	// bridge, egress.Bridges.URL fits) and must be idempotent: the URL a
	// running CLI was started with must work again after a restart.
	Route func(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) (string, error)
	// Ask keeps the CLI's permission prompts (coder.approvals = ask): the
	// model answers them with Respond. By default the CLI runs in its
	// full-auto mode (Profile.AutoArgs), the container being the boundary.
	Ask bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = DefaultTurnTimeout
	}
	if o.IPCThreshold <= 0 {
		o.IPCThreshold = DefaultIPCThreshold
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// ErrNoAgent is returned by Respond when no coding agent has been started.
var ErrNoAgent = errors.New("no coding agent is running")

// AgentError is a failure of the coding-agent CLI itself (it would not
// start, or would not take input), told to the model rather than ending
// the turn.
type AgentError struct{ Msg string }

func (e *AgentError) Error() string { return e.Msg }

// Coder is the conversation's coding-agent CLI, running in its Session
// inside conch's shell. Calls are serialised.
type Coder struct {
	key  conch.ConversationKey
	sb   conch.Sandbox
	open Opener
	p    Profile
	o    Options

	mu      sync.Mutex
	s       Session
	cliSeq  uint64 // Seq when the CLI was started; a later prompt means it ended
	running bool
	// launched: the CLI was started from the shell at cliSeq, so the
	// shell prints a prompt marker when it ends.
	launched bool
	// resumeErr says why the last start could not continue the CLI's
	// session ("" when it did, or did not try).
	resumeErr string
	// files are the workspace's files when the current task began.
	files fileSet
	// answerCleared: the last turn's answer file was removed before this
	// turn's text was sent, so the one there at its end is its own.
	answerCleared bool
}

// New returns a driver of p's CLI for the conversation key, whose
// sandbox is sb and whose session open gives. The CLI starts lazily, on
// the first Task.
func New(key conch.ConversationKey, sb conch.Sandbox, open Opener, p Profile, o Options) *Coder {
	o.defaults()
	return &Coder{key: key, sb: sb, open: open, p: p, o: o}
}

type keepKey struct{ profile string }

// For returns the driver of p's CLI over m, the terminals of the
// conversation key, kept by m (one per profile) so that it lives as long
// as m.
func For(m *terminal.Manager, key conch.ConversationKey, p Profile, o Options) *Coder {
	return m.Keep(keepKey{p.Name}, func() any {
		open := func(ctx context.Context, create bool) (Session, error) {
			s, err := m.AgentSession(ctx, p.Name, create)
			if s == nil {
				return nil, err // a nil *AgentSession must not become a non-nil Session
			}
			return s, err
		}
		return New(key, m.Sandbox(), open, p, o)
	}).(*Coder)
}

// Task gives the agent a new task, starting the CLI if it is not running
// (or restarting it after a crash), and waits until the turn ends, the
// agent asks something, or TurnTimeout. progress receives what is new on
// the agent's screen, each time there is something.
func (c *Coder) Task(ctx context.Context, task string, progress func(string)) (TurnResult, error) {
	if strings.TrimSpace(task) == "" {
		return TurnResult{}, conch.Errorf(conch.KindInvalid, "the task is empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	begin := c.o.Now()
	st, err := c.ensure(ctx)
	if err != nil {
		return TurnResult{}, err
	}
	res, err := c.sendAndWait(ctx, task, true, progress)
	res.Started = res.Started || st.started
	res.Restarted = st.restarted
	res.Resumed = res.Resumed || st.resumed
	if st.restarted && !st.resumed {
		res.ResumeError = c.resumeErr
	}
	res.Elapsed = c.o.Now().Sub(begin)
	c.interruptIfStopped(ctx, err)
	return res, err
}

// Respond answers the agent's question (or, with an empty text, just waits
// for the turn to go on), then waits like Task.
func (c *Coder) Respond(ctx context.Context, text string, progress func(string)) (TurnResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	begin := c.o.Now()
	if c.s == nil {
		if err := c.reattach(ctx); err != nil {
			return TurnResult{}, err
		}
	}
	if c.s == nil || !c.running {
		return TurnResult{}, ErrNoAgent
	}
	var res TurnResult
	var err error
	if text == "" {
		res, err = c.waitTurn(ctx, c.seq(), progress)
	} else {
		res, err = c.sendAndWait(ctx, text, false, progress)
	}
	res.Elapsed = c.o.Now().Sub(begin)
	c.interruptIfStopped(ctx, err)
	return res, err
}

// interruptIfStopped stops the CLI's turn when the call ended because the
// person stopped the conversation's turn (/stop); a shutdown leaves it
// working, to be found again by the next conch.
func (c *Coder) interruptIfStopped(ctx context.Context, err error) {
	if err == nil || c.s == nil || !errors.Is(context.Cause(ctx), conch.ErrStopped) {
		return
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = c.s.Keys(ictx, c.p.interruptKeys()...)
}

func (c *Coder) seq() uint64 {
	sn, _ := c.s.Snapshot()
	return sn.Seq
}

// ensured is what ensure did.
type ensured struct {
	started   bool // the CLI was started
	restarted bool // … because it had ended since the last call
	resumed   bool // … and it continued its previous session
}

// ensure makes the CLI run: it finds a session a previous conch left,
// creates one, and (re)starts the CLI when the shell prompt is back. A CLI
// that ended since the last call continues its session when it can.
func (c *Coder) ensure(ctx context.Context) (ensured, error) {
	if c.s == nil {
		if err := c.reattach(ctx); err != nil {
			return ensured{}, err
		}
	}
	if c.s == nil {
		s, err := c.open(ctx, true)
		if err != nil {
			return ensured{}, err
		}
		c.s = s
	}
	ended := c.running && c.exited()
	if c.running && !ended {
		// A dead CLI's last screen can look ready; the pane's foreground
		// program tells.
		cur, err := c.s.Command(ctx)
		if err != nil {
			return ensured{}, fmt.Errorf("coding agent: %w", err)
		}
		if !isShell(cur) {
			return ensured{}, nil
		}
		ended = true
	}
	c.running = false
	resumed, err := c.startCLI(ctx, ended)
	if err != nil {
		return ensured{}, err
	}
	return ensured{started: true, restarted: ended, resumed: resumed}, nil
}

// isShell reports whether the pane's foreground program is conch's shell,
// that is, no CLI runs.
func isShell(cmd string) bool { return cmd == "" || cmd == "bash" || cmd == "sh" }

// reattach finds the session of a previous conch, if there is one, and
// whether the CLI still runs in it.
func (c *Coder) reattach(ctx context.Context) error {
	s, err := c.open(ctx, false)
	if err != nil || s == nil {
		return err
	}
	cur, err := s.Command(ctx)
	if err != nil {
		return fmt.Errorf("coding agent: %w", err)
	}
	c.s = s
	c.running = !isShell(cur)
	c.cliSeq, c.launched = c.seq(), c.running
	if c.running && c.o.Route != nil {
		// The route the CLI was started with died with the previous
		// conch: bring it back at the same address.
		if _, err := c.o.Route(ctx, c.key, c.sb); err != nil {
			return fmt.Errorf("coding agent: route to its API: %w", err)
		}
	}
	// What is on the screen now was shown before; start from here.
	_, err = s.Observe(ctx)
	return err
}

// exited reports whether the CLI ended: conch's shell printed its prompt
// after the CLI was started, or the pane died.
func (c *Coder) exited() bool {
	sn, _ := c.s.Snapshot()
	return sn.DoneSeq > c.cliSeq || sn.Dead
}

// redact hides the API key in text the model will read (a CLI may print
// its configuration or an error that quotes the key).
func (c *Coder) redact(text string) string {
	if len(c.o.APIKey) < 8 {
		return text
	}
	return strings.ReplaceAll(text, c.o.APIKey, "[redacted]")
}
