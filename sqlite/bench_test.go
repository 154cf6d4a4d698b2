package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"conch"
	"conch/sqlite"
	"conch/sqlite/storetest"
)

// benchStores are the configurations the benchmarks compare.
var benchStores = []struct {
	name string
	open func(b *testing.B) *sqlite.DB
}{
	{"memory", func(b *testing.B) *sqlite.DB { return benchOpen(b, sqlite.MemoryPath) }},
	{"file-inbound", func(b *testing.B) *sqlite.DB { return benchOpen(b, filepath.Join(b.TempDir(), "c.db")) }},
	{"file-full", func(b *testing.B) *sqlite.DB {
		return benchOpen(b, filepath.Join(b.TempDir(), "c.db"), sqlite.WithSync(sqlite.SyncFull))
	}},
	{"file-normal", func(b *testing.B) *sqlite.DB {
		return benchOpen(b, filepath.Join(b.TempDir(), "c.db"), sqlite.WithSync(sqlite.SyncNormal))
	}},
}

func benchOpen(b *testing.B, path string, opts ...sqlite.Option) *sqlite.DB {
	db, err := sqlite.Open(context.Background(), path, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// handleMessage is what the gateway does with one message that the model
// answers at once: four transactions.
func handleMessage(ctx context.Context, db *sqlite.DB, n int64) error {
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: fmt.Sprint(n % 100)}
	tr, _, err := db.AddInbound(ctx, storetest.Inbound(key, fmt.Sprint("m", n), "hello there"))
	if err != nil {
		return err
	}
	if _, err := db.StartTurn(ctx, tr.ID); err != nil {
		return err
	}
	if err := db.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "Hello! How can I help?"}); err != nil {
		return err
	}
	return db.FinishTurn(ctx, tr.ID, conch.TurnDone, "")
}

// BenchmarkMessage: AddInbound + StartTurn + AppendMessage + FinishTurn.
func BenchmarkMessage(b *testing.B) {
	for _, s := range benchStores {
		b.Run(s.name, func(b *testing.B) {
			db := s.open(b)
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := handleMessage(ctx, db, int64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMessageParallel is BenchmarkMessage from many goroutines at once,
// as many conversations would drive it; concurrent AddInbounds share commits.
func BenchmarkMessageParallel(b *testing.B) {
	for _, s := range benchStores {
		b.Run(s.name, func(b *testing.B) {
			db := s.open(b)
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(16) // 32 goroutines on 2 cores: many conversations at once
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := handleMessage(ctx, db, n.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkBaseline is the floor for BenchmarkMessage on the same
// configuration: four single-row INSERT transactions through database/sql,
// with no store logic.
func BenchmarkBaseline(b *testing.B) {
	for _, s := range benchStores {
		b.Run(s.name, func(b *testing.B) {
			db := s.open(b)
			ctx := context.Background()
			raw := db.SQL()
			if _, err := raw.ExecContext(ctx, `CREATE TABLE baseline (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				for range 4 {
					if _, err := raw.ExecContext(ctx, `INSERT INTO baseline (v) VALUES (?)`, "hello there"); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkHistory reads a 50-turn conversation (100 messages).
func BenchmarkHistory(b *testing.B) {
	db := benchOpen(b, filepath.Join(b.TempDir(), "c.db"), sqlite.WithSync(sqlite.SyncNormal))
	ctx := context.Background()
	for i := range 50 {
		if err := handleMessage(ctx, db, int64(i)*100); err != nil { // all in conversation "0"
			b.Fatal(err)
		}
	}
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: "0"}
	b.ReportAllocs()
	for b.Loop() {
		h, err := db.History(ctx, key)
		if err != nil || len(h) != 100 {
			b.Fatalf("got %d messages, %v; want 100", len(h), err)
		}
	}
}

// BenchmarkModelHistoryTurn is one turn's store work (AddInbound,
// StartTurn, ModelHistory, AppendMessage, FinishTurn) in a conversation
// that already has 10 or 1,000 turns: with the ended turns kept by the
// store, the second costs about what the first does.
func BenchmarkModelHistoryTurn(b *testing.B) {
	for _, turns := range []int{10, 1000} {
		b.Run(fmt.Sprint("turns=", turns), func(b *testing.B) {
			db := benchOpen(b, filepath.Join(b.TempDir(), "c.db"))
			ctx := context.Background()
			key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: "long"}
			n := 0
			turn := func() {
				n++
				text := fmt.Sprintf("message %d: please look at the build log again and tell me which test failed first", n)
				tr, _, err := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: text})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := db.StartTurn(ctx, tr.ID); err != nil {
					b.Fatal(err)
				}
				h, err := db.ModelHistory(ctx, key, tr.ID)
				if err != nil || len(h.Messages) != 2*n-1 {
					b.Fatalf("got %d messages, %v; want %d", len(h.Messages), err, 2*n-1)
				}
				if err := db.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "re: " + text}); err != nil {
					b.Fatal(err)
				}
				if err := db.FinishTurn(ctx, tr.ID, conch.TurnDone, ""); err != nil {
					b.Fatal(err)
				}
			}
			for range turns {
				turn()
			}
			b.ReportAllocs()
			for b.Loop() {
				turn()
			}
		})
	}
}
