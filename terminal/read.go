package terminal

import (
	"context"
	"fmt"

	"conch"
)

// MaxScreenHistory is the most scrollback lines Screen returns above the
// visible screen.
const MaxScreenHistory = 2000

// Screen returns terminal n's visible screen with up to history lines of
// its scrollback above it (at most MaxScreenHistory), trailing blank lines
// dropped. It only looks: nothing becomes seen, so it does not satisfy
// observe-before-act (Wait observes). A terminal that is not open is a
// KindNotFound error.
func (m *Manager) Screen(ctx context.Context, n, history int) ([]string, error) {
	m.mu.Lock()
	t := m.ttys[n]
	m.mu.Unlock()
	if t == nil {
		return nil, conch.Errorf(conch.KindNotFound, "terminal %d is not open", n)
	}
	history = min(max(history, 0), MaxScreenHistory)
	t.opMu.Lock()
	defer t.opMu.Unlock()
	cc, err := m.client(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("screen of terminal %d: %w", n, err)
	}
	cmd := "capture-pane -p -t " + quote(t.pane)
	if history > 0 {
		cmd += fmt.Sprintf(" -S -%d", history)
	}
	lines, err := cc.command(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("screen of terminal %d: %w", n, err)
	}
	return TrimBlankTail(lines), nil
}
