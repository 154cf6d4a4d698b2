package terminal

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"conch"
)

// Watches (schedule/) wait on a terminal through AwaitExit and AwaitOutput:
// both are driven by the pushed output and the shell's exit markers, so a
// waiting watch costs nothing until the terminal does something.

// ExitInfo is how a terminal's command ended.
type ExitInfo struct {
	// Code is the exit status; Known is false when conch could not see it
	// (the command ended while no client was attached, or the pane died
	// and tmux did not tell how).
	Code  int
	Known bool
	// Signal, when Known, is the signal that killed the terminal's program
	// (tmux's name for it); Code is then 0.
	Signal string
	// Closed is set when the terminal itself is gone.
	Closed bool
}

// Busy reports whether terminal n is running a command: for a shell, a
// command was typed or started and its prompt has not come back; for a
// program, it has not exited.
func (m *Manager) Busy(n int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.ttys[n]
	if t == nil {
		return false, conch.Errorf(conch.KindNotFound, "terminal %d is not open", n)
	}
	return m.busyLocked(t), nil
}

func (m *Manager) busyLocked(t *tty) bool {
	if t.exited || t.dead {
		return false
	}
	if t.shell {
		return t.busy || t.typeSeq > t.doneSeq
	}
	return true
}

// AwaitExit blocks until no command runs in terminal n (the shell's
// prompt is back, or the terminal's program exited) and says how the last
// one ended; if none was running when it was called, that is at once. With
// recovered set (a wait resumed after conch restarted, when markers may
// have been missed) a shell whose foreground program is the shell itself
// counts as done, with an unknown status.
func (m *Manager) AwaitExit(ctx context.Context, n int, recovered bool) (ExitInfo, error) {
	m.mu.Lock()
	t := m.ttys[n]
	if t == nil {
		m.mu.Unlock()
		return ExitInfo{Closed: true}, nil
	}
	startDone := t.doneSeq
	if !m.busyLocked(t) && !recovered {
		// It ended between the watch being set and this wait.
		info := ExitInfo{Code: t.status, Known: t.shell && t.doneSeq > 0}
		if t.exited {
			info = ExitInfo{Code: t.exitCode, Known: true}
		}
		dead := t.dead && !t.exited
		m.mu.Unlock()
		if dead {
			// The pane died without its exit marker (tmux drops a dead
			// pane's last output): the last prompt's status is not its.
			return m.deadExit(ctx, t)
		}
		return info, nil
	}
	m.mu.Unlock()
	if recovered && t.shell {
		if cc, err := m.client(ctx, t); err == nil {
			if cur, err := m.currentCommand(ctx, cc, t); err == nil && cur == "bash" {
				m.mu.Lock()
				done := !t.busy
				m.mu.Unlock()
				if done {
					return ExitInfo{}, nil
				}
			}
		}
	}
	for {
		m.mu.Lock()
		ch := m.changed
		switch {
		case m.ttys[n] != t:
			m.mu.Unlock()
			return ExitInfo{Closed: true}, nil
		case t.exited:
			m.mu.Unlock()
			return ExitInfo{Code: t.exitCode, Known: true}, nil
		case t.dead:
			m.mu.Unlock()
			return m.deadExit(ctx, t)
		case t.shell && t.doneSeq > startDone && !t.busy:
			m.mu.Unlock()
			return ExitInfo{Code: t.status, Known: true}, nil
		case m.closed:
			m.mu.Unlock()
			return ExitInfo{}, fmt.Errorf("terminal %d: %w", n, errManagerClosed)
		}
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ExitInfo{}, ctx.Err()
		}
	}
}

// AwaitOutput blocks until a line of new output of terminal n (escape
// sequences removed) matches re, and returns that line. Output from before
// the call does not count.
func (m *Manager) AwaitOutput(ctx context.Context, n int, re *regexp.Regexp) (string, error) {
	f := &follower{re: re, found: make(chan string, 1)}
	m.mu.Lock()
	t := m.ttys[n]
	if t == nil {
		m.mu.Unlock()
		return "", conch.Errorf(conch.KindNotFound, "terminal %d is not open", n)
	}
	if t.followers == nil {
		t.followers = map[*follower]struct{}{}
	}
	t.followers[f] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(t.followers, f)
		m.mu.Unlock()
	}()
	for {
		m.mu.Lock()
		ch := m.changed
		gone, closed := m.ttys[n] != t, m.closed
		m.mu.Unlock()
		select {
		case line := <-f.found:
			return line, nil
		default:
		}
		switch {
		case gone:
			return "", conch.Errorf(conch.KindNotFound, "terminal %d was closed", n)
		case closed:
			return "", fmt.Errorf("terminal %d: %w", n, errManagerClosed)
		}
		select {
		case line := <-f.found:
			return line, nil
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// IsDetached reports whether err came from a Manager that was detached (the
// conversation was released or its sandbox replaced): ask the Provider for
// the current Manager and wait again.
func IsDetached(err error) bool { return errors.Is(err, errManagerClosed) }

// follower matches pushed output line by line. Its methods run under
// Manager.mu.
type follower struct {
	re    *regexp.Regexp
	line  []byte
	found chan string
	done  bool
}

// maxFollowLine bounds the partial line a follower keeps.
const maxFollowLine = 8 << 10

func (f *follower) feedLocked(data []byte) {
	if f.done {
		return
	}
	for _, b := range stripEscapes(data) {
		if b == '\n' || b == '\r' {
			f.checkLocked()
			f.line = f.line[:0]
			continue
		}
		if len(f.line) < maxFollowLine {
			f.line = append(f.line, b)
		}
	}
	// A prompt or a progress line may never end with a newline.
	f.checkLocked()
}

func (f *follower) checkLocked() {
	if f.done || len(f.line) == 0 {
		return
	}
	if s := strings.TrimSpace(string(f.line)); f.re.MatchString(s) {
		f.done = true
		f.found <- s
	}
}

// stripEscapes removes ANSI escape sequences (CSI, OSC, and two-byte ESC
// sequences) from terminal output. Good enough for matching text.
func stripEscapes(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != 0x1b {
			if c >= 0x20 || c == '\n' || c == '\r' || c == '\t' {
				out = append(out, c)
			}
			continue
		}
		if i+1 >= len(b) {
			break
		}
		switch b[i+1] {
		case '[': // CSI: parameters, then a final byte 0x40–0x7e
			i += 2
			for i < len(b) && (b[i] < 0x40 || b[i] > 0x7e) {
				i++
			}
		case ']', 'P', '_', '^': // OSC/DCS/APC/PM: up to BEL or ESC \
			i += 2
			for i < len(b) && b[i] != 0x07 && !(b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\') {
				i++
			}
			if i < len(b) && b[i] == 0x1b {
				i++
			}
		default:
			i++
		}
	}
	return out
}
