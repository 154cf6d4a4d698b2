package terminal

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Record is what conch remembers about one terminal so that a restarted
// conch finds it again and knows what the model has already seen.
type Record struct {
	// TTY is the terminal number (0–19); CodeTTY for the coding agent.
	TTY int
	// Session is the tmux session name.
	Session string
	// Command is what was started ("" for a shell).
	Command string
	// Shell is true for a shell TTY with conch's completion markers.
	Shell bool
	// Nonce is the terminal's marker secret.
	Nonce    string
	OpenedAt time.Time
	// Mark is the absolute line (history and screen counted from the
	// first line tmux still holds) where the last observation began;
	// Seen is what the lines from Mark on showed then.
	Mark int
	Seen []string
	// Observed is set when the last observation came after the last
	// input: nothing typed into the terminal waits to be seen. A restarted
	// conch then lets the model type at once if the screen is unchanged.
	Observed bool
}

// Registry stores terminal records, per scope (a conversation).
type Registry interface {
	SaveTerminal(ctx context.Context, scope string, r Record) error
	LoadTerminals(ctx context.Context, scope string) ([]Record, error)
	DeleteTerminal(ctx context.Context, scope string, tty int) error
}

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
	slices.SortFunc(out, func(a, b Record) int { return a.TTY - b.TTY })
	return out, nil
}

// DeleteTerminal implements Registry.
func (r *MemRegistry) DeleteTerminal(_ context.Context, scope string, tty int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m[scope], tty)
	return nil
}
