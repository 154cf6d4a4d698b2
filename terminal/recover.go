package terminal

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"conch"
)

// RecoverResult tells what Recover found.
type RecoverResult struct {
	// Found are terminals running in the sandbox, now managed again.
	Found []int
	// Lost are terminals the registry knew that the sandbox no longer has
	// (it was restarted); their records are dropped.
	Lost []int
}

// Recover finds the terminals a previous Manager left in the sandbox: every
// tmux session of the socket is attached again, and what the model has not
// seen of it is reported by the next Wait.
func (m *Manager) Recover(ctx context.Context) (RecoverResult, error) {
	if err := m.ensureSetup(ctx); err != nil {
		return RecoverResult{}, err
	}
	res, err := m.sb.Exec(ctx, conch.ExecRequest{
		Argv: append(m.tmuxArgs(), "list-sessions", "-F", "#{session_name}"),
		Env:  m.env(), Dir: m.o.Workspace, Timeout: 30 * time.Second,
	})
	if err != nil {
		return RecoverResult{}, fmt.Errorf("recover terminals: %w", err)
	}
	live := map[string]bool{}
	if res.ExitCode == 0 {
		for _, l := range strings.Split(strings.TrimSpace(string(res.Output)), "\n") {
			if l != "" {
				live[l] = true
			}
		}
	}
	recs, err := m.reg.LoadTerminals(ctx, m.o.Scope)
	if err != nil {
		return RecoverResult{}, fmt.Errorf("recover terminals: %w", err)
	}
	byName := map[string]Record{}
	for _, r := range recs {
		byName[r.Session] = r
	}
	var out RecoverResult
	for _, r := range recs {
		if r.TTY == CodeTTY {
			continue // the coding agent recovers itself (AgentSession)
		}
		if !live[r.Session] {
			out.Lost = append(out.Lost, r.TTY)
			if err := m.reg.DeleteTerminal(ctx, m.o.Scope, r.TTY); err != nil {
				return out, fmt.Errorf("recover terminals: %w", err)
			}
		}
	}
	for name := range live {
		n, ok := ttyNumber(name, m.o.MaxTTYs)
		if !ok {
			continue
		}
		m.mu.Lock()
		_, have := m.ttys[n]
		m.mu.Unlock()
		if have {
			continue
		}
		r, known := byName[name]
		if err := m.recoverTTY(ctx, n, name, r, known); err != nil {
			return out, err
		}
		out.Found = append(out.Found, n)
	}
	slices.Sort(out.Found)
	slices.Sort(out.Lost)
	if len(out.Lost) > 0 {
		m.mu.Lock()
		m.notices = append(m.notices, fmt.Sprintf("terminal %s was lost: the computer restarted since it was opened", joinInts(out.Lost)))
		m.mu.Unlock()
	}
	return out, nil
}

// ttyNumber is the number of a numbered TTY's session name.
func ttyNumber(name string, maxTTYs int) (int, bool) {
	numStr, ok := strings.CutPrefix(name, "tty_")
	n, err := strconv.Atoi(numStr)
	return n, ok && err == nil && n >= 0 && n < maxTTYs
}

// recoverTTY manages terminal n (session name) again; r is its record
// when known.
func (m *Manager) recoverTTY(ctx context.Context, n int, name string, r Record, known bool) error {
	t := &tty{n: n, name: name, command: r.Command, shell: r.Shell, openedAt: r.OpenedAt, mark: r.Mark, seen: r.Seen}
	t.scan.nonce = r.Nonce // without a record, no marker can be trusted
	if !known {
		t.openedAt = m.o.Now()
		t.mark = -1 // nothing seen: everything is new
	}
	// Until it has been observed again, its screen counts as unseen,
	// and the next Wait lets it finish what it may be doing (a prompt
	// marker, else Settle) as if it had just been typed into.
	t.unseen = true
	t.seq, t.typeSeq, t.lastType, t.recovered = 1, 1, m.o.Now(), true
	m.mu.Lock()
	m.ttys[n] = t
	m.mu.Unlock()
	if err := m.attach(ctx, t); err != nil {
		m.mu.Lock()
		delete(m.ttys, n)
		m.mu.Unlock()
		return fmt.Errorf("recover terminal %d: %w", n, err)
	}
	if !known {
		return m.saveRecord(ctx, t)
	}
	if r.Observed {
		// The model had seen all of it: unless the screen changed while
		// conch was away, nothing is pending.
		m.markIfUnchanged(ctx, t)
	}
	return nil
}

// markIfUnchanged counts t as observed when its screen shows just what was
// seen at its last observation and nothing happened meanwhile.
func (m *Manager) markIfUnchanged(ctx context.Context, t *tty) {
	m.mu.Lock()
	before := t.seq
	m.mu.Unlock()
	lines, info, startAbs, err := m.capture(ctx, t)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil && t.seq == before && !info.dead && !t.dead && !t.exited && len(freshLocked(t, lines, startAbs)) == 0 {
		t.unseen = false
		t.obsSeq = t.seq
		return
	}
	t.unseen = true
	if err != nil {
		m.o.Logger.Warn("terminal: look at recovered terminal", "tty", t.n, "err", err)
	}
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
