package terminal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"conch/internal/backoff"
)

// State is what an observation found a terminal doing.
type State string

// States.
const (
	// StateOpened: the terminal was just opened; its first screen.
	StateOpened State = "opened"
	// StateDone: the shell's prompt is back; Exit and Cwd are known.
	StateDone State = "done"
	// StateRunning: a command is still running (quiet, or the wait ended).
	StateRunning State = "running"
	// StateQuiet: no marker to go by; the output settled.
	StateQuiet State = "quiet"
	// StateBusy: still producing output when the wait ended.
	StateBusy State = "busy"
	// StateNoChange: nothing new since the last observation.
	StateNoChange State = "no_change"
	// StateExited: the program ended; the terminal has been closed.
	StateExited State = "exited"
	// StateGone: the terminal vanished (killed outside conch).
	StateGone State = "gone"
)

// Observation is what the model learns about one terminal.
type Observation struct {
	TTY int
	// Command is the foreground program (tmux pane_current_command).
	Command string
	State   State
	// Exit is the exit status for StateDone and StateExited.
	Exit int
	// ExitUnknown is set for StateExited when the pane died but neither the
	// shell's exit marker nor tmux's pane_dead_status arrived in time: the
	// status is reported as unknown rather than as 0.
	ExitUnknown bool
	// Signal, for StateExited, is the signal that killed the program, as
	// tmux names it (pane_dead_signal: a number on Linux); Exit is then 0.
	Signal string
	// Cwd is the shell's working directory for StateDone.
	Cwd string
	// New is the number of new lines; Text shows them, long runs elided.
	New  int
	Text string
	// Archive is where the scrollback was saved when the terminal closed.
	Archive string
}

// WaitResult is the outcome of Wait: one observation per open terminal.
type WaitResult struct {
	TTYs []Observation
	// TimedOut is set when the wait ended before every terminal was done.
	TimedOut bool
	Elapsed  time.Duration
	// Notices are things to tell once, such as terminals lost to a
	// sandbox restart.
	Notices []string
}

// Wait blocks until every terminal is done (a shell's prompt came back
// after the last Type, a program exited, or the output has been quiet for
// Options.Settle), at most timeout (0 or more than Options.MaxWait means
// MaxWait), then observes every terminal: what is new since the last
// observation. A dead terminal is reported once and then closed. When no
// terminal has anything pending, Wait gives a just-sent keystroke up to
// Settle to show up.
func (m *Manager) Wait(ctx context.Context, timeout time.Duration) (WaitResult, error) {
	if timeout <= 0 || timeout > m.o.MaxWait {
		timeout = m.o.MaxWait
	}
	begin := m.o.Now()
	m.mu.Lock()
	ts := m.sortedLocked()
	notices := m.notices
	m.notices = nil
	m.mu.Unlock()
	if len(ts) == 0 {
		return WaitResult{Notices: notices}, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	ready := m.waitReady(wctx, ts, true)
	cancel()
	if err := ctx.Err(); err != nil {
		return WaitResult{}, err
	}
	res := WaitResult{TimedOut: !ready, Notices: notices}
	for _, t := range ts {
		obs, err := m.observe(ctx, t)
		if err != nil {
			return res, err
		}
		res.TTYs = append(res.TTYs, obs)
	}
	res.Elapsed = m.o.Now().Sub(begin)
	return res, nil
}

// waitReady waits until every terminal of ts is ready or ctx ends; it
// reports whether they all were. With grace, terminals with nothing pending
// get up to Settle for activity to begin.
func (m *Manager) waitReady(ctx context.Context, ts []*tty, grace bool) bool {
	begin := m.o.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		m.mu.Lock()
		now := m.o.Now()
		all, active := true, false
		var next time.Time
		// When something was typed, its terminals decide: output that
		// keeps coming elsewhere (a log being followed) does not hold the
		// answer back. Otherwise every terminal with news must settle.
		typed := false
		for _, t := range ts {
			typed = typed || t.typeSeq > t.obsSeq
		}
		for _, t := range ts {
			r, at, act := m.readyLocked(t, now)
			active = active || act
			if typed && t.typeSeq <= t.obsSeq && !t.exited && !t.dead {
				continue
			}
			if !r {
				all = false
				if !at.IsZero() && (next.IsZero() || at.Before(next)) {
					next = at
				}
			}
		}
		ch := m.changed
		m.mu.Unlock()
		if all {
			if !grace || active || now.Sub(begin) >= m.o.Settle {
				return true
			}
			next = begin.Add(m.o.Settle)
		}
		var tc <-chan time.Time
		if !next.IsZero() {
			timer.Reset(max(next.Sub(now), time.Millisecond))
			tc = timer.C
		}
		select {
		case <-ch:
		case <-tc:
		case <-ctx.Done():
			return false
		}
	}
}

// readyLocked tells whether t is done, when to look again if not, and
// whether anything happened on it since the last observation.
func (m *Manager) readyLocked(t *tty, now time.Time) (ready bool, recheck time.Time, active bool) {
	if t.exited || t.dead || t.ended {
		return true, time.Time{}, true
	}
	pending := t.typeSeq > t.obsSeq
	if !t.unseen && !pending {
		return true, time.Time{}, false
	}
	if t.doneLocked() {
		return true, time.Time{}, true
	}
	quiet := t.lastOutput
	if t.lastType.After(quiet) {
		quiet = t.lastType
	}
	if now.Sub(quiet) >= m.o.Settle {
		return true, time.Time{}, true
	}
	return false, quiet.Add(m.o.Settle), true
}

// paneInfo is what display-message tells about a pane.
type paneInfo struct {
	hist, height int
	dead         bool
	deadStatus   int
	statusKnown  bool   // deadStatus was reported
	deadSignal   string // the signal that killed the pane's process
	current      string
}

const paneInfoFormat = "'#{history_size} #{pane_height} #{pane_dead} #{?pane_dead_status,#{pane_dead_status},-} #{?pane_dead_signal,#{pane_dead_signal},-} #{pane_current_command}'"

func parsePaneInfo(lines []string) (paneInfo, error) {
	if len(lines) == 0 {
		return paneInfo{}, errors.New("tmux: empty pane info")
	}
	f := strings.SplitN(lines[len(lines)-1], " ", 6)
	if len(f) < 5 {
		return paneInfo{}, fmt.Errorf("tmux: bad pane info %q", lines[len(lines)-1])
	}
	var p paneInfo
	var err error
	if p.hist, err = strconv.Atoi(f[0]); err != nil {
		return p, fmt.Errorf("tmux: bad pane info %q", lines[0])
	}
	if p.height, err = strconv.Atoi(f[1]); err != nil {
		return p, fmt.Errorf("tmux: bad pane info %q", lines[0])
	}
	p.dead = f[2] == "1"
	p.deadStatus, _ = strconv.Atoi(f[3])
	p.statusKnown = f[3] != "-"
	if f[4] != "-" {
		p.deadSignal = f[4]
	}
	if len(f) == 6 {
		p.current = f[5]
	}
	return p, nil
}

// How long conch looks for the exit status of a dead pane: exitTries
// looks, exitPoll apart, asking tmux to reap every reapEvery (see
// observeLines).
const (
	exitTries = 600
	exitPoll  = 25 * time.Millisecond
	reapEvery = 40
)

// deadExit tells how the program of t's dead pane ended: by its exit
// marker if that came after all, else by what tmux recorded. Like
// observeLines it has tmux reap, within the same bound. A terminal closed
// meanwhile (an observation reported its end) is Closed; a pane that went
// otherwise ends with an unknown status.
func (m *Manager) deadExit(ctx context.Context, t *tty) (ExitInfo, error) {
	for tries := 0; tries < exitTries; tries++ {
		m.mu.Lock()
		exited, code := t.exited, t.exitCode
		m.mu.Unlock()
		if exited {
			return ExitInfo{Code: code, Known: true}, nil
		}
		info, err := m.paneInfo(ctx, t)
		switch {
		case err != nil:
			m.mu.Lock()
			closed := m.ttys[t.n] != t
			m.mu.Unlock()
			return ExitInfo{Closed: closed}, nil
		case info.dead && info.statusKnown:
			return ExitInfo{Code: info.deadStatus, Known: true}, nil
		case info.dead && info.deadSignal != "":
			return ExitInfo{Signal: info.deadSignal, Known: true}, nil
		case info.dead && tries%reapEvery == 0:
			m.reap(ctx, t)
		}
		if err := backoff.Sleep(ctx, exitPoll); err != nil {
			return ExitInfo{}, err
		}
	}
	return ExitInfo{}, nil
}

// paneInfo asks tmux about t's pane.
func (m *Manager) paneInfo(ctx context.Context, t *tty) (paneInfo, error) {
	t.opMu.Lock()
	defer t.opMu.Unlock()
	cc, err := m.client(ctx, t)
	if err != nil {
		return paneInfo{}, err
	}
	lines, err := cc.command(ctx, "display-message -p -t "+quote(t.pane)+" "+paneInfoFormat)
	if err != nil {
		return paneInfo{}, fmt.Errorf("terminal %d: %w", t.n, err)
	}
	return parsePaneInfo(lines)
}

// exitPending reports whether t's program ended but its status is not known yet.
func (m *Manager) exitPending(t *tty, info paneInfo) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return (t.dead || info.dead) && !t.exited && !(info.dead && (info.statusKnown || info.deadSignal != ""))
}

// observe captures what is new on t since its last observation and makes
// it seen. A terminal whose program ended is reported and closed.
func (m *Manager) observe(ctx context.Context, t *tty) (Observation, error) {
	obs, fresh, err := m.observeLines(ctx, t)
	if err != nil || obs.State == StateGone {
		return obs, err
	}
	obs.Text = Elide(fresh, m.o.InlineLines, m.o.HeadLines, m.o.TailLines)
	if obs.State == StateExited && t.n != CodeTTY {
		archive, err := m.closeTTY(ctx, t)
		if err != nil {
			return obs, err
		}
		obs.Archive = archive
		return obs, nil
	}
	return obs, m.saveRecord(ctx, t)
}

// observeLines captures what is new on t and makes it seen; it returns the
// new lines whole.
func (m *Manager) observeLines(ctx context.Context, t *tty) (Observation, []string, error) {
	obs := Observation{TTY: t.n}
	lines, info, startAbs, err := m.capture(ctx, t)
	// A pane known to be dead whose exit status has not arrived (neither
	// the shell's exit marker nor tmux's pane_dead_status): look again
	// rather than report exit 0. Both can be missing for good, not late:
	// tmux drops a dead pane's output still queued for control clients
	// (the marker goes with it), and tmux before 3.6 built with utempter
	// (Debian's) loses the SIGCHLD of a pane whose process exits while
	// utempter_remove_record runs as the pane's terminal closes, so the
	// process stays a zombie and the status unknown until some other child
	// of the server exits (tmux issue 4559). Hence reap: it has tmux
	// send itself a SIGCHLD, as tmux 3.6 does after utempter, and tmux
	// reaps the zombie. The bound covers a process that closed its
	// terminal but has not exited yet.
	for tries := 0; err == nil && tries < exitTries && m.exitPending(t, info); tries++ {
		if info.dead && tries%reapEvery == 0 {
			m.reap(ctx, t)
		}
		if err = backoff.Sleep(ctx, exitPoll); err == nil {
			lines, info, startAbs, err = m.capture(ctx, t)
		}
	}
	unknown := err == nil && m.exitPending(t, info)
	if err != nil {
		if errors.Is(err, errSessionGone) {
			obs.State = StateGone
			m.forget(ctx, t)
			return obs, nil, nil
		}
		return obs, nil, err
	}
	m.mu.Lock()
	fresh := freshLocked(t, lines, startAbs)
	screen := lines
	if len(screen) > info.height {
		screen = screen[len(screen)-info.height:]
	}
	t.mark = info.hist
	t.seen = TrimBlankTail(slices.Clone(screen))
	obs.Command = info.current
	t.current = info.current
	exited, dead := t.exited, t.dead || info.dead
	exitCode, signal := t.exitCode, ""
	if !t.exited && info.dead {
		exitCode, signal = info.deadStatus, info.deadSignal
	}
	switch {
	case exited || dead:
		obs.State, obs.Exit, obs.ExitUnknown, obs.Signal = StateExited, exitCode, unknown, signal
	case len(fresh) == 0 && (t.typeSeq <= t.obsSeq || t.recovered) && !t.busy:
		obs.State = StateNoChange
	case t.doneLocked():
		obs.State, obs.Exit, obs.Cwd = StateDone, t.status, t.cwd
	case t.busy:
		obs.State = StateRunning
	case m.o.Now().Sub(t.lastOutput) < m.o.Settle:
		obs.State = StateBusy
	default:
		obs.State = StateQuiet
	}
	t.obsSeq = t.seq
	t.recovered = false
	m.mu.Unlock()
	obs.New = len(fresh)
	return obs, fresh, nil
}

// freshLocked returns the lines of a capture starting at absolute line
// startAbs that t's last observation did not show.
func freshLocked(t *tty, lines []string, startAbs int) []string {
	// Align what was seen with what was captured: the history may have
	// dropped lines (history-limit) or been cleared.
	seen := t.seen
	switch off := startAbs - t.mark; {
	case t.mark < 0:
		seen = nil
	case off == 0:
	case off > 0 && off < len(seen):
		seen = seen[off:]
	default:
		seen = nil
	}
	i := 0
	for i < len(lines) && i < len(seen) && lines[i] == seen[i] {
		i++
	}
	return TrimBlankTail(lines[i:])
}

// screen returns the visible screen of t, trailing blank lines dropped.
func (m *Manager) screen(ctx context.Context, t *tty) ([]string, error) {
	t.opMu.Lock()
	defer t.opMu.Unlock()
	cc, err := m.client(ctx, t)
	if err != nil {
		return nil, err
	}
	lines, err := cc.command(ctx, "capture-pane -p -t "+quote(t.pane))
	if err != nil {
		return nil, fmt.Errorf("screen of terminal %d: %w", t.n, err)
	}
	return TrimBlankTail(lines), nil
}

// reapCommand has the tmux server signal itself SIGCHLD, so that it reaps
// every child that has exited (run-shell expands #{pid}: the server's).
// -b: the control client does not wait for the job, whose own exit tmux
// might miss the same way.
const reapCommand = "run-shell -b 'kill -s CHLD #{pid}'"

// reap nudges t's tmux server to collect exited children (see
// observeLines). It is best effort: the capture that follows tells what
// became of the pane.
func (m *Manager) reap(ctx context.Context, t *tty) {
	if err := m.send(ctx, t, reapCommand); err != nil {
		m.o.Logger.Debug("terminal: ask tmux to reap", "tty", t.n, "err", err)
	}
}

// send runs tmux commands on t's control client.
func (m *Manager) send(ctx context.Context, t *tty, cmds ...string) error {
	t.opMu.Lock()
	defer t.opMu.Unlock()
	cc, err := m.client(ctx, t)
	if err != nil {
		return err
	}
	if _, err := cc.command(ctx, cmds...); err != nil {
		return fmt.Errorf("terminal %d: %w", t.n, err)
	}
	return nil
}

var errSessionGone = errors.New("tmux session gone")

// capture returns the lines from t.mark to the bottom of the screen,
// consistently with the history size it reports.
func (m *Manager) capture(ctx context.Context, t *tty) (lines []string, info paneInfo, startAbs int, err error) {
	t.opMu.Lock()
	defer t.opMu.Unlock()
	cc, err := m.client(ctx, t)
	if err != nil {
		return nil, paneInfo{}, 0, fmt.Errorf("%w: %w", errSessionGone, err)
	}
	m.mu.Lock()
	// Output from here on counts as unseen again.
	t.unseen = false
	mark := t.mark
	m.mu.Unlock()
	target := quote(t.pane)
	for attempt := 0; ; attempt++ {
		var il []string
		il, err = cc.command(ctx, "display-message -p -t "+target+" "+paneInfoFormat)
		if err != nil {
			if isNoSuchSession(err) {
				return nil, paneInfo{}, 0, fmt.Errorf("%w: %w", errSessionGone, err)
			}
			return nil, paneInfo{}, 0, fmt.Errorf("observe terminal %d: %w", t.n, err)
		}
		info, err = parsePaneInfo(il)
		if err != nil {
			return nil, info, 0, err
		}
		start := mark - info.hist
		if mark < 0 || start < -info.hist || start > 0 {
			start = -info.hist
		}
		out, err := cc.command(ctx, fmt.Sprintf("capture-pane -p -t %s -S %d -E %d", target, start, info.height-1),
			"display-message -p -t "+target+" "+paneInfoFormat)
		if err != nil {
			return nil, info, 0, fmt.Errorf("observe terminal %d: %w", t.n, err)
		}
		after, err := parsePaneInfo(out)
		if err != nil {
			return nil, info, 0, err
		}
		if after.hist == info.hist || attempt == 2 {
			return out[:len(out)-1], after, after.hist + start, nil
		}
	}
}

func isNoSuchSession(err error) bool {
	return errors.Is(err, errNoSession) || errors.Is(err, errControlClosed)
}

// forget drops a terminal that vanished.
func (m *Manager) forget(ctx context.Context, t *tty) {
	m.mu.Lock()
	if m.ttys[t.n] == t {
		delete(m.ttys, t.n)
	}
	cc := t.cc
	m.notifyLocked()
	m.mu.Unlock()
	if cc != nil {
		cc.close()
	}
	_ = m.reg.DeleteTerminal(ctx, m.o.Scope, t.n)
}

// TrimBlankTail drops trailing blank lines (a screen's unused rows).
func TrimBlankTail(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Elide shows lines whole when there are at most inline of them, else the
// first head and the last tail with the gap marked.
func Elide(lines []string, inline, head, tail int) string {
	if len(lines) <= inline {
		return strings.Join(lines, "\n")
	}
	var b strings.Builder
	b.WriteString(strings.Join(lines[:head], "\n"))
	fmt.Fprintf(&b, "\n[… %d lines not shown …]\n", len(lines)-head-tail)
	b.WriteString(strings.Join(lines[len(lines)-tail:], "\n"))
	return b.String()
}

// String renders the observation for the model.
func (o Observation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[tty %d", o.TTY)
	if o.Command != "" {
		fmt.Fprintf(&b, " · %s", o.Command)
	}
	b.WriteString("] ")
	switch o.State {
	case StateOpened:
		b.WriteString("opened")
	case StateDone:
		fmt.Fprintf(&b, "done, exit %d", o.Exit)
		if o.Cwd != "" {
			fmt.Fprintf(&b, " (cwd %s)", o.Cwd)
		}
	case StateRunning:
		b.WriteString("still running")
		if o.Text == "" {
			b.WriteString(", no new output")
		}
	case StateQuiet:
		b.WriteString("output settled")
	case StateBusy:
		b.WriteString("still producing output")
	case StateNoChange:
		b.WriteString("no new output")
	case StateExited:
		if o.Signal != "" {
			fmt.Fprintf(&b, "killed by signal %s; terminal closed", o.Signal)
		} else if o.ExitUnknown {
			b.WriteString("exited (exit status unknown); terminal closed")
		} else {
			fmt.Fprintf(&b, "exited with status %d; terminal closed", o.Exit)
		}
		if o.Archive != "" {
			fmt.Fprintf(&b, ", scrollback saved to %s", o.Archive)
		}
	case StateGone:
		b.WriteString("gone (its tmux session was ended outside conch)")
	}
	if o.Text != "" {
		b.WriteString("\n")
		b.WriteString(o.Text)
	}
	return b.String()
}

// String renders the result for the model.
func (r WaitResult) String() string {
	parts := slices.Clone(r.Notices)
	if len(r.TTYs) == 0 {
		return strings.Join(append(parts, "no terminals are open; open one with terminal_open"), "\n")
	}
	for _, o := range r.TTYs {
		parts = append(parts, o.String())
	}
	if r.TimedOut {
		parts = append(parts, fmt.Sprintf("(waited %s; not everything has finished: call terminal_wait again to keep waiting)", r.Elapsed.Round(100*time.Millisecond)))
	}
	return strings.Join(parts, "\n\n")
}
