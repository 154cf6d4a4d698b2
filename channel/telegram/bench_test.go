package telegram

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/gateway"
	tgfake "conch/internal/testenv/telegram"
	"conch/sqlite"
)

// scriptedRunner stands in for the model: steps tool calls (progress
// events) every gap, then the answer "echo: <text>".
type scriptedRunner struct {
	steps int
	gap   time.Duration
	db    *sqlite.DB // the turn's message is read from it
}

func (r scriptedRunner) Run(ctx context.Context, in agent.Input) (agent.Result, error) {
	for i := range r.steps {
		if in.Events != nil {
			in.Events(conch.ToolStarted{CallID: fmt.Sprint(i), Name: "bash", Summary: fmt.Sprintf("bash `step %d`", i)})
		}
		select {
		case <-time.After(r.gap):
		case <-ctx.Done():
			return agent.Result{}, ctx.Err()
		}
	}
	h, err := r.db.ModelHistory(ctx, in.Env.Conversation, in.Turn)
	if err != nil || len(h.Messages) == 0 {
		return agent.Result{}, fmt.Errorf("read the turn's message: %v", err)
	}
	return agent.Result{Text: "echo: **" + h.Messages[len(h.Messages)-1].Text + "**"}, nil
}

// underGateway runs a channel under the real gateway and SQLite store.
func underGateway(tb testing.TB, srv *tgfake.Server, runner scriptedRunner, mods ...func(*Options)) *Channel {
	tb.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	runner.db = db
	o := Options{Token: srv.Token, APIURL: srv.URL, Cursors: db, Logger: testLogger(), PollTimeout: 5 * time.Second, Backoff: fastBackoff}
	for _, m := range mods {
		m(&o)
	}
	ch, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{
		Store: db, Agent: runner, Channels: []conch.Channel{ch}, Facts: db, Logger: testLogger(),
		Allow: map[conch.ChannelName]gateway.Allowlist{conch.ChannelTelegram: gateway.NewAllowlist("4242", "@alice")},
	})
	if err != nil {
		tb.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(rctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("gateway Run: %v", err)
		}
	})
	select {
	case <-ch.Ready():
	case err := <-done:
		tb.Fatalf("gateway stopped before the channel was ready: %v", err)
	}
	return ch
}

// TestThroughGateway: a message is stored, answered in HTML, and a sender
// off the allowlist gets nothing; a progress message collapses at the end.
func TestThroughGateway(t *testing.T) {
	srv := tgfake.Start(t)
	underGateway(t, srv, scriptedRunner{steps: 3, gap: 20 * time.Millisecond})
	mallory := tgfake.Person(6666, "mallory", "Mallory")
	srv.SendText(mallory, tgfake.PrivateChat(mallory), "me too")
	srv.SendText(alice, tgfake.PrivateChat(alice), "ping")
	msgs := srv.WaitMessages(t, alice.ID, 2, 10*time.Second)
	reply := msgs[len(msgs)-1]
	if reply.Text != "echo: ping" || !hasEntity(reply.Entities, "bold") || reply.Silent {
		t.Fatalf("reply %+v", reply)
	}
	if !msgs[0].Silent {
		t.Fatalf("the progress message notified: %+v", msgs[0])
	}
	waitFor(t, srv, "the collapsed work log", func() bool {
		m, _ := srv.Message(alice.ID, msgs[0].MessageID)
		return hasEntity(m.Entities, "expandable_blockquote")
	})
	if n := len(srv.Sent(mallory.ID)); n != 0 {
		t.Fatalf("mallory got %d answers", n)
	}
}

// BenchmarkUpdateToReply measures a person's message → the bot's answer:
// getUpdates, the gateway storing it, a scripted model, sendMessage.
func BenchmarkUpdateToReply(b *testing.B) {
	srv := tgfake.Start(b)
	underGateway(b, srv, scriptedRunner{})
	chat := tgfake.PrivateChat(alice)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		srv.SendText(alice, chat, fmt.Sprint("m", i))
		srv.WaitMessages(b, alice.ID, i+1, 30*time.Second)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkProgressEdits runs turns whose model calls a tool every 50 ms
// (20 progress events a second) and measures the progress edits that reach
// Telegram: at most one a second per chat is Telegram's limit.
func BenchmarkProgressEdits(b *testing.B) {
	srv := tgfake.Start(b)
	underGateway(b, srv, scriptedRunner{steps: 60, gap: 50 * time.Millisecond})
	chat := tgfake.PrivateChat(alice)
	worst, total, span := 0.0, 0, time.Duration(0)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		srv.SendText(alice, chat, fmt.Sprint("work ", i))
		var replies int
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := srv.Wait(ctx, func() bool {
			replies = 0
			for _, m := range srv.Messages(alice.ID) {
				if !m.Silent {
					replies++
				}
			}
			return replies == i+1
		})
		cancel()
		if err != nil {
			b.Fatal("no answer")
		}
		// Edits per progress message, the busiest second by a sliding
		// window (the final collapse included).
		byMsg := map[int64][]time.Time{}
		var edits []time.Time
		for _, s := range srv.Sent(alice.ID) {
			if s.At.After(start) && s.Method == "editMessageText" {
				byMsg[s.MessageID] = append(byMsg[s.MessageID], s.At)
				edits = append(edits, s.At)
			}
		}
		for _, ts := range byMsg {
			for j := range ts {
				n := 0
				for k := j; k < len(ts) && ts[k].Sub(ts[j]) < time.Second; k++ {
					n++
				}
				worst = max(worst, float64(n))
			}
		}
		total += len(edits)
		span += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/span.Seconds(), "edits/s")
	b.ReportMetric(worst, "max-edits-in-1s")
	if worst > 1 {
		b.Errorf("%v edits of one progress message within one second: over Telegram's limit of about 1/s", worst)
	}
}
