package terminal_test

import (
	"context"
	"sync/atomic"
	"testing"

	"conch"
	"conch/terminal"
	"conch/terminal/terminaltest"
)

// idSandbox is a sandbox whose id can change, as when its container is
// replaced.
type idSandbox struct {
	conch.Sandbox
	id atomic.Value
}

func (s *idSandbox) ID() string { return s.id.Load().(string) }

type oneProvider struct{ sb conch.Sandbox }

func (p oneProvider) Sandbox(context.Context, conch.ConversationKey) (conch.Sandbox, error) {
	return p.sb, nil
}

func TestPool(t *testing.T) {
	b := terminaltest.Host(t)
	ctx := ctxT(t)
	sb := &idSandbox{Sandbox: b.SB}
	sb.id.Store("one")
	reg := terminal.NewMemRegistry()
	pool := terminal.NewPool(oneProvider{sb}, reg, b.Opts)
	t.Cleanup(pool.Close)
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "pool"}
	m1, err := pool.Manager(ctx, key)
	if err != nil {
		t.Fatalf("Manager: %v", err)
	}
	if m1.Options().Scope != key.String() {
		t.Errorf("scope: got %q, want %q", m1.Options().Scope, key.String())
	}
	if again, _ := pool.Manager(ctx, key); again != m1 {
		t.Fatal("Manager twice: got two managers, want the same one")
	}
	if _, err := m1.Open(ctx, ""); err != nil {
		t.Fatalf("Open: %v", err)
	}
	sb.id.Store("two") // the same tmux, reached through a new container id
	m2, err := pool.Manager(ctx, key)
	if err != nil {
		t.Fatalf("Manager after the id changed: %v", err)
	}
	if m2 == m1 {
		t.Fatal("Manager after the id changed: got the old manager")
	}
	if got := m2.List(); len(got) != 1 || got[0] != 0 {
		t.Errorf("new manager: got terminals %v, want [0] recovered", got)
	}
	if err := pool.Release(ctx, key); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if m3, _ := pool.Manager(ctx, key); m3 == m2 {
		t.Error("Manager after Release: got the released manager")
	}
}
