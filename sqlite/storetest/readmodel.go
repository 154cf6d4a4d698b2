package storetest

import (
	"context"
	"encoding/json"
	"testing"

	"conch"
)

// ReadModelStore is a store that also answers the read models.
type ReadModelStore interface {
	conch.Store
	conch.ReadModel
}

// OpenReadModel returns a new, empty store with read models.
type OpenReadModel func(t *testing.T) ReadModelStore

// RunReadModel runs the contract of conch.ReadModel against stores made by
// open. Orders that depend on the clock are left to each store's own tests.
func RunReadModel(t *testing.T, open OpenReadModel) {
	t.Run("SummariesEmpty", func(t *testing.T) { testSummariesEmpty(t, open) })
	t.Run("SummaryStates", func(t *testing.T) { testSummaryStates(t, open) })
	t.Run("SummaryLastError", func(t *testing.T) { testSummaryLastError(t, open) })
	t.Run("SummariesOfKeys", func(t *testing.T) { testSummariesOfKeys(t, open) })
	t.Run("Turns", func(t *testing.T) { testTurns(t, open) })
	t.Run("AuditSince", func(t *testing.T) { testAuditSince(t, open) })
}

func summaries(t *testing.T, s ReadModelStore) map[conch.ConversationKey]conch.ConversationSummary {
	t.Helper()
	ss, err := s.ConversationSummaries(context.Background())
	if err != nil {
		t.Fatalf("ConversationSummaries: %v", err)
	}
	m := make(map[conch.ConversationKey]conch.ConversationSummary, len(ss))
	for _, c := range ss {
		if _, ok := m[c.Key]; ok {
			t.Errorf("ConversationSummaries: %s listed twice", c.Key)
		}
		m[c.Key] = c
	}
	return m
}

func finish(t *testing.T, s conch.Store, id conch.TurnID, status conch.TurnStatus, reason string) {
	t.Helper()
	if err := s.FinishTurn(context.Background(), id, status, reason); err != nil {
		t.Fatalf("FinishTurn(%d, %s): %v", id, status, err)
	}
}

func testSummariesEmpty(t *testing.T, open OpenReadModel) {
	s := open(t)
	ss, err := s.ConversationSummaries(context.Background())
	if err != nil || len(ss) != 0 {
		t.Errorf("ConversationSummaries of an empty store: got %+v, %v; want none", ss, err)
	}
}

func testSummaryStates(t *testing.T, open OpenReadModel) {
	s := open(t)
	// keyA: one turn answered, one running, one queued by another sender.
	a1 := add(t, s, Inbound(keyA, "$a1", "first"))
	start(t, s, a1.ID)
	appendMsg(t, s, a1.ID, conch.Message{Role: conch.RoleAssistant, Text: "answer one"})
	finish(t, s, a1.ID, conch.TurnDone, "")
	a2 := add(t, s, Inbound(keyA, "$a2", "second"))
	start(t, s, a2.ID)
	in := Inbound(keyA, "$a3", "third")
	in.Sender = "@carol:example.org"
	add(t, s, in)
	// keyB: two queued turns, none started.
	add(t, s, Inbound(keyB, "b1", "mail one"))
	add(t, s, Inbound(keyB, "b2", "mail two"))

	got := summaries(t, s)
	if len(got) != 2 {
		t.Fatalf("ConversationSummaries: got %d conversations, want 2: %+v", len(got), got)
	}
	a := got[keyA]
	if a.State != conch.ConversationRunning || a.Pending != 1 || a.Turns != 3 {
		t.Errorf("summary of %s: got state %s, pending %d, turns %d; want running, 1, 3", keyA, a.State, a.Pending, a.Turns)
	}
	if a.LastMessage != "third" || a.LastRole != conch.RoleUser || a.LastSender != "@carol:example.org" {
		t.Errorf("summary of %s: got last %q (%s) from %q; want %q (user) from @carol:example.org",
			keyA, a.LastMessage, a.LastRole, a.LastSender, "third")
	}
	if a.LastAt.IsZero() || a.LastError != "" {
		t.Errorf("summary of %s: got last at %v, last error %q; want a time and no error", keyA, a.LastAt, a.LastError)
	}
	b := got[keyB]
	if b.State != conch.ConversationQueued || b.Pending != 2 || b.Turns != 2 || b.LastMessage != "mail two" {
		t.Errorf("summary of %s: got %+v; want queued, 2 pending, 2 turns, last %q", keyB, b, "mail two")
	}

	// The running turn answers: its answer is now the last message.
	appendMsg(t, s, a2.ID, conch.Message{Role: conch.RoleAssistant, Text: "answer two"})
	finish(t, s, a2.ID, conch.TurnDone, "")
	a = summaries(t, s)[keyA]
	if a.State != conch.ConversationQueued || a.LastMessage != "answer two" || a.LastRole != conch.RoleAssistant {
		t.Errorf("summary of %s after the answer: got state %s, last %q (%s); want queued, %q (assistant)",
			keyA, a.State, a.LastMessage, a.LastRole, "answer two")
	}

	// A reset cancels the queued turn: idle, every turn still counted.
	if err := s.ResetConversation(context.Background(), keyA); err != nil {
		t.Fatalf("ResetConversation: %v", err)
	}
	a = summaries(t, s)[keyA]
	if a.State != conch.ConversationIdle || a.Pending != 0 || a.Turns != 3 || a.LastError != "" {
		t.Errorf("summary of %s after reset: got %+v; want idle, 0 pending, 3 turns, no error", keyA, a)
	}
}

func testSummaryLastError(t *testing.T, open OpenReadModel) {
	s := open(t)
	t1 := add(t, s, Inbound(keyA, "$1", "one"))
	start(t, s, t1.ID)
	finish(t, s, t1.ID, conch.TurnStopped, "error_model")
	t2 := add(t, s, Inbound(keyA, "$2", "two"))
	start(t, s, t2.ID)
	finish(t, s, t2.ID, conch.TurnStopped, "user_stop") // not an error
	if got := summaries(t, s)[keyA]; got.LastError != "error_model" || got.State != conch.ConversationIdle {
		t.Errorf("summary: got last error %q, state %s; want error_model, idle", got.LastError, got.State)
	}
	t3 := add(t, s, Inbound(keyA, "$3", "three"))
	start(t, s, t3.ID)
	finish(t, s, t3.ID, conch.TurnStopped, "error_tool")
	if got := summaries(t, s)[keyA]; got.LastError != "error_tool" || got.Turns != 3 {
		t.Errorf("summary: got last error %q, turns %d; want error_tool, 3", got.LastError, got.Turns)
	}
}

// testSummariesOfKeys: with keys, the summaries of those conversations that
// exist (an unknown key is left out), as the whole list has them.
func testSummariesOfKeys(t *testing.T, open OpenReadModel) {
	s := open(t)
	ctx := context.Background()
	a1 := add(t, s, Inbound(keyA, "$a1", "first"))
	start(t, s, a1.ID)
	appendMsg(t, s, a1.ID, conch.Message{Role: conch.RoleAssistant, Text: "answer"})
	finish(t, s, a1.ID, conch.TurnDone, "")
	add(t, s, Inbound(keyA, "$a2", "second"))
	add(t, s, Inbound(keyB, "b1", "mail"))
	all := summaries(t, s)
	unknown := conch.ConversationKey{Channel: keyA.Channel, ID: "nobody-here"}
	some, err := s.ConversationSummaries(ctx, keyB, unknown, keyA)
	if err != nil {
		t.Fatalf("ConversationSummaries(%s, %s, %s): %v", keyB, unknown, keyA, err)
	}
	if len(some) != 2 {
		t.Fatalf("ConversationSummaries of two known keys and an unknown one: got %+v", some)
	}
	for _, got := range some {
		if want := all[got.Key]; got != want {
			t.Errorf("summary of %s by key: got %+v, want %+v (as in the whole list)", got.Key, got, want)
		}
	}
	if one, err := s.ConversationSummaries(ctx, keyB); err != nil || len(one) != 1 || one[0].Key != keyB || one[0].Turns != 1 {
		t.Errorf("ConversationSummaries(%s): got %+v, %v", keyB, one, err)
	}
}

func testTurns(t *testing.T, open OpenReadModel) {
	s := open(t)
	ctx := context.Background()
	var want []conch.Turn
	for i, ext := range []string{"$1", "$2", "$3"} {
		tr := add(t, s, Inbound(keyA, ext, "message "+ext))
		if i == 0 {
			start(t, s, tr.ID)
			finish(t, s, tr.ID, conch.TurnDone, "")
			tr.Status, tr.Attempts = conch.TurnDone, 1
		}
		want = append([]conch.Turn{tr}, want...)
	}
	add(t, s, Inbound(keyB, "b1", "elsewhere"))

	got, err := s.Turns(ctx, keyA, 10)
	if err != nil {
		t.Fatalf("Turns: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Turns(%s, 10): got %v, want %v", keyA, ids(got), ids(want))
	}
	for i := range want {
		sameTurn(t, "Turns", got[i], want[i])
	}
	if got, err := s.Turns(ctx, keyA, 2); err != nil || len(got) != 2 || got[0].ID != want[0].ID || got[1].ID != want[1].ID {
		t.Errorf("Turns(%s, 2): got %v, %v; want %v", keyA, ids(got), err, ids(want[:2]))
	}
	unknown := conch.ConversationKey{Channel: conch.ChannelWeb, ID: "nobody"}
	if got, err := s.Turns(ctx, unknown, 10); err != nil || len(got) != 0 {
		t.Errorf("Turns of an unknown conversation: got %v, %v; want none", ids(got), err)
	}
	_, err = s.Turns(ctx, keyA, 0)
	wantKind(t, "Turns(limit 0)", err, conch.KindInvalid)
	_, err = s.Turns(ctx, conch.ConversationKey{}, 10)
	wantKind(t, "Turns(empty key)", err, conch.KindInvalid)
}

func testAuditSince(t *testing.T, open OpenReadModel) {
	s := open(t)
	ctx := context.Background()
	kinds := []conch.AuditKind{"startup", conch.AuditExec, conch.AuditSandboxCreate}
	for _, k := range kinds {
		if err := s.Audit(ctx, conch.AuditEvent{At: epoch, Kind: k, Conversation: keyA, Detail: json.RawMessage(`{"n":1}`)}); err != nil {
			t.Fatalf("Audit(%s): %v", k, err)
		}
	}
	all, err := s.AuditSince(ctx, 0, 10)
	if err != nil || len(all) != len(kinds) {
		t.Fatalf("AuditSince(0, 10): got %+v, %v; want %d records", all, err, len(kinds))
	}
	for i, r := range all {
		if r.Kind != kinds[i] || r.Conversation != keyA || !r.At.Equal(epoch) || string(r.Detail) != `{"n":1}` {
			t.Errorf("AuditSince record %d: got %+v, want kind %s of %s at %v", i, r, kinds[i], keyA, epoch)
		}
		if i > 0 && r.ID <= all[i-1].ID {
			t.Errorf("AuditSince: ids not increasing: %d after %d", r.ID, all[i-1].ID)
		}
	}
	// A reader pages on with the last id it saw.
	page, err := s.AuditSince(ctx, all[0].ID, 1)
	if err != nil || len(page) != 1 || page[0].ID != all[1].ID {
		t.Errorf("AuditSince(%d, 1): got %+v, %v; want record %d", all[0].ID, page, err, all[1].ID)
	}
	if rest, err := s.AuditSince(ctx, all[len(all)-1].ID, 10); err != nil || len(rest) != 0 {
		t.Errorf("AuditSince(last id): got %+v, %v; want none", rest, err)
	}
	_, err = s.AuditSince(ctx, 0, 0)
	wantKind(t, "AuditSince(limit 0)", err, conch.KindInvalid)
}
