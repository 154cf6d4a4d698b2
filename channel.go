package conch

import (
	"context"
	"time"
)

// Channel is a channel adapter: it receives messages from people and sends replies.
//
// Optional abilities are separate interfaces found by type assertion:
// TypingChannel, EditingChannel.
type Channel interface {
	Name() ChannelName
	// Run receives messages until ctx is done or the channel fails for good.
	// For each message it calls h.HandleInbound and acknowledges the message
	// to its source only after that returned nil (the message is then durable).
	Run(ctx context.Context, h Handler) error
	// Send delivers one message.
	Send(ctx context.Context, out Outbound) error
}

// Handler receives what channels observe. The gateway implements it.
type Handler interface {
	// Admits reports whether a sender may talk to conch on the channel: the
	// one admission rule (allowlist, approved pairings), for channels that
	// must decide before they have a message (join a room on an invite,
	// decrypt). ids are the sender's identities (a Telegram user id and its
	// @username); any one admitted is enough.
	Admits(ctx context.Context, ch ChannelName, ids ...UserID) bool
	// HandleInbound stores the message durably and queues it; it returns
	// once the message is safe, not when it has been answered.
	HandleInbound(ctx context.Context, in Inbound) error
	// ConversationClosed tells that a conversation ended on its channel (the
	// bot was kicked, the last person left): its worker stops and its
	// sandbox is removed.
	ConversationClosed(ctx context.Context, key ConversationKey) error
}

// TypingChannel can show that a reply is being worked on. The gateway is
// its one renewer: while a turn runs it calls SetTyping(true) every
// TypingEvery, and SetTyping(false) when the turn is over.
type TypingChannel interface {
	Channel
	// SetTyping shows (true) or clears (false) the indicator once.
	SetTyping(ctx context.Context, key ConversationKey, typing bool) error
	// TypingEvery is how often the indicator must be shown again to stay
	// on (it fades on its own); 0 means it stays until cleared.
	TypingEvery() time.Duration
}

// MessageRef identifies a sent message so that it can be edited.
type MessageRef struct {
	Key ConversationKey
	ID  string
}

// EditingChannel can replace the text of a message it sent, so progress is
// edited in place instead of flooding the conversation.
type EditingChannel interface {
	Channel
	SendEditable(ctx context.Context, out Outbound) (MessageRef, error)
	Edit(ctx context.Context, ref MessageRef, text string) error
}

// StatusChannel reports channel-specific health for /status and doctor
// (for example Matrix rooms whose messages cannot be decrypted).
type StatusChannel interface {
	Channel
	Status(ctx context.Context, key ConversationKey) []string
}
