// Package storetest is the contract test suite of conch.Store. Every
// implementation (the SQLite store, the fake) runs it:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) conch.Store { return sqlitetest.MustOpenMemory(t) })
//	}
//
// It uses only the conch.Store interface. Times in it are whole milliseconds
// in UTC, the precision stores are required to keep.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"conch"
)

// Open returns a new, empty store; the suite does not close it (register a
// cleanup in Open).
type Open func(t *testing.T) conch.Store

// Run runs the whole contract against stores made by open.
func Run(t *testing.T, open Open) {
	t.Run("AddInbound", func(t *testing.T) { testAddInbound(t, open) })
	t.Run("AddInboundInvalid", func(t *testing.T) { testAddInboundInvalid(t, open) })
	t.Run("Duplicate", func(t *testing.T) { testDuplicate(t, open) })
	t.Run("TurnLifecycle", func(t *testing.T) { testTurnLifecycle(t, open) })
	t.Run("UnfinishedTurns", func(t *testing.T) { testUnfinishedTurns(t, open) })
	t.Run("History", func(t *testing.T) { testHistory(t, open) })
	t.Run("AppendMessageInvalid", func(t *testing.T) { testAppendMessageInvalid(t, open) })
	t.Run("Notes", func(t *testing.T) { testNotes(t, open) })
	t.Run("Reset", func(t *testing.T) { testReset(t, open) })
	t.Run("Conversations", func(t *testing.T) { testConversations(t, open) })
	t.Run("RecordStep", func(t *testing.T) { testRecordStep(t, open) })
	t.Run("Facts", func(t *testing.T) { testFacts(t, open) })
	t.Run("FactsInvalid", func(t *testing.T) { testFactsInvalid(t, open) })
	t.Run("Cursors", func(t *testing.T) { testCursors(t, open) })
	t.Run("Markers", func(t *testing.T) { testMarkers(t, open) })
	t.Run("Sent", func(t *testing.T) { testSent(t, open) })
	t.Run("Audit", func(t *testing.T) { testAudit(t, open) })
}

var (
	keyA  = conch.ConversationKey{Channel: conch.ChannelMatrix, ID: "!a:example.org"}
	keyB  = conch.ConversationKey{Channel: conch.ChannelEmail, ID: "bob@example.org"}
	epoch = time.Date(2025, 3, 1, 12, 0, 0, 123e6, time.UTC)
)

// Inbound returns a complete inbound message for tests.
func Inbound(key conch.ConversationKey, ext, text string) conch.Inbound {
	return conch.Inbound{
		Key:        key,
		Sender:     "@alice:example.org",
		SenderName: "Alice",
		Text:       text,
		ExternalID: ext,
		Thread:     conch.Thread{Subject: "Re: " + text, References: []string{"<1@x>", "<2@x>"}},
		ReceivedAt: epoch,
	}
}

func add(t *testing.T, s conch.Store, in conch.Inbound) conch.Turn {
	t.Helper()
	tr, dup, err := s.AddInbound(context.Background(), in)
	if err != nil {
		t.Fatalf("AddInbound(%q): %v", in.Text, err)
	}
	if dup {
		t.Fatalf("AddInbound(%q): got dup = true, want false", in.Text)
	}
	return tr
}

func start(t *testing.T, s conch.Store, id conch.TurnID) conch.Turn {
	t.Helper()
	tr, err := s.StartTurn(context.Background(), id)
	if err != nil {
		t.Fatalf("StartTurn(%d): %v", id, err)
	}
	return tr
}

func appendMsg(t *testing.T, s conch.Store, id conch.TurnID, m conch.Message) {
	t.Helper()
	if err := s.AppendMessage(context.Background(), id, m); err != nil {
		t.Fatalf("AppendMessage(%d, %+v): %v", id, m, err)
	}
}

func history(t *testing.T, s conch.Store, key conch.ConversationKey) []conch.Message {
	t.Helper()
	ms, err := s.History(context.Background(), key)
	if err != nil {
		t.Fatalf("History(%s): %v", key, err)
	}
	return ms
}

func unfinished(t *testing.T, s conch.Store) []conch.Turn {
	t.Helper()
	ts, err := s.UnfinishedTurns(context.Background())
	if err != nil {
		t.Fatalf("UnfinishedTurns: %v", err)
	}
	return ts
}

func wantKind(t *testing.T, what string, err error, kind conch.ErrorKind) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want one of kind %s", what, kind)
		return
	}
	if got := conch.KindOf(err); got != kind {
		t.Errorf("%s: got error %q of kind %s, want kind %s", what, err, got, kind)
	}
}

func ids(ts []conch.Turn) []conch.TurnID {
	out := make([]conch.TurnID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// sameTurn compares turns ignoring CreatedAt, which the store stamps.
func sameTurn(t *testing.T, what string, got, want conch.Turn) {
	t.Helper()
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func testAddInbound(t *testing.T, open Open) {
	s := open(t)
	in := Inbound(keyA, "$ev1", "hello")
	tr := add(t, s, in)
	if tr.ID <= 0 {
		t.Errorf("got turn id %d, want > 0", tr.ID)
	}
	if tr.CreatedAt.IsZero() {
		t.Errorf("got zero CreatedAt, want the time the turn was stored")
	}
	sameTurn(t, "AddInbound turn", tr, conch.Turn{ID: tr.ID, Key: keyA, Inbound: in, Status: conch.TurnPending})

	// A second message gets a later turn; an inbound without ReceivedAt is stamped.
	in2 := Inbound(keyA, "", "again")
	in2.ReceivedAt = time.Time{}
	in2.Thread = conch.Thread{}
	tr2 := add(t, s, in2)
	if tr2.ID <= tr.ID {
		t.Errorf("second turn id %d, want > %d", tr2.ID, tr.ID)
	}
	if tr2.Inbound.ReceivedAt.IsZero() {
		t.Errorf("got zero ReceivedAt for an inbound without one, want the time it was stored")
	}
}

func testAddInboundInvalid(t *testing.T, open Open) {
	s := open(t)
	for _, tc := range []struct {
		name string
		in   conch.Inbound
	}{
		{"empty key", conch.Inbound{Sender: "u", Text: "x"}},
		{"no channel", conch.Inbound{Key: conch.ConversationKey{ID: "x"}, Sender: "u", Text: "x"}},
		{"no id", conch.Inbound{Key: conch.ConversationKey{Channel: conch.ChannelWeb}, Sender: "u", Text: "x"}},
		{"no sender", conch.Inbound{Key: keyA, Text: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.AddInbound(context.Background(), tc.in)
			wantKind(t, "AddInbound", err, conch.KindInvalid)
		})
	}
	if got := unfinished(t, s); len(got) != 0 {
		t.Errorf("after refused inbounds got %d unfinished turns, want 0", len(got))
	}
}

func testDuplicate(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	first := add(t, s, Inbound(keyA, "$ev1", "hello"))
	start(t, s, first.ID)

	redelivered := Inbound(keyA, "$ev1", "hello (redelivered)")
	got, dup, err := s.AddInbound(ctx, redelivered)
	if err != nil {
		t.Fatalf("AddInbound(redelivery): %v", err)
	}
	if !dup {
		t.Errorf("redelivery: got dup = false, want true")
	}
	if got.ID != first.ID || got.Inbound.Text != "hello" || got.Status != conch.TurnRunning {
		t.Errorf("redelivery: got turn %d %q %s, want the existing turn %d %q running", got.ID, got.Inbound.Text, got.Status, first.ID, "hello")
	}

	// The same external id on another channel is another message.
	other := Inbound(conch.ConversationKey{Channel: conch.ChannelTelegram, ID: "42"}, "$ev1", "hi")
	if tr := add(t, s, other); tr.ID == first.ID {
		t.Errorf("same external id on another channel: got the existing turn, want a new one")
	}
	// Messages without an external id are never duplicates.
	a := add(t, s, Inbound(keyA, "", "one"))
	b := add(t, s, Inbound(keyA, "", "one"))
	if a.ID == b.ID {
		t.Errorf("two messages without external id: got one turn %d, want two", a.ID)
	}
	// The redelivery added nothing to the history.
	if got := history(t, s, keyA); len(got) != 1 || got[0].Text != "hello" {
		t.Errorf("history after redelivery: got %+v, want the one message", got)
	}
}

func testTurnLifecycle(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	in := Inbound(keyA, "$ev1", "hello")
	tr := add(t, s, in)

	got := start(t, s, tr.ID)
	sameTurn(t, "StartTurn", got, conch.Turn{ID: tr.ID, Key: keyA, Inbound: in, Status: conch.TurnRunning, Attempts: 1})
	// A resumed turn counts another attempt.
	if got := start(t, s, tr.ID); got.Attempts != 2 || got.Status != conch.TurnRunning {
		t.Errorf("second StartTurn: got %s with %d attempts, want running with 2", got.Status, got.Attempts)
	}
	if err := s.FinishTurn(ctx, tr.ID, conch.TurnDone, ""); err != nil {
		t.Fatalf("FinishTurn: %v", err)
	}
	if got := unfinished(t, s); len(got) != 0 {
		t.Errorf("after FinishTurn got unfinished %v, want none", ids(got))
	}
	_, err := s.StartTurn(ctx, tr.ID)
	wantKind(t, "StartTurn of a done turn", err, conch.KindInvalid)

	_, err = s.StartTurn(ctx, 999999)
	wantKind(t, "StartTurn of an unknown turn", err, conch.KindNotFound)
	wantKind(t, "FinishTurn of an unknown turn", s.FinishTurn(ctx, 999999, conch.TurnDone, ""), conch.KindNotFound)
	for _, st := range []conch.TurnStatus{"", conch.TurnPending, conch.TurnRunning, "bogus"} {
		wantKind(t, fmt.Sprintf("FinishTurn(status %q)", st), s.FinishTurn(ctx, tr.ID, st, ""), conch.KindInvalid)
	}

	// A stopped turn keeps its reason.
	tr2 := add(t, s, Inbound(keyA, "$ev2", "loop forever"))
	start(t, s, tr2.ID)
	if err := s.FinishTurn(ctx, tr2.ID, conch.TurnStopped, "breaker: repeated tool call"); err != nil {
		t.Fatalf("FinishTurn(stopped): %v", err)
	}
	got, err = s.StartTurn(ctx, tr2.ID)
	wantKind(t, "StartTurn of a stopped turn", err, conch.KindInvalid)
	if err != nil && got.ID == tr2.ID && got.StoppedReason != "breaker: repeated tool call" {
		t.Errorf("stopped turn: got reason %q, want %q", got.StoppedReason, "breaker: repeated tool call")
	}
}

func testUnfinishedTurns(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	a1 := add(t, s, Inbound(keyA, "$a1", "a1"))
	b1 := add(t, s, Inbound(keyB, "<b1@x>", "b1"))
	a2 := add(t, s, Inbound(keyA, "$a2", "a2"))
	b2 := add(t, s, Inbound(keyB, "<b2@x>", "b2"))
	start(t, s, a1.ID)
	start(t, s, b1.ID)
	if err := s.FinishTurn(ctx, b1.ID, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTurn(ctx, b2.ID, conch.TurnAbandoned, "resumed too often"); err != nil {
		t.Fatal(err)
	}
	got := unfinished(t, s)
	if want := []conch.TurnID{a1.ID, a2.ID}; !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("UnfinishedTurns: got %v, want %v (oldest first)", ids(got), want)
	}
	sameTurn(t, "running turn", got[0], conch.Turn{ID: a1.ID, Key: keyA, Inbound: Inbound(keyA, "$a1", "a1"), Status: conch.TurnRunning, Attempts: 1})
	sameTurn(t, "pending turn", got[1], conch.Turn{ID: a2.ID, Key: keyA, Inbound: Inbound(keyA, "$a2", "a2"), Status: conch.TurnPending})
}

func testHistory(t *testing.T, open Open) {
	s := open(t)
	if got := history(t, s, keyA); len(got) != 0 {
		t.Errorf("history of an unknown conversation: got %+v, want none", got)
	}
	_, err := s.History(context.Background(), conch.ConversationKey{})
	wantKind(t, "History(empty key)", err, conch.KindInvalid)

	t1 := add(t, s, Inbound(keyA, "$1", "list files"))
	start(t, s, t1.ID)
	// A second message arrives while the first turn works: it is queued and
	// not part of the first turn's history.
	t2 := add(t, s, Inbound(keyA, "$2", "and then?"))
	add(t, s, Inbound(keyB, "<x@y>", "other conversation"))

	call := conch.ToolCall{ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls -la"}`)}
	msgs1 := []conch.Message{
		{Role: conch.RoleUser, Text: "list files"},
		{Role: conch.RoleAssistant, Text: "Looking.", ToolCalls: []conch.ToolCall{call, {ID: "call_2", Name: "noargs"}}},
		{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "call_1", Name: "bash", Content: "a\nb\n"}},
		{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "call_2", Name: "noargs", Content: "boom", IsError: true}},
		{Role: conch.RoleAssistant, Text: "Two files: a and b."},
	}
	for _, m := range msgs1[1:] {
		appendMsg(t, s, t1.ID, m)
	}
	if got := history(t, s, keyA); !reflect.DeepEqual(got, msgs1) {
		t.Errorf("history during turn 1:\n got %+v\nwant %+v", got, msgs1)
	}
	if err := s.FinishTurn(context.Background(), t1.ID, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}
	start(t, s, t2.ID)
	appendMsg(t, s, t2.ID, conch.Message{Role: conch.RoleAssistant, Text: "Nothing else."})
	want := append(append([]conch.Message(nil), msgs1...),
		conch.Message{Role: conch.RoleUser, Text: "and then?"},
		conch.Message{Role: conch.RoleAssistant, Text: "Nothing else."})
	if got := history(t, s, keyA); !reflect.DeepEqual(got, want) {
		t.Errorf("history during turn 2:\n got %+v\nwant %+v", got, want)
	}
}

// testNotes: a note conch writes into a turn is kept in its place with the
// Note mark, and the turn's own message stays the person's: looking the turn
// up finds it once, with the person's text.
func testNotes(t *testing.T, open Open) {
	s := open(t)
	tr := add(t, s, Inbound(keyA, "$1", "fix it"))
	start(t, s, tr.ID)
	appendMsg(t, s, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "done"})
	appendMsg(t, s, tr.ID, conch.Message{Role: conch.RoleUser, Note: true, Text: "[check] tests fail"})
	appendMsg(t, s, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "fixed"})
	want := []conch.Message{
		{Role: conch.RoleUser, Text: "fix it"},
		{Role: conch.RoleAssistant, Text: "done"},
		{Role: conch.RoleUser, Note: true, Text: "[check] tests fail"},
		{Role: conch.RoleAssistant, Text: "fixed"},
	}
	if got := history(t, s, keyA); !reflect.DeepEqual(got, want) {
		t.Fatalf("history %+v, want %+v", got, want)
	}
	if got := unfinished(t, s); len(got) != 1 || got[0].ID != tr.ID || got[0].Inbound.Text != "fix it" {
		t.Fatalf("unfinished turns %+v, want turn %d once with the person's text", got, tr.ID)
	}
}

func testAppendMessageInvalid(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	tr := add(t, s, Inbound(keyA, "$1", "hi"))
	start(t, s, tr.ID)
	for _, tc := range []struct {
		name string
		m    conch.Message
	}{
		{"user role", conch.Message{Role: conch.RoleUser, Text: "x"}},
		{"note with a tool call", conch.Message{Role: conch.RoleUser, Note: true, ToolCalls: []conch.ToolCall{{ID: "c", Name: "bash"}}}},
		{"no role", conch.Message{Text: "x"}},
		{"unknown role", conch.Message{Role: "system", Text: "x"}},
		{"tool without result", conch.Message{Role: conch.RoleTool, Text: "x"}},
		{"assistant with result", conch.Message{Role: conch.RoleAssistant, ToolResult: &conch.ToolResult{CallID: "c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantKind(t, "AppendMessage", s.AppendMessage(ctx, tr.ID, tc.m), conch.KindInvalid)
		})
	}
	wantKind(t, "AppendMessage to an unknown turn",
		s.AppendMessage(ctx, 999999, conch.Message{Role: conch.RoleAssistant, Text: "x"}), conch.KindNotFound)
	if got := history(t, s, keyA); len(got) != 1 {
		t.Errorf("history after refused messages: got %d messages, want 1", len(got))
	}
}

func testReset(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	done := add(t, s, Inbound(keyA, "$1", "old question"))
	start(t, s, done.ID)
	appendMsg(t, s, done.ID, conch.Message{Role: conch.RoleAssistant, Text: "old answer"})
	if err := s.FinishTurn(ctx, done.ID, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}
	running := add(t, s, Inbound(keyA, "$2", "long job"))
	start(t, s, running.ID)
	pending := add(t, s, Inbound(keyA, "$3", "queued"))
	other := add(t, s, Inbound(keyB, "<1@x>", "untouched"))
	start(t, s, other.ID)

	if err := s.ResetConversation(ctx, keyA); err != nil {
		t.Fatalf("ResetConversation: %v", err)
	}
	if got := history(t, s, keyA); len(got) != 0 {
		t.Errorf("history after reset: got %+v, want none", got)
	}
	if got := ids(unfinished(t, s)); !reflect.DeepEqual(got, []conch.TurnID{other.ID}) {
		t.Errorf("unfinished after reset: got %v, want only the other conversation's %v", got, other.ID)
	}
	for _, id := range []conch.TurnID{running.ID, pending.ID} {
		tr, err := s.StartTurn(ctx, id)
		wantKind(t, fmt.Sprintf("StartTurn(%d) after reset", id), err, conch.KindInvalid)
		if err != nil && tr.ID == id && (tr.Status != conch.TurnStopped || tr.StoppedReason != "reset") {
			t.Errorf("turn %d after reset: got %s %q, want stopped %q", id, tr.Status, tr.StoppedReason, "reset")
		}
	}
	// The turn that was running when the reset came may still write; its
	// messages belong to the forgotten history.
	appendMsg(t, s, running.ID, conch.Message{Role: conch.RoleAssistant, Text: "late answer"})
	// A message after the reset starts a fresh history.
	fresh := add(t, s, Inbound(keyA, "$4", "new start"))
	start(t, s, fresh.ID)
	want := []conch.Message{{Role: conch.RoleUser, Text: "new start"}}
	if got := history(t, s, keyA); !reflect.DeepEqual(got, want) {
		t.Errorf("history after reset and a new message:\n got %+v\nwant %+v", got, want)
	}
	// A redelivery of a message from before the reset is still a duplicate.
	if _, dup, err := s.AddInbound(ctx, Inbound(keyA, "$1", "old question")); err != nil || !dup {
		t.Errorf("redelivery after reset: got dup=%v err=%v, want dup", dup, err)
	}
	if got := history(t, s, keyB); len(got) != 1 {
		t.Errorf("other conversation after reset: got %d messages, want 1", len(got))
	}
	if err := s.ResetConversation(ctx, conch.ConversationKey{Channel: conch.ChannelWeb, ID: "never-seen"}); err != nil {
		t.Errorf("ResetConversation(unknown): got %v, want nil", err)
	}
	wantKind(t, "ResetConversation(empty key)", s.ResetConversation(ctx, conch.ConversationKey{}), conch.KindInvalid)
}

func testConversations(t *testing.T, open Open) {
	s := open(t)
	ks, err := s.Conversations(context.Background())
	if err != nil || len(ks) != 0 {
		t.Fatalf("Conversations of an empty store: got %v, %v, want none", ks, err)
	}
	add(t, s, Inbound(keyA, "$1", "x"))
	add(t, s, Inbound(keyA, "$2", "y"))
	add(t, s, Inbound(keyB, "<1@x>", "z"))
	ks, err = s.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[conch.ConversationKey]int{}
	for _, k := range ks {
		got[k]++
	}
	if want := map[conch.ConversationKey]int{keyA: 1, keyB: 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("Conversations: got %v, want %v", ks, []conch.ConversationKey{keyA, keyB})
	}
}

func testRecordStep(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	tr := add(t, s, Inbound(keyA, "$1", "x"))
	if err := s.RecordStep(ctx, conch.Step{Turn: tr.ID, Kind: conch.StepModelCall, Detail: json.RawMessage(`{"model":"m"}`), At: epoch}); err != nil {
		t.Errorf("RecordStep: %v", err)
	}
	if err := s.RecordStep(ctx, conch.Step{Turn: tr.ID, Kind: conch.StepStopped}); err != nil {
		t.Errorf("RecordStep without detail and time: %v", err)
	}
	wantKind(t, "RecordStep without kind", s.RecordStep(ctx, conch.Step{Turn: tr.ID}), conch.KindInvalid)
	wantKind(t, "RecordStep of an unknown turn", s.RecordStep(ctx, conch.Step{Turn: 999999, Kind: conch.StepModelCall}), conch.KindNotFound)
}

func testFacts(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	alice := conch.UserKey{Channel: conch.ChannelMatrix, ID: "@alice:example.org"}
	bob := conch.UserKey{Channel: conch.ChannelMatrix, ID: "@bob:example.org"}
	// The same id on another channel is another person.
	aliceTG := conch.UserKey{Channel: conch.ChannelTelegram, ID: "@alice:example.org"}

	remember := func(u conch.UserKey, k, v string) {
		t.Helper()
		if err := s.Remember(ctx, u, k, v); err != nil {
			t.Fatalf("Remember(%s, %q): %v", u, k, err)
		}
	}
	facts := func(u conch.UserKey) map[string]string {
		t.Helper()
		fs, err := s.Facts(ctx, u)
		if err != nil {
			t.Fatalf("Facts(%s): %v", u, err)
		}
		m := map[string]string{}
		for _, f := range fs {
			if f.UpdatedAt.IsZero() {
				t.Errorf("fact %q of %s: zero UpdatedAt", f.Key, u)
			}
			m[f.Key] = f.Value
		}
		return m
	}
	if got := facts(alice); len(got) != 0 {
		t.Errorf("facts of a new user: got %v, want none", got)
	}
	remember(alice, "timezone", "Europe/Berlin")
	remember(alice, "editor", "vim")
	remember(bob, "editor", "emacs")
	remember(aliceTG, "editor", "nano")
	remember(alice, "editor", "helix") // replaces

	for _, tc := range []struct {
		user conch.UserKey
		want map[string]string
	}{
		{alice, map[string]string{"timezone": "Europe/Berlin", "editor": "helix"}},
		{bob, map[string]string{"editor": "emacs"}},
		{aliceTG, map[string]string{"editor": "nano"}},
	} {
		if got := facts(tc.user); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Facts(%s): got %v, want %v", tc.user, got, tc.want)
		}
	}
	if ok, err := s.Forget(ctx, alice, "editor"); err != nil || !ok {
		t.Errorf("Forget(existing): got %v, %v, want true, nil", ok, err)
	}
	if ok, err := s.Forget(ctx, alice, "editor"); err != nil || ok {
		t.Errorf("Forget(gone): got %v, %v, want false, nil", ok, err)
	}
	if got, want := facts(alice), map[string]string{"timezone": "Europe/Berlin"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Facts after Forget: got %v, want %v", got, want)
	}
	if got, want := facts(bob), map[string]string{"editor": "emacs"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Facts of another user after Forget: got %v, want %v", got, want)
	}
}

func testFactsInvalid(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	alice := conch.UserKey{Channel: conch.ChannelMatrix, ID: "@alice:example.org"}
	for _, tc := range []struct {
		name       string
		user       conch.UserKey
		key, value string
	}{
		{"empty user", conch.UserKey{}, "k", "v"},
		{"user without channel", conch.UserKey{ID: "x"}, "k", "v"},
		{"user without id", conch.UserKey{Channel: conch.ChannelWeb}, "k", "v"},
		{"empty key", alice, "", "v"},
		{"empty value", alice, "k", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantKind(t, "Remember", s.Remember(ctx, tc.user, tc.key, tc.value), conch.KindInvalid)
		})
	}
	_, err := s.Forget(ctx, alice, "")
	wantKind(t, "Forget(empty key)", err, conch.KindInvalid)
	_, err = s.Facts(ctx, conch.UserKey{})
	wantKind(t, "Facts(empty user)", err, conch.KindInvalid)
}

func testCursors(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	if got, err := s.Cursor(ctx, "matrix.sync"); err != nil || got != "" {
		t.Errorf("Cursor(unset): got %q, %v, want \"\", nil", got, err)
	}
	for _, v := range []string{"s1_2_3", "s4_5_6"} {
		if err := s.SetCursor(ctx, "matrix.sync", v); err != nil {
			t.Fatalf("SetCursor(%q): %v", v, err)
		}
		if got, err := s.Cursor(ctx, "matrix.sync"); err != nil || got != v {
			t.Errorf("Cursor after SetCursor(%q): got %q, %v", v, got, err)
		}
	}
	if err := s.SetCursor(ctx, "imap.INBOX", "17:42"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Cursor(ctx, "matrix.sync"); got != "s4_5_6" {
		t.Errorf("Cursor(matrix.sync) after setting another cursor: got %q, want %q", got, "s4_5_6")
	}
	_, err := s.Cursor(ctx, "")
	wantKind(t, "Cursor(\"\")", err, conch.KindInvalid)
	wantKind(t, "SetCursor(\"\")", s.SetCursor(ctx, "", "x"), conch.KindInvalid)
}

func testMarkers(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	for i, want := range []bool{true, false, false} {
		if first, err := s.Mark(ctx, "command", "matrix:$ev"); err != nil || first != want {
			t.Errorf("Mark #%d: got %v, %v; want %v", i+1, first, err, want)
		}
	}
	if first, err := s.Mark(ctx, "other", "matrix:$ev"); err != nil || !first {
		t.Errorf("Mark in another scope: got %v, %v; want first", first, err)
	}
	_, err := s.Mark(ctx, "", "x")
	wantKind(t, "Mark(empty scope)", err, conch.KindInvalid)
	_, err = s.Mark(ctx, "command", "")
	wantKind(t, "Mark(empty id)", err, conch.KindInvalid)
}

func testSent(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	if _, ok, err := s.SentConversation(ctx, keyB.Channel, "conch.1@example.org"); err != nil || ok {
		t.Errorf("SentConversation(unknown): got %v, %v; want none", ok, err)
	}
	if err := s.RecordSent(ctx, keyB, "conch.1@example.org"); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.SentConversation(ctx, keyB.Channel, "conch.1@example.org"); err != nil || !ok || got != keyB {
		t.Errorf("SentConversation: got %v %v, %v; want %v", got, ok, err, keyB)
	}
	if _, ok, err := s.SentConversation(ctx, keyA.Channel, "conch.1@example.org"); err != nil || ok {
		t.Errorf("SentConversation on another channel: got %v, %v; want none", ok, err)
	}
	wantKind(t, "RecordSent(empty id)", s.RecordSent(ctx, keyB, ""), conch.KindInvalid)
}

func testAudit(t *testing.T, open Open) {
	s := open(t)
	ctx := context.Background()
	if err := s.Audit(ctx, conch.AuditEvent{At: epoch, Kind: "exec", Conversation: keyA, Detail: json.RawMessage(`{"cmd":"ls"}`)}); err != nil {
		t.Errorf("Audit: %v", err)
	}
	if err := s.Audit(ctx, conch.AuditEvent{Kind: "startup"}); err != nil {
		t.Errorf("Audit without conversation, time or detail: %v", err)
	}
	wantKind(t, "Audit without kind", s.Audit(ctx, conch.AuditEvent{Conversation: keyA}), conch.KindInvalid)
}
