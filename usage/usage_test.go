package usage_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/sqlite/sqlitetest"
	"conch/usage"
)

func TestPrices(t *testing.T) {
	p := usage.NewPrices(usage.Price{Model: "openai/gpt-4o", Input: 1, Cached: 0, Output: 2, Date: "2026-11-25", Source: "config"})
	for _, tc := range []struct {
		model string
		u     conch.Usage
		want  float64
		known bool
	}{
		// The override replaces gpt-4o; no cached rate bills cache as input.
		{"openai/gpt-4o-2024-08-06", conch.Usage{InputTokens: 1_000_000, CachedTokens: 500_000, OutputTokens: 1_000_000}, 3, true},
		// The longer prefix wins: gpt-4o-mini is not gpt-4o.
		{"openai/gpt-4o-mini", conch.Usage{InputTokens: 2_000_000, CachedTokens: 1_000_000, OutputTokens: 1_000_000}, 0.15 + 0.075 + 0.6, true},
		{"anthropic/claude-sonnet-4-5-20250929", conch.Usage{InputTokens: 1_000_000, CachedTokens: 1_000_000}, 0.3, true},
		// Opus 4.6 is on the $5 tier, not under claude-opus-4 with Opus 4.1.
		{"anthropic/claude-opus-4-6", conch.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 30, true},
		{"anthropic/claude-opus-4-1-20250805", conch.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 90, true},
		{"ollama/llama3.1", conch.Usage{InputTokens: 1000}, 0, false},
	} {
		got, known := p.Cost(tc.model, tc.u)
		if known != tc.known || got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("%s: got %v %v, want %v %v", tc.model, got, known, tc.want, tc.known)
		}
	}
	for _, r := range p.Rows() {
		if r.Date == "" || r.Source == "" {
			t.Errorf("price row %s has no date or source", r.Model)
		}
	}
}

type audits []conch.AuditEvent

func (a *audits) Audit(_ context.Context, ev conch.AuditEvent) error { *a = append(*a, ev); return nil }

func TestBudgetRefusesTheCallThatWouldPass(t *testing.T) {
	ctx := context.Background()
	db := sqlitetest.MustOpenMemory(t)
	key := conch.ConversationKey{Channel: "cli", ID: "local"}
	alice := conch.UserKey{Channel: "cli", ID: "alice"}
	tr, _, err := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: alice.ID, Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 21, 30, 0, 0, time.UTC)
	var au audits
	m := usage.NewMeter(usage.Options{Store: db, Audit: &au, Now: func() time.Time { return now },
		Limits: usage.Limits{PersonDailyTokens: 10_000, DailyUSD: 1}})
	call := conch.ModelCall{Key: key, Turn: tr.ID, Person: alice, Model: "openai/gpt-4o"}

	// Yesterday's spending does not count.
	old := call
	old.At, old.Usage = now.Add(-24*time.Hour), conch.Usage{InputTokens: 9000}
	if _, err := m.Record(ctx, old); err != nil {
		t.Fatal(err)
	}
	call.Usage = conch.Usage{InputTokens: 8000, OutputTokens: 500}
	if err := m.Check(ctx, call); err != nil {
		t.Fatalf("first call today: %v", err)
	}
	rec, err := m.Record(ctx, call)
	if err != nil || rec.CostUSD != 0.025 {
		t.Fatalf("record: %+v %v, want cost 0.025", rec, err)
	}
	next := call
	next.Usage = conch.Usage{InputTokens: 1600}
	err = m.Check(ctx, next)
	var be *conch.BudgetError
	if !errors.As(err, &be) || be.Limit != "budget.person_daily_tokens" || !strings.Contains(be.Text, "2h30m") {
		t.Fatalf("check past the person's tokens: got %v", err)
	}
	if len(au) != 1 || au[0].Kind != conch.AuditBudgetRefused || au[0].Conversation != key {
		t.Errorf("audit: got %+v", au)
	}
	if !strings.Contains(m.Report(ctx, key, alice), "8000 in, 500 out — limit 10.0k tokens") {
		t.Errorf("report: %s", m.Report(ctx, key, alice))
	}
}
