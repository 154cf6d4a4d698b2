package terminal_test

import (
	"testing"
	"time"

	"conch/terminal"
)

func TestShellDoneWithExitStatus(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.sb, terminal.NewMemRegistry(), b.opts)
		t.Cleanup(m.Detach)
		op, err := m.Open(ctx, "")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Logf("open: %+v", op)
		if op.TTY != 0 {
			t.Fatalf("Open: got tty %d, want 0", op.TTY)
		}
		mustType(t, m, 0, "bash", "echo hel''lo; (exit 3)", true)
		start := time.Now()
		res := mustWait(t, m, 10*time.Second)
		t.Logf("wait %v:\n%s", time.Since(start), res)
		o := obsOf(t, res, 0)
		if o.State != terminal.StateDone || o.Exit != 3 {
			t.Fatalf("state: got %s exit %d, want done exit 3\n%s", o.State, o.Exit, res)
		}
		contains(t, "output", o.Text, "\nhello")
		if o.Cwd != b.ws {
			t.Errorf("cwd: got %q, want %q", o.Cwd, b.ws)
		}
	})
}
