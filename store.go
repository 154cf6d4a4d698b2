package conch

import (
	"context"
	"encoding/json"
	"time"
)

// MessageID identifies a stored message.
type MessageID int64

// TurnID identifies a turn: the handling of one inbound message.
type TurnID int64

// TurnStatus is where a turn is in its life.
type TurnStatus string

// Turn statuses.
const (
	TurnPending   TurnStatus = "pending"   // stored, not started
	TurnRunning   TurnStatus = "running"   // started; a crash leaves it here
	TurnDone      TurnStatus = "done"      // answered
	TurnStopped   TurnStatus = "stopped"   // ended by a breaker, /stop or an error
	TurnAbandoned TurnStatus = "abandoned" // resumed too often
)

// Turn is the handling of one inbound message.
type Turn struct {
	ID       TurnID
	Key      ConversationKey
	Inbound  Inbound
	Status   TurnStatus
	Attempts int
	// StoppedReason records why a turn ended other than with an answer.
	StoppedReason string
	CreatedAt     time.Time
}

// StepKind names an agent step recorded in the store.
type StepKind string

// Step kinds.
const (
	StepModelCall  StepKind = "model_call"
	StepModelError StepKind = "model_error"
	StepToolCall   StepKind = "tool_call"
	StepToolResult StepKind = "tool_result"
	StepStopped    StepKind = "stopped"
	// StepCompaction records older turns folded into a stored summary.
	StepCompaction StepKind = "compaction"
	// StepFallback records a turn handed to a fallback model.
	StepFallback StepKind = "fallback"
)

// Step is one recorded agent step; Detail is a JSON object.
type Step struct {
	Turn   TurnID
	Kind   StepKind
	Detail json.RawMessage
	At     time.Time
}

// TurnStore persists conversations, their history and their turns.
// Every method is one transaction.
type TurnStore interface {
	// AddInbound stores the message and a pending turn for it. If a message
	// with the same (channel, ExternalID) exists, it returns that turn and
	// dup = true.
	AddInbound(ctx context.Context, in Inbound) (t Turn, dup bool, err error)
	// StartTurn marks the turn running and counts an attempt. A turn that
	// already ended (done, stopped, abandoned, reset) is refused with KindInvalid.
	StartTurn(ctx context.Context, id TurnID) (Turn, error)
	// FinishTurn records the end of a turn.
	FinishTurn(ctx context.Context, id TurnID, status TurnStatus, reason string) error
	// UnfinishedTurns lists pending and running turns, oldest first.
	UnfinishedTurns(ctx context.Context) ([]Turn, error)
	// AppendMessage adds an assistant or tool message produced by a turn.
	AppendMessage(ctx context.Context, id TurnID, m Message) error
	// History returns the conversation's messages since its last reset, in
	// order; the user message of each turn comes first within the turn.
	// Turns not yet started (pending) are left out: they are queued behind
	// the turn that asks.
	History(ctx context.Context, key ConversationKey) ([]Message, error)
	// RecordStep appends an agent step.
	RecordStep(ctx context.Context, s Step) error
	// ResetConversation forgets the history (kept for audit, no longer
	// returned by History) and cancels unfinished turns.
	ResetConversation(ctx context.Context, key ConversationKey) error
	// Conversations lists known conversation keys.
	Conversations(ctx context.Context) ([]ConversationKey, error)
}

// Fact is one remembered thing about a person.
type Fact struct {
	Key       string
	Value     string
	UpdatedAt time.Time
}

// FactStore is per-user memory.
type FactStore interface {
	Remember(ctx context.Context, user UserKey, key, value string) error
	// Forget deletes a fact; it reports whether there was one.
	Forget(ctx context.Context, user UserKey, key string) (bool, error)
	Facts(ctx context.Context, user UserKey) ([]Fact, error)
}

// CursorStore keeps channel positions (Matrix sync token, IMAP UIDVALIDITY/UID).
type CursorStore interface {
	// Cursor returns "" when none is stored.
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
}

// How long the store keeps what expires; its janitor deletes older rows.
const (
	// MarkerTTL is how long a handled marker is kept. It outlasts the longest
	// window a redelivery or resume can span: channels redeliver what they
	// had not acknowledged when conch stopped (IMAP from the stored UID,
	// Matrix from its sync token, Telegram's updates for 24 hours) and the
	// gateway resumes unfinished turns at the next start, all within days of
	// the original; Matrix keeps its own sending records 30 days likewise.
	MarkerTTL = 30 * 24 * time.Hour
	// SentTTL is how long a sent message's id is kept: besides stopping a
	// re-send after a crash (which MarkerTTL would cover) it threads a late
	// reply to the conversation it answers, so it is kept a year.
	SentTTL = 365 * 24 * time.Hour
)

// MarkerStore remembers external ids already handled, so that a redelivery
// after a crash is recognised (the gateway's handled commands; any channel's
// "already handled" ids). Markers expire after MarkerTTL.
type MarkerStore interface {
	// Mark records id in scope as handled and reports whether it was not
	// marked before. It is one statement: of two processes marking the
	// same id, one gets first = true.
	Mark(ctx context.Context, scope, id string) (first bool, err error)
}

// SentStore remembers the ids of messages a channel sent (email: a reply's
// Message-ID) and the conversation each belongs to. They expire after
// SentTTL.
type SentStore interface {
	// RecordSent records that the message id was sent in conversation key.
	RecordSent(ctx context.Context, key ConversationKey, id string) error
	// SentConversation returns the conversation of a message id sent on
	// channel; ok is false when none is recorded.
	SentConversation(ctx context.Context, channel ChannelName, id string) (key ConversationKey, ok bool, err error)
}

// WebConversation is one entry of the web chat's conversation list.
type WebConversation struct {
	ID      string
	Title   string
	Created time.Time
}

// AuditKind names what an audit event records.
type AuditKind string

// Audit kinds: every audited action is one of these.
const (
	AuditExec           AuditKind = "exec"            // a command ran in a sandbox (bash tool, `conch sandbox exec`)
	AuditExecRefused    AuditKind = "exec_refused"    // the bash tool refused a program
	AuditFileWrite      AuditKind = "file_write"      // a file tool wrote a file
	AuditWebFetch       AuditKind = "web_fetch"       // a page was fetched
	AuditWebSearch      AuditKind = "web_search"      // a web search ran
	AuditSandboxCreate  AuditKind = "sandbox_create"  // a sandbox was created (or taken from the pool)
	AuditSandboxRestart AuditKind = "sandbox_restart" // a sandbox was restarted
	AuditSandboxRemove  AuditKind = "sandbox_remove"  // a sandbox was removed
	AuditEgressRefused  AuditKind = "egress_refused"  // the coding agent's egress refused a request
	AuditBudgetRefused  AuditKind = "budget_refused"  // a model call was refused by a budget
	AuditApproval       AuditKind = "approval"        // a question to a person was decided (allowed, denied, timed out)
	AuditMCPClientCall  AuditKind = "mcp_client_call" // the agent called an MCP server (tool, resource, prompt)
)

// AuditEvent is one audited action.
type AuditEvent struct {
	At           time.Time
	Kind         AuditKind
	Conversation ConversationKey
	Detail       json.RawMessage
}

// AuditStore records audit events.
type AuditStore interface {
	Audit(ctx context.Context, ev AuditEvent) error
}

// Store is the whole persistent state.
type Store interface {
	TurnStore
	FactStore
	CursorStore
	MarkerStore
	SentStore
	AuditStore
	Close() error
}
