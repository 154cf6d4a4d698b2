package terminal_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"conch/terminal"
)

// failingRegistry refuses to save while fail is set.
type failingRegistry struct {
	*terminal.MemRegistry
	fail atomic.Bool
}

func (r *failingRegistry) SaveTerminal(ctx context.Context, scope string, rec terminal.Record) error {
	if r.fail.Load() {
		return errors.New("disk full")
	}
	return r.MemRegistry.SaveTerminal(ctx, scope, rec)
}

// TestOpenFailureLeavesNothing: an Open that fails after its tmux session
// started removes the session, so the number is free for the next Open.
func TestOpenFailureLeavesNothing(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		reg := &failingRegistry{MemRegistry: terminal.NewMemRegistry()}
		m := terminal.NewManager(b.SB, reg, b.Opts)
		t.Cleanup(m.Detach)
		reg.fail.Store(true)
		if _, err := m.Open(ctx, ""); err == nil {
			t.Fatal("Open with a failing registry succeeded")
		}
		reg.fail.Store(false)
		res, err := m.Open(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if res.TTY != 0 {
			t.Fatalf("second Open got terminal %d, want 0 (the failed one must leave no session behind)", res.TTY)
		}
	})
}
