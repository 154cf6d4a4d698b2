package conch

import (
	"context"
	"errors"
)

// ErrStopped is the cause of a turn's context cancelled by /stop (or the
// dashboard's stop), as context.Cause reports it: a tool that drives
// something outside conch (a coding-agent CLI) stops that too, while a
// shutdown (another cause) leaves it running for the next start.
var ErrStopped = errors.New("stopped with /stop")

// Submitter takes inbound messages that need no admission: schedules and
// watches of a conversation, conch's own notices. The gateway implements it;
// the message is durable when Submit returns.
type Submitter interface {
	Submit(ctx context.Context, in Inbound) (Turn, error)
}

// ConversationControl is what an operator (the dashboard) or a channel's own
// controls can do to a conversation besides writing to it.
type ConversationControl interface {
	// Stop cancels the running turn; it reports whether one was running.
	Stop(ctx context.Context, key ConversationKey) (bool, error)
	// Reset forgets the conversation and removes its computer.
	Reset(ctx context.Context, key ConversationKey) error
	// Status is the /status text of a conversation.
	Status(ctx context.Context, key ConversationKey) string
}
