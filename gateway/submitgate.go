package gateway

import (
	"context"
	"sync"

	"conch"
)

// submitGates hold a turn's channel-facing actions (typing, progress, its
// answer and notices) until the HandleInbound that stored its message has
// returned. The turn itself starts earlier: with a StagedStore it is queued
// while the disk syncs the message. Channels may then finish their own
// bookkeeping of a message after HandleInbound returns (the message Slack
// reacts to while the turn runs, the Discord thread conch joins) before
// anything of its turn reaches them.
type submitGates struct {
	mu    sync.Mutex
	gates map[conch.TurnID]chan struct{}
}

// open holds turn's actions until done(turn).
func (s *submitGates) open(turn conch.TurnID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates == nil {
		s.gates = map[conch.TurnID]chan struct{}{}
	}
	if _, ok := s.gates[turn]; !ok {
		s.gates[turn] = make(chan struct{})
	}
}

// done lets turn's actions go.
func (s *submitGates) done(turn conch.TurnID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.gates[turn]; ok {
		close(ch)
		delete(s.gates, turn)
	}
}

// wait returns once turn's submission returned (at once for a turn not
// being submitted: resumed, or long stored), or ctx ended.
func (s *submitGates) wait(ctx context.Context, turn conch.TurnID) error {
	s.mu.Lock()
	ch, ok := s.gates[turn]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
