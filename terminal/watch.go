package terminal

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"conch"
	"conch/internal/backoff"
)

// Watches of the schedule package wait on a Pool (schedule.Terminals):
// each says what happened in a sentence the conversation is told, and waits
// again on the Manager that replaced one whose sandbox was lost.

// watchManager returns the conversation's terminal Manager, waiting for a new
// one when it was just replaced.
func (p *Pool) watchManager(ctx context.Context, key conch.ConversationKey) (*Manager, error) {
	if p == nil {
		return nil, conch.Errorf(conch.KindUnavailable, "no terminals are available")
	}
	return p.Manager(ctx, key)
}

// WaitExit waits for the command in the conversation's terminal n to end
// (or the terminal to close). recovered says the wait began before a
// restart (Manager.AwaitExit).
func (p *Pool) WaitExit(ctx context.Context, key conch.ConversationKey, n int, recovered bool) (string, error) {
	for {
		m, err := p.watchManager(ctx, key)
		if err != nil {
			return "", err
		}
		info, err := m.AwaitExit(ctx, n, recovered)
		if IsDetached(err) {
			recovered = true
			if err := backoff.Sleep(ctx, time.Second); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		switch {
		case info.Closed:
			return fmt.Sprintf("Terminal %d was closed.", n), nil
		case info.Known && info.Signal != "":
			return fmt.Sprintf("The command in terminal %d was killed by signal %s.", n, info.Signal), nil
		case info.Known:
			return fmt.Sprintf("The command in terminal %d exited with status %d.", n, info.Code), nil
		}
		return fmt.Sprintf("The command in terminal %d ended; its exit status could not be read (neither its shell nor tmux reported it).", n), nil
	}
}

// WaitMatch waits for the conversation's terminal n to print a line
// matching re.
func (p *Pool) WaitMatch(ctx context.Context, key conch.ConversationKey, n int, re *regexp.Regexp) (string, error) {
	for {
		m, err := p.watchManager(ctx, key)
		if err != nil {
			return "", err
		}
		line, err := m.AwaitOutput(ctx, n, re)
		if IsDetached(err) {
			if err := backoff.Sleep(ctx, time.Second); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Terminal %d printed: %s", n, line), nil
	}
}
