package sqlite_test

import (
	"context"
	"testing"
	"time"

	"conch"
	"conch/sqlite/sqlitetest"
)

// Usage rows add up exactly per scope and per report group, cached tokens
// included; the budget's sums see only the day asked for.
func TestUsageSumsAndReports(t *testing.T) {
	ctx := context.Background()
	db := sqlitetest.MustOpenMemory(t)
	alice := conch.UserKey{Channel: roomA.Channel, ID: "@alice:example.org"}
	bob := conch.UserKey{Channel: roomB.Channel, ID: "@bob:example.org"}
	add := func(in conch.Inbound) conch.Turn {
		tr, _, err := db.AddInbound(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	ta := add(conch.Inbound{Key: roomA, Sender: alice.ID, Text: "a"})
	tb := add(conch.Inbound{Key: roomB, Sender: bob.ID, Text: "b"})
	yesterday := time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC)
	today := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	calls := []conch.ModelCall{
		{At: yesterday, Key: roomA, Turn: ta.ID, Person: alice, Model: "openai/gpt-4o", Usage: conch.Usage{InputTokens: 1000, CachedTokens: 200, OutputTokens: 50}, CostUSD: 0.5},
		{At: today, Key: roomA, Turn: ta.ID, Person: alice, Model: "openai/gpt-4o", Usage: conch.Usage{InputTokens: 2000, CachedTokens: 1024, OutputTokens: 70}, CostUSD: 0.25},
		{At: today.Add(time.Minute), Key: roomA, Turn: ta.ID, Person: alice, Model: "anthropic/claude-sonnet-4-5", Fallback: true, Usage: conch.Usage{InputTokens: 3000, OutputTokens: 30, Estimated: true}, CostUSD: 0.125},
		{At: today, Key: roomB, Turn: tb.ID, Person: bob, Model: "openai/gpt-4o", Purpose: "summary", Usage: conch.Usage{InputTokens: 400, CachedTokens: 0, OutputTokens: 100}, CostUSD: 1},
	}
	for _, c := range calls {
		if err := db.RecordUsage(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RecordUsage(ctx, conch.ModelCall{Key: conch.ConversationKey{Channel: "cli", ID: "nobody"}, Model: "x"}); conch.KindOf(err) != conch.KindNotFound {
		t.Errorf("usage of an unknown conversation: got %v, want not found", err)
	}

	day := conch.DayStart(today)
	for _, tc := range []struct {
		name  string
		scope conch.UsageScope
		since time.Time
		want  conch.UsageTotal
	}{
		{"all today", conch.UsageScope{}, day, conch.UsageTotal{Calls: 3, InputTokens: 5400, CachedTokens: 1024, OutputTokens: 200, Estimated: 1, CostUSD: 1.375}},
		{"all ever", conch.UsageScope{}, time.Time{}, conch.UsageTotal{Calls: 4, InputTokens: 6400, CachedTokens: 1224, OutputTokens: 250, Estimated: 1, CostUSD: 1.875}},
		{"conversation today", conch.UsageScope{Key: roomA}, day, conch.UsageTotal{Calls: 2, InputTokens: 5000, CachedTokens: 1024, OutputTokens: 100, Estimated: 1, CostUSD: 0.375}},
		{"person today", conch.UsageScope{Person: bob}, day, conch.UsageTotal{Calls: 1, InputTokens: 400, OutputTokens: 100, CostUSD: 1}},
	} {
		if got := must(db.UsageSince(ctx, tc.scope, tc.since)).ok(t); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}

	byDay := must(db.UsageReport(ctx, conch.ByDay, time.Time{})).ok(t)
	if len(byDay) != 2 || byDay[0].Group != "2026-11-24" || byDay[1].Group != "2026-11-25" || byDay[1].Calls != 3 {
		t.Errorf("by day: got %+v", byDay)
	}
	byModel := must(db.UsageReport(ctx, conch.ByModel, time.Time{})).ok(t)
	if len(byModel) != 2 || byModel[0].Group != "openai/gpt-4o" || byModel[0].CostUSD != 1.75 || byModel[0].CachedTokens != 1224 {
		t.Errorf("by model: got %+v", byModel)
	}
	byPerson := must(db.UsageReport(ctx, conch.ByPerson, day)).ok(t)
	if len(byPerson) != 2 || byPerson[0].Group != bob.String() || byPerson[1].Group != alice.String() {
		t.Errorf("by person: got %+v", byPerson)
	}
	byConv := must(db.UsageReport(ctx, conch.ByConversation, time.Time{})).ok(t)
	if len(byConv) != 2 || byConv[0].Group != roomB.String() || byConv[0].CostUSD != 1 || byConv[1].CostUSD != 0.875 {
		t.Errorf("by conversation: got %+v", byConv)
	}
	if _, err := db.UsageReport(ctx, "week", time.Time{}); conch.KindOf(err) != conch.KindInvalid {
		t.Errorf("usage by week: got %v, want invalid", err)
	}

	// The dashboard's summaries carry each conversation's totals.
	for _, sum := range must(db.ConversationSummaries(ctx)).ok(t) {
		if sum.Key == roomA && (sum.Tokens != 6150 || sum.CostUSD != 0.875) {
			t.Errorf("summary of %s: tokens %d cost %v, want 6150 and 0.875", roomA, sum.Tokens, sum.CostUSD)
		}
	}

	turn := must(db.TurnUsage(ctx, ta.ID)).ok(t)
	if turn.Calls != 3 || turn.Tokens() != 6150 || turn.Group != "openai/gpt-4o, anthropic/claude-sonnet-4-5" {
		t.Errorf("turn usage: got %+v", turn)
	}
	model, fallback, err := db.LastModel(ctx, roomA)
	if err != nil || model != "anthropic/claude-sonnet-4-5" || !fallback {
		t.Errorf("last model: got %q %v %v", model, fallback, err)
	}
	if model, _, err := db.LastModel(ctx, roomB); err != nil || model != "" {
		t.Errorf("last model without a turn's own call: got %q %v, want none", model, err)
	}
}
