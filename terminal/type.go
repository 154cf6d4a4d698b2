package terminal

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"conch"
)

// ErrUnseenOutput is returned by Type while a terminal has output the model
// has not observed.
var ErrUnseenOutput = errors.New("unseen terminal output")

// TypeError is a refusal of Type the model should read.
type TypeError struct {
	Msg string
	Err error
}

func (e *TypeError) Error() string { return e.Msg }
func (e *TypeError) Unwrap() error { return e.Err }

// Type sends text to terminal n after checking that expect is what runs
// there. text is typed literally and followed by Enter when enter is true;
// a text made only of key names ("C-c", "Tab", "Enter", "Up Up Enter") is
// sent as those keys, without Enter. Type refuses while any terminal has
// unseen output or was typed into since it was last observed: observe
// (Wait) before you act. A *TypeError is a refusal
// the model should read.
func (m *Manager) Type(ctx context.Context, n int, expect, text string, enter bool) error {
	m.mu.Lock()
	t := m.ttys[n]
	var unseen []int
	for _, o := range m.sortedLocked() {
		// Typed into since the last observation: its answer is unseen
		// even if it has not arrived yet.
		if o.unseen || o.dead || o.exited || o.typeSeq > o.obsSeq {
			unseen = append(unseen, o.n)
		}
	}
	m.mu.Unlock()
	if t == nil {
		return &TypeError{Msg: fmt.Sprintf("terminal %d is not open", n), Err: conch.Errorf(conch.KindNotFound, "terminal %d is not open", n)}
	}
	if len(unseen) > 0 {
		return &TypeError{Msg: fmt.Sprintf("terminal %s has output you have not seen: call terminal_wait first (observe before you act)", joinInts(unseen)), Err: ErrUnseenOutput}
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	cc, err := m.client(ctx, t)
	if err != nil {
		return err
	}
	cur, err := m.currentCommand(ctx, cc, t)
	if err != nil {
		return err
	}
	if expect != "" && !expectMatches(expect, cur) {
		return &TypeError{Msg: fmt.Sprintf("terminal %d is running %q, not %q: nothing was typed", n, cur, expect)}
	}
	var cmds []string
	if keys := parseKeys(text); keys != nil {
		for _, k := range keys {
			cmds = append(cmds, "send-keys -t "+quote(t.pane)+" "+quote(k))
		}
	} else {
		cmds = typeCommands(t.pane, text)
		if enter {
			cmds = append(cmds, "send-keys -t "+quote(t.pane)+" Enter")
		}
	}
	m.mu.Lock()
	t.seq++
	t.typeSeq = t.seq
	t.lastType = m.o.Now()
	m.notifyLocked()
	m.mu.Unlock()
	// A restarted conch must know the answer is unseen.
	if err := m.saveRecord(ctx, t); err != nil {
		return fmt.Errorf("type into terminal %d: %w", n, err)
	}
	for _, c := range cmds {
		if _, err := cc.command(ctx, c); err != nil {
			return fmt.Errorf("type into terminal %d: %w", n, err)
		}
	}
	return nil
}

func expectMatches(expect, cur string) bool {
	e := strings.TrimSpace(expect)
	return strings.EqualFold(e, cur) || strings.HasPrefix(strings.ToLower(cur), strings.ToLower(e)) ||
		strings.EqualFold(path.Base(e), cur)
}

func (m *Manager) currentCommand(ctx context.Context, cc *control, t *tty) (string, error) {
	lines, err := cc.command(ctx, "display-message -p -t "+quote(t.pane)+" '#{pane_current_command}'")
	if err != nil {
		return "", fmt.Errorf("terminal %d: %w", t.n, err)
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.TrimSpace(lines[0]), nil
}
