package gateway

import (
	"context"
	"strings"
	"testing"

	"conch"
)

// /status shows how full the model's context is when the store knows it.
func TestStatusShowsContext(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	turn, _, err := e.db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.StartTurn(ctx, turn.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.db.FinishTurn(ctx, turn.ID, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}
	v, err := e.db.ModelHistory(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.AddSummary(ctx, key, conch.Summary{Text: "they said hello", Through: v.Pos[0], Messages: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.db.RecordContextUse(ctx, key, conch.ContextUse{InputTokens: 3200, OutputTokens: 80, Window: 8000}); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.send("room", "alice", "/status")
	out := e.waitFor("status", countKind(conch.OutboundNotice, 1))
	if got := out[0].Text; !strings.Contains(got, "context 41 % · 1 compaction") {
		t.Fatalf("status %q lacks the context line", got)
	}
}
