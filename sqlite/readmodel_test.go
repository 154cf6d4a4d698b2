package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"conch"
	"conch/sqlite"
	"conch/sqlite/sqlitetest"
	"conch/sqlite/storetest"
)

// Summaries come most recently active first, by the time of the last
// message; a conversation without one counts from its creation.
func TestConversationSummariesOrder(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	db := sqlitetest.MustOpenMemory(t, sqlite.WithClock(func() time.Time { return now }))
	keys := []conch.ConversationKey{
		{Channel: conch.ChannelWeb, ID: "old"},
		{Channel: conch.ChannelWeb, ID: "new"},
		{Channel: conch.ChannelMatrix, ID: "!middle:x"},
	}
	turns := map[conch.ConversationKey]conch.Turn{}
	for i, k := range keys {
		now = now.Add(time.Minute)
		turns[k] = addTurn(t, db, storetest.Inbound(k, fmt.Sprint("e", i), "hello "+k.ID))
	}
	// "old" gets an answer last: it is now the most recent.
	now = now.Add(time.Minute)
	check(t, db.AppendMessage(ctx, turns[keys[0]].ID, conch.Message{Role: conch.RoleAssistant, Text: "late answer"}))

	ss := must(db.ConversationSummaries(ctx)).ok(t)
	var got []string
	for _, s := range ss {
		got = append(got, s.Key.ID)
	}
	want := []string{"old", "!middle:x", "new"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ConversationSummaries order: got %v, want %v", got, want)
	}
	if !ss[0].LastAt.Equal(now) || ss[0].LastMessage != "late answer" {
		t.Errorf("first summary: got last %q at %v, want %q at %v", ss[0].LastMessage, ss[0].LastAt, "late answer", now)
	}
}

// The summaries keep their answers after a reopen of the file (the
// migration's indexes are in the file, not built per connection).
func TestConversationSummariesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	db := open(t, path)
	tr := addTurn(t, db, storetest.Inbound(roomA, "$1", "hi"))
	must(db.StartTurn(ctx, tr.ID)).ok(t)
	mustClose(t, db)
	db = open(t, path)
	defer mustClose(t, db)
	ss := must(db.ConversationSummaries(ctx)).ok(t)
	if len(ss) != 1 || ss[0].State != conch.ConversationRunning || ss[0].LastMessage != "hi" {
		t.Errorf("summaries after reopen: got %+v, want one running conversation with last message %q", ss, "hi")
	}
}

// BenchmarkConversationSummaries: the dashboard's list over 1,000
// conversations of 20 messages each (10 answered turns).
func BenchmarkConversationSummaries(b *testing.B) {
	const conversations, turnsEach = 1000, 10
	for _, s := range []struct {
		name string
		path func(b *testing.B) string
	}{
		{"memory", func(*testing.B) string { return sqlite.MemoryPath }},
		{"file", func(b *testing.B) string { return filepath.Join(b.TempDir(), "c.db") }},
	} {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			db := benchOpen(b, s.path(b), sqlite.WithSync(sqlite.SyncNormal))
			for n := range conversations * turnsEach {
				key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: fmt.Sprint("c", n%conversations)}
				tr, _, err := db.AddInbound(ctx, storetest.Inbound(key, fmt.Sprint("m", n), "hello there"))
				if err == nil {
					_, err = db.StartTurn(ctx, tr.ID)
				}
				if err == nil {
					err = db.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "Hello! How can I help?"})
				}
				if err == nil {
					err = db.FinishTurn(ctx, tr.ID, conch.TurnDone, "")
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				ss, err := db.ConversationSummaries(ctx)
				if err != nil || len(ss) != conversations {
					b.Fatalf("got %d summaries, %v; want %d", len(ss), err, conversations)
				}
			}
		})
	}
}
