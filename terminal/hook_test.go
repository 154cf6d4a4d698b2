package terminal_test

import (
	"context"
	"testing"
	"time"

	"conch/terminal"
	"conch/terminal/terminaltest"
)

// TestTurnHookMarksThePane: a coding CLI's turn-end hook, run by a program
// conch's agent shell started, tells the session at once: through the
// pane's terminal the shell exported ($CONCH_PANE_TTY), with tmux out of
// reach (no $TMUX_PANE), and through tmux when the terminal is unknown.
func TestTurnHookMarksThePane(t *testing.T) {
	b := terminaltest.Host(t)
	ctx := ctxT(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	s, err := m.AgentSession(ctx, "hooktest", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, env string }{
		{"through the pane's terminal", "env -u TMUX_PANE"},
		{"through tmux", "env -u CONCH_PANE_TTY"},
	} {
		before, _ := s.Snapshot()
		if _, err := s.Run(ctx, "echo '{}' | "+c.env+" "+s.Hook("hooktest")); err != nil {
			t.Fatal(err)
		}
		if !waitSnap(ctx, s, func(sn terminal.Snapshot) bool { return sn.TurnSeq > before.Seq }) {
			sn, _ := s.Snapshot()
			scr, _ := s.Screen(ctx)
			t.Fatalf("%s: no turn marker (snapshot %+v); screen:\n%q", c.what, sn, scr)
		}
	}
}

func waitSnap(ctx context.Context, s *terminal.AgentSession, ok func(terminal.Snapshot) bool) bool {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		sn, ch := s.Snapshot()
		if ok(sn) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
