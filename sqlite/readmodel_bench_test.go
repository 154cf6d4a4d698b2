package sqlite

import (
	"context"
	"slices"
	"testing"
	"time"

	"conch"
)

// BenchmarkSummariesOfABigStore: the dashboard's list (every conversation,
// polled every 3 s while open) and a web chat's list (its own
// conversations, polled every 10 s by every open page) over a store of 300
// conversations of 100 turns and 100 model calls each. Before migration
// 0015 every poll added up every turn and call of every conversation
// (0.13 s at this size, 0.32 s at 300 turns each).
func BenchmarkSummariesOfABigStore(b *testing.B) {
	ctx := context.Background()
	d, err := Open(ctx, b.TempDir()+"/conch.db")
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	const convs, turns = 300, 100
	// Rows written as the store's statements would leave them, in one
	// transaction: the figures are the reads'.
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		sql string
		n   int
	}{
		{`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO conversations (channel, key_id, created_at) SELECT 'web', 'c' || i, 0 FROM n`, convs},
		{`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO turns (conversation_id, generation, channel, sender, status, created_at)
			SELECT c.id, 0, 'web', 'u', 'done', n.i FROM conversations c, n`, turns},
		{`INSERT INTO messages (conversation_id, turn_id, generation, role, text, created_at)
			SELECT conversation_id, id, 0, 'user', 'hello', created_at FROM turns WHERE id > ?`, 0},
		{`INSERT INTO model_usage (conversation_id, turn_id, channel, sender, model, input_tokens, cached_tokens, output_tokens, cost_usd, at)
			SELECT conversation_id, id, 'web', 'u', 'm', 100, 0, 10, 0.01, created_at FROM turns WHERE id > ?`, 0},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.n); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	var mine []conch.ConversationKey
	for _, id := range []string{"c1", "c50", "c100", "c150", "c200"} {
		mine = append(mine, conch.ConversationKey{Channel: conch.ChannelWeb, ID: id})
	}
	const samples = 50
	measure := func(name string, keys []conch.ConversationKey, want int) {
		lat := make([]time.Duration, 0, samples)
		for range samples {
			start := time.Now()
			ss, err := d.ConversationSummaries(ctx, keys...)
			if err != nil || len(ss) != want {
				b.Fatalf("%d summaries, %v; want %d", len(ss), err, want)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e6, name+"-p50-ms")
	}
	b.ResetTimer()
	for range b.N {
		measure("all", nil, convs)
		measure("five", mine, len(mine))
	}
}
