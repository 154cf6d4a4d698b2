package conch

import (
	"context"
	"fmt"
)

// HistoryPos is where a stored message sits in its conversation's history:
// history is ordered by turn, then by message within the turn.
type HistoryPos struct {
	Turn    TurnID
	Message MessageID
}

// Summary stands in for a conversation's history up to and including
// Through: the model reads it instead of those messages once the
// conversation outgrew its context window. The messages stay in the store.
type Summary struct {
	Text    string
	Through HistoryPos
	// Messages counts the stored messages the summary covers, earlier
	// summaries' included.
	Messages int
}

// ModelHistory is what the model sees of a conversation: the newest summary
// (zero when there is none) and the messages after it, in history order.
// Pos[i] is the position of Messages[i].
type ModelHistory struct {
	Summary  Summary
	Messages []Message
	Pos      []HistoryPos
}

// ContextStatus is how full the model's context is, for /status.
type ContextStatus struct {
	// Tokens is the size of the newest request plus its answer.
	Tokens int
	// Window is the model's context window; 0 when unknown.
	Window int
	// Compactions counts summaries written since the last reset.
	Compactions int
}

// String renders it as "context 41 % · 2 compactions".
func (s ContextStatus) String() string {
	pct := "?"
	if s.Window > 0 {
		pct = fmt.Sprintf("%d %%", s.Tokens*100/s.Window)
	}
	noun := "compactions"
	if s.Compactions == 1 {
		noun = "compaction"
	}
	return fmt.Sprintf("context %s · %d %s", pct, s.Compactions, noun)
}

// ContextStore keeps the model's view of long conversations. History keeps
// returning everything since the last reset (for transcripts); ModelHistory
// is the shorter view built from the newest summary.
type ContextStore interface {
	// ModelHistory returns the newest summary of the conversation's current
	// generation and the started turns' messages after it, through turn
	// through (0: every turn): a turn's view never holds a later turn.
	ModelHistory(ctx context.Context, key ConversationKey, through TurnID) (ModelHistory, error)
	// AddSummary stores a summary of the history through s.Through in one
	// transaction; from then on ModelHistory starts after it.
	AddSummary(ctx context.Context, key ConversationKey, s Summary) error
	// RecordContextUse keeps the newest request's size for ContextStatus.
	RecordContextUse(ctx context.Context, key ConversationKey, u ContextUse) error
	// ContextStatus reports the newest use and the compactions since the
	// last reset.
	ContextStatus(ctx context.Context, key ConversationKey) (ContextStatus, error)
}
