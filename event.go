package conch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Event is something that happened in a conversation. The gateway's event hub
// numbers the events of each conversation (Seq) and fans them out to its
// subscribers: channel progress, the web chat, the dashboard, metrics, hooks.
type Event struct {
	Key ConversationKey
	// Turn is the turn the event belongs to; 0 when it is about none.
	Turn TurnID
	// Seq orders one conversation's kept events: 1, 2, 3, … without gaps,
	// so a subscriber that saw n resumes after n. An ephemeral event (see
	// Ephemeral) carries the Seq of the kept event before it and is never
	// replayed.
	Seq  int64
	At   time.Time
	Data EventData
}

// EventData is one of the typed payloads below. Type names it on the wire.
type EventData interface {
	Type() string
}

// MessageEvent is a message of the conversation: a person's (stored) or the
// final answer.
type MessageEvent struct {
	Role        Role         `json:"role"`
	Text        string       `json:"text"`
	Sender      UserID       `json:"sender,omitempty"`
	Origin      OriginKind   `json:"origin,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// NoticeEvent is a short status line: a command's answer, "queued (2)".
type NoticeEvent struct {
	Text string `json:"text"`
}

// TextDelta is model text as it streams.
type TextDelta struct {
	Text string `json:"text"`
}

// ToolStarted says the model called a tool.
type ToolStarted struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Summary is a short, human-readable description of the call.
	Summary string `json:"summary"`
}

// ToolFinished says a tool call ended.
type ToolFinished struct {
	CallID   string        `json:"call_id"`
	Name     string        `json:"name"`
	Duration time.Duration `json:"duration_ns"`
	IsError  bool          `json:"is_error"`
	// ExitCode is the program's exit status for tools that run one.
	ExitCode *int `json:"exit_code,omitempty"`
	// Summary is the start of the result.
	Summary string `json:"summary"`
}

// ToolProgress is output a tool reports while it runs (terminal snippets,
// the coding agent's screen).
type ToolProgress struct {
	Text string `json:"text"`
}

// RetryEvent says a model call failed and will be retried.
type RetryEvent struct {
	Attempt int           `json:"attempt"`
	Max     int           `json:"max"`
	Delay   time.Duration `json:"delay_ns"`
	Reason  string        `json:"reason"`
}

// TurnState is a turn changing state. Queued is its position while pending.
type TurnState struct {
	Status TurnStatus `json:"status"`
	Queued int        `json:"queued,omitempty"`
	// Reason says why a turn stopped.
	Reason string `json:"reason,omitempty"`
	// Attempt counts the turn's starts (running): above 1 the turn was
	// resumed after a restart of conch interrupted it.
	Attempt int `json:"attempt,omitempty"`
	// Resumes is set on a stopped turn that is not over: a shutdown
	// interrupted it, and the next start of conch resumes it.
	Resumes bool `json:"resumes,omitempty"`
}

// HookRan says a stage of a conversation's turn hooks ran (hook/): how
// many hooks, which of them failed, and for pre-stop the open issues handed
// back to the model.
type HookRan struct {
	Stage  string   `json:"stage"` // "pre-turn", "pre-stop" or "post-turn"
	Hooks  int      `json:"hooks"`
	Failed []string `json:"failed,omitempty"` // names of hooks that failed or timed out
	Issues []string `json:"issues,omitempty"`
}

// ReasonInterrupted is the Reason of a turn interrupted by a shutdown (it
// Resumes).
const ReasonInterrupted = "interrupted_by_shutdown"

// ContextUse is how much of the model's context a request used.
type ContextUse struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// Window is the model's context window in tokens; 0 when unknown.
	Window int `json:"window,omitempty"`
}

// ModelUsage is one answered model call: the model that answered (a
// configured "provider/name"), its tokens and price.
type ModelUsage struct {
	Model        string  `json:"model"`
	Fallback     bool    `json:"fallback,omitempty"`
	InputTokens  int     `json:"input_tokens"`
	CachedTokens int     `json:"cached_tokens,omitempty"`
	OutputTokens int     `json:"output_tokens"`
	Estimated    bool    `json:"estimated,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
}

// Type implementations.
func (MessageEvent) Type() string { return "message" }
func (NoticeEvent) Type() string  { return "notice" }
func (TextDelta) Type() string    { return "text_delta" }
func (ToolStarted) Type() string  { return "tool_started" }
func (ToolFinished) Type() string { return "tool_finished" }
func (ToolProgress) Type() string { return "tool_progress" }
func (RetryEvent) Type() string   { return "retry" }
func (TurnState) Type() string    { return "turn" }
func (ContextUse) Type() string   { return "context" }
func (HookRan) Type() string      { return "hook" }
func (ModelUsage) Type() string   { return "usage" }

// MarshalJSON renders an event as {"conversation", "turn", "seq", "at", "type", "data"}.
func (e Event) MarshalJSON() ([]byte, error) {
	typ := ""
	if e.Data != nil {
		typ = e.Data.Type()
	}
	return json.Marshal(struct {
		Conversation string    `json:"conversation"`
		Turn         TurnID    `json:"turn,omitempty"`
		Seq          int64     `json:"seq"`
		At           time.Time `json:"at"`
		Type         string    `json:"type"`
		Data         EventData `json:"data"`
	}{e.Key.String(), e.Turn, e.Seq, e.At, typ, e.Data})
}

// EventSink receives the events of a running turn. The gateway gives one to
// the agent loop; tools reach it through ToolEnv.
type EventSink func(EventData)

// EventSource lets subscribers follow conversations' events. The gateway's
// hub implements it.
type EventSource interface {
	// Subscribe delivers the events of key (of every conversation when key
	// is zero) with Seq > after, in order: first the ones still kept, then
	// live ones. after < 0 means live events only. The channel is closed
	// when ctx is done, or when the subscriber falls too far behind; then
	// subscribe again with the last Seq seen. When events after `after` are
	// no longer kept the error has KindNotFound: reload from the store.
	Subscribe(ctx context.Context, key ConversationKey, after int64) (<-chan Event, error)
	// LastSeq is the Seq of the conversation's newest event (0 for none).
	LastSeq(ctx context.Context, key ConversationKey) (int64, error)
}

// DecodeEventData turns a stored payload back into its typed form.
func DecodeEventData(typ string, raw json.RawMessage) (EventData, error) {
	var d EventData
	switch typ {
	case "message":
		d = &MessageEvent{}
	case "notice":
		d = &NoticeEvent{}
	case "text_delta":
		d = &TextDelta{}
	case "tool_started":
		d = &ToolStarted{}
	case "tool_finished":
		d = &ToolFinished{}
	case "tool_progress":
		d = &ToolProgress{}
	case "retry":
		d = &RetryEvent{}
	case "turn":
		d = &TurnState{}
	case "context":
		d = &ContextUse{}
	case "hook":
		d = &HookRan{}
	case "usage":
		d = &ModelUsage{}
	case "approval":
		d = &ApprovalAsked{}
	case "approval_resolved":
		d = &ApprovalResolved{}
	default:
		return nil, Errorf(KindInvalid, "unknown event type %q", typ)
	}
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, fmt.Errorf("decode %s event: %w", typ, err)
	}
	// Hand back values, as publishers use them.
	switch v := d.(type) {
	case *HookRan:
		return *v, nil
	case *MessageEvent:
		return *v, nil
	case *NoticeEvent:
		return *v, nil
	case *TextDelta:
		return *v, nil
	case *ToolStarted:
		return *v, nil
	case *ToolFinished:
		return *v, nil
	case *ToolProgress:
		return *v, nil
	case *RetryEvent:
		return *v, nil
	case *TurnState:
		return *v, nil
	case *ContextUse:
		return *v, nil
	case *ModelUsage:
		return *v, nil
	case *ApprovalAsked:
		return *v, nil
	case *ApprovalResolved:
		return *v, nil
	}
	return d, nil
}

// Ephemeral reports whether an event is only fanned out live and not kept
// in the store's event log: streamed model text and tool output, which the
// final answer and the tool results supersede, and a model call's usage and
// the context's size, which the store keeps as records of their own
// (model_usage, the conversation's context use): kept as events too they
// were two of a call's seven writes, read by no one.
func Ephemeral(d EventData) bool {
	switch d.(type) {
	case TextDelta, ToolProgress, ModelUsage, ContextUse:
		return true
	}
	return false
}
