package terminal

import (
	"context"
	"slices"
	"sort"
	"sync"

	"conch"
)

// Record is what conch remembers about one terminal (the store's record
// type, in the root package).
type Record = conch.TerminalRecord

// Registry stores terminal records, per scope (a conversation). *sqlite.DB
// implements it.
type Registry = conch.TerminalRegistry

// MemRegistry is a Registry in memory, for tests and for running without a
// store.
type MemRegistry struct {
	mu sync.Mutex
	m  map[string]map[int]Record
}

var _ Registry = (*MemRegistry)(nil)

// NewMemRegistry returns an empty MemRegistry.
func NewMemRegistry() *MemRegistry { return &MemRegistry{m: map[string]map[int]Record{}} }

// SaveTerminal implements Registry.
func (r *MemRegistry) SaveTerminal(_ context.Context, scope string, rec Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[scope] == nil {
		r.m[scope] = map[int]Record{}
	}
	rec.Seen = slices.Clone(rec.Seen)
	r.m[scope][rec.TTY] = rec
	return nil
}

// LoadTerminals implements Registry; records come in TTY order.
func (r *MemRegistry) LoadTerminals(_ context.Context, scope string) ([]Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Record
	for _, rec := range r.m[scope] {
		rec.Seen = slices.Clone(rec.Seen)
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TTY < out[j].TTY })
	return out, nil
}

// DeleteTerminal implements Registry.
func (r *MemRegistry) DeleteTerminal(_ context.Context, scope string, tty int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m[scope], tty)
	return nil
}
