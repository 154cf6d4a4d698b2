package conch

import (
	"context"
	"fmt"
	"time"
)

// ModelCall is one model call as it is kept for usage and budgets: whom it
// was for, which model answered, what it counted and what it cost.
type ModelCall struct {
	At   time.Time
	Key  ConversationKey
	Turn TurnID
	// Person is the turn's sender on the conversation's channel (a person
	// is a channel and a sender).
	Person UserKey
	// Model is the configured model that answered, "provider/name".
	Model string
	// Purpose is "summary" for a compaction's call, "" for the turn's own.
	Purpose string
	// Fallback is set when a fallback model answered instead of the primary.
	Fallback bool
	Usage    Usage
	// CostUSD is the call's price by the price table of the day it was made;
	// 0 for a model without a price.
	CostUSD float64
}

// UsageTotal adds up model calls: of one group of a report (Group names it:
// a conversation, a person, a UTC day or a model) or of a budget's scope.
type UsageTotal struct {
	Group        string
	Calls        int
	InputTokens  int
	CachedTokens int
	OutputTokens int
	// Estimated counts the calls whose tokens conch estimated.
	Estimated int
	CostUSD   float64
}

// Tokens is input plus output tokens.
func (t UsageTotal) Tokens() int { return t.InputTokens + t.OutputTokens }

// UsageGroup is how a usage report is grouped.
type UsageGroup string

// Usage report groupings.
const (
	ByConversation UsageGroup = "conversation"
	ByPerson       UsageGroup = "person"
	ByDay          UsageGroup = "day"
	ByModel        UsageGroup = "model"
)

// UsageScope selects the calls a budget counts: all of them (zero value),
// one conversation's or one person's.
type UsageScope struct {
	Key    ConversationKey
	Person UserKey
}

// UsageStore keeps model calls and adds them up.
type UsageStore interface {
	RecordUsage(ctx context.Context, c ModelCall) error
	// UsageSince adds up the calls in scope made at or after since.
	UsageSince(ctx context.Context, scope UsageScope, since time.Time) (UsageTotal, error)
}

// BudgetError refuses a model call that would pass a limit. Text is what
// the person reads; Limit names the configuration key.
type BudgetError struct {
	Limit string
	Text  string
}

func (e *BudgetError) Error() string { return fmt.Sprintf("budget %s reached", e.Limit) }

// DayStart is the start of t's UTC day: budgets are per UTC day.
func DayStart(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
