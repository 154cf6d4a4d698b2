// Package conch holds the domain types and interfaces of the conch gateway.
//
// It imports only the standard library. Concrete implementations live in one
// package per dependency (sqlite/, sandbox/docker/, llm/openai/, channel/matrix/,
// …) and meet only in cmd/conch.
package conch

import (
	"fmt"
	"strings"
	"time"
)

// ChannelName names a channel adapter: "matrix", "email", "telegram", "web", "cli".
type ChannelName string

// Well-known channel names.
const (
	ChannelMatrix   ChannelName = "matrix"
	ChannelEmail    ChannelName = "email"
	ChannelTelegram ChannelName = "telegram"
	ChannelSlack    ChannelName = "slack"
	ChannelDiscord  ChannelName = "discord"
	ChannelWeb      ChannelName = "web"
	ChannelCLI      ChannelName = "cli"
)

// ConversationKey routes a message to its conversation: the channel plus the
// channel's own opaque id for it (a Matrix room id, an email thread owner, …).
type ConversationKey struct {
	Channel ChannelName
	ID      string
}

// String renders the key as "channel:id".
func (k ConversationKey) String() string { return string(k.Channel) + ":" + k.ID }

// IsZero reports whether k is the zero key.
func (k ConversationKey) IsZero() bool { return k.Channel == "" && k.ID == "" }

// ParseConversationKey parses the form produced by ConversationKey.String.
func ParseConversationKey(s string) (ConversationKey, error) {
	ch, id, ok := strings.Cut(s, ":")
	if !ok || ch == "" || id == "" {
		return ConversationKey{}, fmt.Errorf("parse conversation key %q: want channel:id", s)
	}
	return ConversationKey{Channel: ChannelName(ch), ID: id}, nil
}

// UserID is a sender's identity within its channel ("@alice:example.org",
// "alice@example.org", a Telegram user id, …).
type UserID string

// UserKey identifies a person across conch: per-user data such as facts is
// keyed by it.
type UserKey struct {
	Channel ChannelName
	ID      UserID
}

// String renders the key as "channel:id".
func (u UserKey) String() string { return string(u.Channel) + ":" + string(u.ID) }

// Inbound is one message from a person, as a channel adapter hands it to the gateway.
type Inbound struct {
	Key    ConversationKey
	Sender UserID
	// SenderName is a display name, if the channel has one. It is never
	// used for admission (anyone can choose any display name).
	SenderName string
	// SenderAliases are further verified identities of the sender that the
	// allowlist may name instead of Sender (a Telegram @username).
	SenderAliases []UserID
	Text          string
	// ExternalID is the channel's id for the message (Matrix event id, email
	// Message-ID, …). The store refuses a second message with the same
	// (channel, ExternalID), so a redelivery is never handled twice. Empty
	// means the channel has no stable id.
	ExternalID string
	// Thread carries what a reply needs to thread correctly (email subject
	// and references). Opaque to the gateway.
	Thread Thread
	// Attachments are files that came with the message. The gateway saves
	// them durably with the message and copies them into the conversation's
	// workspace (/workspace/inbox/) when its turn starts.
	Attachments []Attachment
	// Origin says who or what wrote the message; the zero value is a person.
	Origin     Origin
	ReceivedAt time.Time
}

// OriginKind says where an inbound message comes from.
type OriginKind string

// Origins of inbound messages.
const (
	// OriginPerson is a person writing on a channel (the zero value).
	OriginPerson OriginKind = ""
	// OriginSchedule is a scheduled wake the conversation asked for.
	OriginSchedule OriginKind = "schedule"
	// OriginWatch is a watch that fired (a command exited, output matched, a file changed).
	OriginWatch OriginKind = "watch"
	// OriginSystem is conch itself (a notice that must reach the model).
	OriginSystem OriginKind = "system"
)

// Origin is who or what wrote an inbound message. Messages that do not come
// from a person are submitted directly, without admission.
type Origin struct {
	Kind OriginKind
	// Ref names the schedule or watch that fired, if any.
	Ref string
}

// IsPerson reports whether a person wrote the message.
func (o Origin) IsPerson() bool { return o.Kind == OriginPerson }

// Thread is the threading context of a message.
type Thread struct {
	Subject    string
	References []string
}

// OutboundKind tells a channel what an outgoing message is.
type OutboundKind int

const (
	// OutboundReply is the final answer to a message.
	OutboundReply OutboundKind = iota
	// OutboundNotice is a short status line ("queued (position 2)", command results).
	OutboundNotice
	// OutboundProgress reports work in progress (tool activity, terminal output).
	OutboundProgress
)

func (k OutboundKind) String() string {
	switch k {
	case OutboundReply:
		return "reply"
	case OutboundNotice:
		return "notice"
	case OutboundProgress:
		return "progress"
	}
	return fmt.Sprintf("OutboundKind(%d)", int(k))
}

// Outbound is one message to a conversation. Text is Markdown.
type Outbound struct {
	Key  ConversationKey
	Kind OutboundKind
	Text string
	// InReplyTo is the ExternalID of the inbound message being answered, if any.
	InReplyTo string
	Thread    Thread
	// Attachments are files sent with the message, for channels that
	// implement AttachmentChannel; others get their names in Text.
	Attachments []Attachment
	// ID is a stable id of this message, the same when it is sent again
	// after a restart (a turn's answer re-delivered on resume). Channels
	// whose service deduplicates by an id (a Matrix transaction id) use it,
	// so a resend is idempotent; empty means the message has none.
	ID string
}
