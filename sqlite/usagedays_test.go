package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"conch"
)

// usageCall is a model call of the tests below: costs are multiples of
// 1/1024, so every order of adding them gives the same float.
func usageCall(r *rand.Rand, key conch.ConversationKey, person conch.UserKey, at time.Time) conch.ModelCall {
	return conch.ModelCall{Key: key, Person: person, Model: "m", At: at,
		Usage:   conch.Usage{InputTokens: r.IntN(5000), CachedTokens: r.IntN(100), OutputTokens: r.IntN(500), Estimated: r.IntN(3) == 0},
		CostUSD: float64(r.IntN(4096)) / 1024}
}

// sumCalls adds up calls the way UsageSince must.
func sumCalls(calls []conch.ModelCall, keep func(conch.ModelCall) bool) conch.UsageTotal {
	var t conch.UsageTotal
	for _, c := range calls {
		if !keep(c) {
			continue
		}
		t.Calls++
		t.InputTokens += c.Usage.InputTokens
		t.CachedTokens += c.Usage.CachedTokens
		t.OutputTokens += c.Usage.OutputTokens
		if c.Usage.Estimated {
			t.Estimated++
		}
		t.CostUSD += c.CostUSD
	}
	return t
}

// TestUsageDaysMatchTheCalls: the days' sums that budgets read (migration
// 0014's triggers) equal the calls added up, for everybody and each person,
// from any day on, with calls on every side of midnight; calls that leave
// model_usage (their conversation deleted) leave the sums too; and a store
// that had usage before 0014 gets its days filled in by the migration. So
// do each conversation's turn count, tokens and cost (0015).
func TestUsageDaysMatchTheCalls(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 22))
	midnight := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	keys := []conch.ConversationKey{{Channel: "cli", ID: "a"}, {Channel: "cli", ID: "b"}, {Channel: "telegram", ID: "c"}}
	people := []conch.UserKey{{Channel: "cli", ID: "u1"}, {Channel: "cli", ID: "u2"}, {Channel: "telegram", ID: "u1"}}
	calls := func(n int) []conch.ModelCall {
		var cs []conch.ModelCall
		for range n {
			// Around four midnights, to the millisecond on either side.
			at := midnight.Add(time.Duration(r.IntN(4))*24*time.Hour + time.Duration(r.IntN(2001)-1000)*time.Millisecond)
			if r.IntN(4) == 0 {
				at = midnight.Add(time.Duration(r.Int64N(int64(96 * time.Hour))))
			}
			i := r.IntN(len(keys))
			cs = append(cs, usageCall(r, keys[i], people[i], at))
		}
		return cs
	}
	record := func(d *DB, cs []conch.ModelCall) {
		for _, c := range cs {
			if err := d.RecordUsage(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(d *DB, cs []conch.ModelCall, when string) {
		t.Helper()
		for day := midnight.Add(-24 * time.Hour); !day.After(midnight.Add(5 * 24 * time.Hour)); day = day.Add(24 * time.Hour) {
			from := func(c conch.ModelCall) bool { return !c.At.Before(day) }
			got, err := d.UsageSince(ctx, conch.UsageScope{}, day)
			if want := sumCalls(cs, from); err != nil || got != want {
				t.Errorf("%s: everybody since %s: got %+v (%v), want %+v", when, day.Format(time.DateOnly), got, err, want)
			}
			for _, p := range people {
				got, err := d.UsageSince(ctx, conch.UsageScope{Person: p}, day)
				want := sumCalls(cs, func(c conch.ModelCall) bool { return c.Person == p && from(c) })
				if err != nil || got != want {
					t.Errorf("%s: %s since %s: got %+v (%v), want %+v", when, p, day.Format(time.DateOnly), got, err, want)
				}
			}
		}
		got, err := d.UsageSince(ctx, conch.UsageScope{}, time.Time{})
		if want := sumCalls(cs, func(conch.ModelCall) bool { return true }); err != nil || got != want {
			t.Errorf("%s: everybody ever: got %+v (%v), want %+v", when, got, err, want)
		}
	}
	addConversations := func(d *DB) {
		for i, k := range keys {
			if _, _, err := d.AddInbound(ctx, conch.Inbound{Key: k, Sender: people[i].ID, Text: "x"}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// totals checks each conversation's turns and its calls' tokens and cost
	// in its summary (migration 0015's counts).
	totals := func(d *DB, cs []conch.ModelCall, turns func(int) int, when string) {
		t.Helper()
		for n, k := range keys {
			ss, err := d.ConversationSummaries(ctx, k)
			if err != nil || len(ss) != 1 {
				t.Fatalf("%s: summary of %s: %+v, %v", when, k, ss, err)
			}
			want := sumCalls(cs, func(c conch.ModelCall) bool { return c.Key == k })
			if got := ss[0]; got.Turns != turns(n) || got.Tokens != want.InputTokens+want.OutputTokens || got.CostUSD != want.CostUSD {
				t.Errorf("%s: summary of %s: turns %d, tokens %d, cost %v; want %d, %d, %v",
					when, k, got.Turns, got.Tokens, got.CostUSD, turns(n), want.InputTokens+want.OutputTokens, want.CostUSD)
			}
		}
	}
	turnsOf := func(n int) int { return 3 + 2*n }

	t.Run("kept by the triggers", func(t *testing.T) {
		d, err := Open(ctx, MemoryPath)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		addConversations(d)
		cs := calls(400)
		record(d, cs)
		check(d, cs, "recorded")
		totals(d, cs, func(int) int { return 1 }, "recorded")
		// A conversation's rows go with it (ON DELETE CASCADE).
		if _, err := d.w.ExecContext(ctx, `DELETE FROM conversations WHERE channel = ? AND key_id = ?`, keys[0].Channel, keys[0].ID); err != nil {
			t.Fatal(err)
		}
		var left []conch.ModelCall
		for _, c := range cs {
			if c.Key != keys[0] {
				left = append(left, c)
			}
		}
		check(d, left, "after deleting "+keys[0].String())
	})

	t.Run("filled in by the migration", func(t *testing.T) {
		ms, err := loadMigrations(migrationFS)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ms, func(m migration) bool { return m.name == "0014_usage_days.sql" })
		if i < 0 {
			t.Fatal("no migration 0014_usage_days.sql")
		}
		// A store of a conch from before 0014, with its usage.
		path := t.TempDir() + "/conch.db"
		cs := calls(300)
		func() {
			db, err := openPool(path, options{sync: SyncInbound}, false, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := migrate(ctx, conn, ms[:i]); err != nil {
				t.Fatal(err)
			}
			for n, k := range keys {
				if _, err := conn.ExecContext(ctx, `INSERT INTO conversations (channel, key_id, created_at) VALUES (?, ?, 0)`, k.Channel, k.ID); err != nil {
					t.Fatal(err)
				}
				for range turnsOf(n) {
					if _, err := conn.ExecContext(ctx, `INSERT INTO turns (conversation_id, generation, channel, sender, status, created_at)
						SELECT id, 0, channel, 'u', 'done', 0 FROM conversations WHERE channel = ? AND key_id = ?`, k.Channel, k.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, c := range cs {
				u := c.Usage
				if _, err := conn.ExecContext(ctx, `INSERT INTO model_usage (conversation_id, turn_id, channel, sender, model,
					input_tokens, cached_tokens, output_tokens, estimated, cost_usd, at)
					SELECT id, 0, ?, ?, 'm', ?, ?, ?, ?, ?, ? FROM conversations WHERE channel = ? AND key_id = ?`,
					c.Person.Channel, string(c.Person.ID), u.InputTokens, u.CachedTokens, u.OutputTokens, u.Estimated,
					c.CostUSD, millis(c.At), c.Key.Channel, c.Key.ID); err != nil {
					t.Fatal(err)
				}
			}
		}()
		d, err := Open(ctx, path) // applies 0014 and what follows
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		check(d, cs, "migrated")
		totals(d, cs, turnsOf, "migrated")
		more := calls(50)
		record(d, more)
		check(d, append(cs, more...), "migrated, then recorded")
		totals(d, append(cs, more...), turnsOf, "migrated, then recorded")
	})
}

// BenchmarkBudgetCheck: what a daily budget's check reads with 10,000 model
// calls recorded today, for everybody and for one person: the days' sums
// (what UsageSince reads from the start of a day) against adding up the
// calls themselves (what it read before migration 0014, and still reads
// from a time within a day), each in its own loop.
func BenchmarkBudgetCheck(b *testing.B) {
	ctx := context.Background()
	d, err := Open(ctx, b.TempDir()+"/conch.db")
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Now().UTC()
	day := conch.DayStart(now)
	var keys []conch.ConversationKey
	for i := range 50 {
		k := conch.ConversationKey{Channel: "cli", ID: fmt.Sprint("c", i)}
		keys = append(keys, k)
		if _, _, err := d.AddInbound(ctx, conch.Inbound{Key: k, Sender: "u", Text: "x"}); err != nil {
			b.Fatal(err)
		}
	}
	person := conch.UserKey{Channel: "cli", ID: "u"}
	const calls = 10000
	for i := range calls {
		at := day.Add(time.Duration(r.Int64N(int64(now.Sub(day) + 1))))
		if err := d.RecordUsage(ctx, usageCall(r, keys[i%len(keys)], person, at)); err != nil {
			b.Fatal(err)
		}
	}
	const samples = 200
	measure := func(name string, scope conch.UsageScope, since time.Time) {
		lat := make([]time.Duration, 0, samples)
		for range samples {
			start := time.Now()
			if _, err := d.UsageSince(ctx, scope, since); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, name+"-p50-us")
	}
	b.ResetTimer()
	for range b.N {
		measure("days-all", conch.UsageScope{}, day)
		measure("calls-all", conch.UsageScope{}, day.Add(time.Millisecond))
		measure("days-person", conch.UsageScope{Person: person}, day)
		measure("calls-person", conch.UsageScope{Person: person}, day.Add(time.Millisecond))
	}
}
