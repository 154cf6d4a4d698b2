package terminal

import (
	"context"
	"fmt"
	"sync"

	"conch"
)

// Provider hands out the terminal Manager of a conversation. The terminal
// and coding-agent tools take one.
type Provider interface {
	Manager(ctx context.Context, key conch.ConversationKey) (*Manager, error)
}

// Pool is a Provider over a conch.SandboxProvider: one Manager per
// conversation, created on first use and recovered (the terminals a previous
// conch left are found again). When the conversation's sandbox is replaced
// (a new container), the Manager is replaced too and the lost terminals are
// reported by its next Wait.
type Pool struct {
	sandboxes conch.SandboxProvider
	reg       Registry
	opts      Options

	mu sync.Mutex
	m  map[conch.ConversationKey]*poolEntry
}

type poolEntry struct {
	mu   sync.Mutex // serialises creation
	mgr  *Manager
	sbID string
}

var (
	_ Provider       = (*Pool)(nil)
	_ conch.Releaser = (*Pool)(nil)
)

// NewPool returns a Pool; opts is the template of every Manager's options
// (Scope is set to the conversation key).
func NewPool(sandboxes conch.SandboxProvider, reg Registry, opts Options) *Pool {
	if reg == nil {
		reg = NewMemRegistry()
	}
	return &Pool{sandboxes: sandboxes, reg: reg, opts: opts, m: map[conch.ConversationKey]*poolEntry{}}
}

// Manager implements Provider.
func (p *Pool) Manager(ctx context.Context, key conch.ConversationKey) (*Manager, error) {
	p.mu.Lock()
	e := p.m[key]
	if e == nil {
		e = &poolEntry{}
		p.m[key] = e
	}
	p.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	sb, err := p.sandboxes.Sandbox(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("terminals: %w", err)
	}
	if e.mgr != nil && e.sbID == sb.ID() {
		return e.mgr, nil
	}
	if e.mgr != nil {
		e.mgr.Detach()
	}
	o := p.opts
	o.Scope = key.String()
	m := NewManager(sb, p.reg, o)
	if _, err := m.Recover(ctx); err != nil {
		return nil, fmt.Errorf("terminals: %w", err)
	}
	e.mgr, e.sbID = m, sb.ID()
	return m, nil
}

// Release implements conch.Releaser: it stops the control clients of the
// conversation's Manager and drops it (the conversation ended or its
// sandbox was removed). Terminals left in a live sandbox are found again
// by the next Manager.
func (p *Pool) Release(_ context.Context, key conch.ConversationKey) error {
	p.mu.Lock()
	e := p.m[key]
	delete(p.m, key)
	p.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		if e.mgr != nil {
			e.mgr.Detach()
		}
		e.mu.Unlock()
	}
	return nil
}

// Close detaches every Manager; the terminals keep running in their
// sandboxes.
func (p *Pool) Close() {
	p.mu.Lock()
	es := p.m
	p.m = map[conch.ConversationKey]*poolEntry{}
	p.mu.Unlock()
	for _, e := range es {
		e.mu.Lock()
		if e.mgr != nil {
			e.mgr.Detach()
		}
		e.mu.Unlock()
	}
}
