package gateway

import (
	"context"

	"conch"
)

// StatusSource adds lines about a conversation to /status (the MCP client
// says which of its servers are down and when they are tried again).
type StatusSource interface {
	Status(ctx context.Context, key conch.ConversationKey) []string
}
