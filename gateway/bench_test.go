package gateway

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/fake"
	"conch/sqlite/sqlitetest"
)

// benchEnv is a gateway over a real file-backed store and an instant model,
// so the figures are the gateway's own overhead: allowlist, durable store
// writes, queueing, the agent loop's bookkeeping and delivery.
func benchEnv(b *testing.B) (*Gateway, *fake.Channel, func()) {
	b.Helper()
	db := sqlitetest.MustOpenFile(b)
	model := &fake.Model{Func: func(_ context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
		return conch.ModelResponse{Text: "re: " + req.Messages[len(req.Messages)-1].Text, StopReason: conch.StopEnd}, nil
	}}
	ag, err := agent.New(agent.Options{Model: model, Store: db, Facts: db})
	if err != nil {
		b.Fatal(err)
	}
	ch := fake.NewChannel(cli)
	gw, err := New(Options{Store: db, Agent: ag, Channels: []conch.Channel{ch}, Facts: db,
		Allow: map[conch.ChannelName]Allowlist{cli: NewAllowlist("*")}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	for {
		gw.mu.Lock()
		ok := gw.ctx != nil
		gw.mu.Unlock()
		if ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return gw, ch, func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkMessageLatency measures one message from HandleInbound to its
// reply being sent, one at a time, and reports p50/p99. Every 20 messages go
// to a new conversation, so the figure is the gateway's overhead rather than
// the cost of an ever longer history.
func BenchmarkMessageLatency(b *testing.B) {
	gw, ch, stop := benchEnv(b)
	defer stop()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		key := conch.ConversationKey{Channel: cli, ID: fmt.Sprint("bench", i/20)}
		start := time.Now()
		if err := gw.HandleInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: fmt.Sprint("m", i)}); err != nil {
			b.Fatal(err)
		}
		if _, err := ch.WaitSent(ctx, func(out []conch.Outbound) bool { return countReplies(out) == i+1 }); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkSustained runs 100 conversations × 20 messages concurrently per
// iteration and checks none is lost or duplicated; it reports messages/s.
func BenchmarkSustained(b *testing.B) {
	const convs, perConv = 100, 20
	gw, ch, stop := benchEnv(b)
	defer stop()
	ctx := context.Background()
	b.ResetTimer()
	var total time.Duration
	for it := range b.N {
		start := time.Now()
		var wg sync.WaitGroup
		for c := range convs {
			wg.Go(func() {
				key := conch.ConversationKey{Channel: cli, ID: fmt.Sprintf("it%d-c%d", it, c)}
				for m := range perConv {
					if err := gw.HandleInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: fmt.Sprintf("it%d c%d m%d", it, c, m)}); err != nil {
						b.Error(err)
					}
				}
			})
		}
		wg.Wait()
		want := (it + 1) * convs * perConv
		if _, err := ch.WaitSent(ctx, func(out []conch.Outbound) bool { return countReplies(out) >= want }); err != nil {
			b.Fatal(err)
		}
		if err := gw.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.StopTimer()
	// None lost, none duplicated, each conversation in order.
	seen := map[string]int{}
	order := map[conch.ConversationKey][]string{}
	for _, o := range ch.Sent() {
		if o.Kind != conch.OutboundReply {
			continue
		}
		seen[o.Text]++
		order[o.Key] = append(order[o.Key], o.Text)
	}
	if len(seen) != b.N*convs*perConv {
		b.Fatalf("%d distinct replies, want %d", len(seen), b.N*convs*perConv)
	}
	for text, n := range seen {
		if n != 1 {
			b.Fatalf("%q answered %d times", text, n)
		}
	}
	for key, texts := range order {
		want := slices.Clone(texts)
		slices.SortFunc(want, func(a, b string) int { return msgIndex(a) - msgIndex(b) })
		if !slices.Equal(texts, want) {
			b.Fatalf("%s answered out of order: %v", key, texts)
		}
	}
	b.ReportMetric(float64(b.N*convs*perConv)/total.Seconds(), "msgs/s")
}

func countReplies(out []conch.Outbound) int {
	n := 0
	for _, o := range out {
		if o.Kind == conch.OutboundReply {
			n++
		}
	}
	return n
}

func msgIndex(text string) int {
	var it, c, m int
	fmt.Sscanf(text, "re: it%d c%d m%d", &it, &c, &m)
	return m
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
