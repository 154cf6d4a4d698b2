package sqlite_test

import (
	"context"
	"testing"

	"conch"
	"conch/sqlite/sqlitetest"
)

func TestModelHistoryAfterSummary(t *testing.T) {
	ctx := context.Background()
	db := sqlitetest.MustOpenMemory(t)
	t1, _, err := db.AddInbound(ctx, conch.Inbound{Key: roomA, Sender: "@alice:example.org", Text: "first"})
	if err != nil {
		t.Fatal(err)
	}
	// The second message arrives while the first turn runs: its user
	// message has a smaller id than the first turn's later messages.
	t2, _, err := db.AddInbound(ctx, conch.Inbound{Key: roomA, Sender: "@alice:example.org", Text: "second"})
	if err != nil {
		t.Fatal(err)
	}
	must(db.StartTurn(ctx, t1.ID)).ok(t)
	call := conch.Message{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "c1", Name: "ls"}}}
	for _, m := range []conch.Message{call,
		{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "c1", Name: "ls", Content: "a b"}},
		{Role: conch.RoleAssistant, Text: "answer one"}} {
		if err := db.AppendMessage(ctx, t1.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	must(db.StartTurn(ctx, t2.ID)).ok(t)

	v := must(db.ModelHistory(ctx, roomA, 0)).ok(t)
	full := must(db.History(ctx, roomA)).ok(t)
	if len(v.Messages) != 5 || len(full) != 5 || len(v.Pos) != 5 || v.Summary.Text != "" {
		t.Fatalf("without a summary: view %d messages (%d positions, summary %q), History %d; want 5 each", len(v.Messages), len(v.Pos), v.Summary.Text, len(full))
	}
	for i := range full {
		if v.Messages[i].Text != full[i].Text || v.Messages[i].Role != full[i].Role {
			t.Errorf("message %d: view %+v, History %+v", i, v.Messages[i], full[i])
		}
	}
	if v.Pos[3].Turn != t1.ID || v.Pos[4].Turn != t2.ID || v.Pos[4].Message >= v.Pos[3].Message {
		t.Fatalf("positions %+v: the second turn's message should sort after the first turn's though its id is smaller", v.Pos)
	}

	// A summary through the first turn's answer: the view keeps the second
	// turn only; History keeps everything.
	s := conch.Summary{Text: "they listed files", Through: v.Pos[3], Messages: 4}
	if err := db.AddSummary(ctx, roomA, s); err != nil {
		t.Fatal(err)
	}
	v = must(db.ModelHistory(ctx, roomA, 0)).ok(t)
	if v.Summary != s || len(v.Messages) != 1 || v.Messages[0].Text != "second" {
		t.Fatalf("after the summary: %+v, %d messages %+v", v.Summary, len(v.Messages), v.Messages)
	}
	if n := len(must(db.History(ctx, roomA)).ok(t)); n != 5 {
		t.Errorf("History after a summary has %d messages, want all 5", n)
	}

	if err := db.RecordContextUse(ctx, roomA, conch.ContextUse{InputTokens: 3000, OutputTokens: 280, Window: 8000}); err != nil {
		t.Fatal(err)
	}
	st := must(db.ContextStatus(ctx, roomA)).ok(t)
	if st != (conch.ContextStatus{Tokens: 3280, Window: 8000, Compactions: 1}) || st.String() != "context 41 % · 1 compaction" {
		t.Errorf("ContextStatus = %+v (%s)", st, st)
	}

	// A reset starts over: no summary, no use, no compactions.
	if err := db.ResetConversation(ctx, roomA); err != nil {
		t.Fatal(err)
	}
	if v := must(db.ModelHistory(ctx, roomA, 0)).ok(t); v.Summary.Text != "" || len(v.Messages) != 0 {
		t.Errorf("after a reset the view is %+v", v)
	}
	if st := must(db.ContextStatus(ctx, roomA)).ok(t); st != (conch.ContextStatus{}) {
		t.Errorf("after a reset ContextStatus = %+v", st)
	}
	if err := db.AddSummary(ctx, roomB, s); conch.KindOf(err) != conch.KindNotFound {
		t.Errorf("AddSummary to an unknown conversation: %v, want KindNotFound", err)
	}
}

// A turn's view runs through that turn: a later turn's messages (one that
// ran first) are never in it.
func TestModelHistoryThroughATurn(t *testing.T) {
	db := sqlitetest.MustOpenMemory(t)
	ctx := context.Background()
	first, _, err := db.AddInbound(ctx, conch.Inbound{Key: roomA, Sender: "@alice:example.org", Text: "first"})
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := db.AddInbound(ctx, conch.Inbound{Key: roomA, Sender: "@alice:example.org", Text: "second"})
	if err != nil {
		t.Fatal(err)
	}
	must(db.StartTurn(ctx, second.ID)).ok(t)
	if err := db.AppendMessage(ctx, second.ID, conch.Message{Role: conch.RoleAssistant, Text: "answer to second"}); err != nil {
		t.Fatal(err)
	}
	must(db.StartTurn(ctx, first.ID)).ok(t)
	v := must(db.ModelHistory(ctx, roomA, first.ID)).ok(t)
	if len(v.Messages) != 1 || v.Messages[0].Text != "first" || v.Pos[0].Turn != first.ID {
		t.Fatalf("turn %d's view: %+v", first.ID, v.Messages)
	}
	if all := must(db.ModelHistory(ctx, roomA, 0)).ok(t); len(all.Messages) != 3 {
		t.Fatalf("the whole view holds %d messages, want 3", len(all.Messages))
	}
}
