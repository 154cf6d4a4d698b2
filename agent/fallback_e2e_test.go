package agent_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/internal/testenv/fakellm"
	"conch/llm/anthropic"
	"conch/llm/openai"
	"conch/sqlite/sqlitetest"
)

// A fallback whose window is smaller than the primary's compacts the
// history first: the conversation fits the primary's 64k window unfolded,
// but is past 70 % of the fallback's 8k, so the fallback's first call is the
// summary and the turn's request carries it.
func TestFallbackWithSmallerWindowCompactsFirst(t *testing.T) {
	ctx := context.Background()
	srv := fakellm.New(t)
	var limited atomic.Bool
	srv.Handle(func(r fakellm.Request) fakellm.Reply {
		switch {
		case r.Provider == fakellm.OpenAI && limited.Load():
			return fakellm.Error(429, "rate limited")
		case r.Provider == fakellm.OpenAI:
			return fakellm.Text("answer: " + strings.Repeat("words ", 400))
		case isSummaryCall(r):
			return fakellm.Text("SUMMARY: the person counted turns.")
		}
		if !strings.Contains(r.System, "SUMMARY: the person counted turns.") {
			t.Errorf("the fallback's turn request lacks the summary; %d messages", len(r.Messages))
		}
		if got := len(r.Body) / 4; got > testWindow {
			t.Errorf("the fallback's request is %d tokens, over its window of %d", got, testWindow)
		}
		return fakellm.Text("answered by the fallback")
	})
	db := sqlitetest.MustOpenMemory(t)
	primary, err := openai.New(openai.Config{BaseURL: srv.BaseURL(fakellm.OpenAI), APIKey: "k", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	backup, err := anthropic.New(anthropic.Config{BaseURL: srv.BaseURL(fakellm.Anthropic), APIKey: "k", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{
		Model: primary, ContextWindow: 64000, Fallbacks: []agent.Fallback{{Model: backup, ContextWindow: testWindow}},
		Tools: []conch.Tool{echoTool{}}, Store: db, Context: db, MaxTokens: 512, MaxTurns: 10, Retry: agent.RetryPolicy{Max: 1},
		Sleep: func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := runTurn(ctx, t, a, db, i); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
	}
	if st, _ := db.ContextStatus(ctx, ctxKey); st.Compactions != 0 {
		t.Fatalf("the primary compacted (%d) in its large window", st.Compactions)
	}
	limited.Store(true)
	id, err := runTurn(ctx, t, a, db, 12)
	if err != nil {
		t.Fatalf("turn on the fallback: %v", err)
	}
	steps, err := db.Steps(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range steps {
		kinds = append(kinds, string(s.Kind))
	}
	fb, cp := slices.Index(kinds, string(conch.StepFallback)), slices.Index(kinds, string(conch.StepCompaction))
	if fb < 0 || cp < fb {
		t.Fatalf("steps %v: want a fallback, then a compaction", kinds)
	}
	var anth []fakellm.Request
	for _, r := range srv.Requests() {
		if r.Provider == fakellm.Anthropic {
			anth = append(anth, r)
		}
	}
	if len(anth) < 2 || !isSummaryCall(anth[0]) || isSummaryCall(anth[len(anth)-1]) {
		t.Errorf("fallback requests: %d, first a summary %v; want the summary first, then the turn", len(anth), len(anth) > 0 && isSummaryCall(anth[0]))
	}
	msgs, err := db.TurnMessages(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if last := msgs[len(msgs)-1]; last.Text != "answered by the fallback" {
		t.Errorf("answer %q", last.Text)
	}
}
