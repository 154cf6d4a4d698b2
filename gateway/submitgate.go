package gateway

import (
	"context"
	"sync"

	"conch"
)

// submitGates hold a turn's channel-facing actions (typing, progress,
// questions, its answer and notices) until the submission that stored its
// message returns, the message durable: the turn itself starts earlier,
// queued while the disk syncs the message (StagedStore). A submission that
// fails (the message could not be made durable) fails its gate: nothing of
// the turn reaches the channel, which will deliver the message again.
// Channels must note what they need of a message (the message Slack
// reacts to, the Discord channel to read after a restart) before they call
// HandleInbound: nothing here waits for what they do after it returns.
type submitGates struct {
	mu    sync.Mutex
	gates map[conch.TurnID]*gate
}

type gate struct {
	open chan struct{} // closed when the submission returned
	err  error         // why it failed, set before open is closed
}

// open holds turn's actions until done(turn).
func (s *submitGates) open(turn conch.TurnID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates == nil {
		s.gates = map[conch.TurnID]*gate{}
	}
	if _, ok := s.gates[turn]; !ok {
		s.gates[turn] = &gate{open: make(chan struct{})}
	}
}

// done lets turn's actions go, or, with err, refuses them: a failed gate
// stays (its turn's later actions are refused too) until forget.
func (s *submitGates) done(turn conch.TurnID, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gates[turn]
	if !ok {
		return
	}
	g.err = err
	close(g.open)
	if err == nil {
		delete(s.gates, turn)
	}
}

// forget drops a failed gate once its turn is done with (a gate still
// open stays: its submission closes it).
func (s *submitGates) forget(turn conch.TurnID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.gates[turn]; ok && g.err != nil {
		delete(s.gates, turn)
	}
}

// wait returns once turn's submission returned (at once for a turn not
// being submitted: resumed, or long stored), with its error if it failed,
// or when ctx ended.
func (s *submitGates) wait(ctx context.Context, turn conch.TurnID) error {
	s.mu.Lock()
	g, ok := s.gates[turn]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-g.open:
		return g.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
