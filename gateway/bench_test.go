package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/fake"
	"conch/sqlite"
	"conch/sqlite/sqlitetest"
	"conch/usage"
)

// benchEnv is a gateway over a real file-backed store and an instant model,
// so the figures are the gateway's own overhead: allowlist, durable store
// writes, queueing, the agent loop's bookkeeping and delivery.
//
// The store is opened and used as conch up does: a file, WAL, the default
// sync mode (SyncInbound: a message is acknowledged after its group's
// fsync), the event log, usage recorded per model call and the context
// managed in the default window.
func benchEnv(b *testing.B) (*Gateway, *fake.Channel, func()) {
	return benchEnvWith(b, agent.Options{ContextWindow: defaultWindow})
}

// benchEnvWith is benchEnv with agent options (Model, Store, Facts, Meter
// and, with a window, Context are filled in).
func benchEnvWith(b *testing.B, ao agent.Options) (*Gateway, *fake.Channel, func()) {
	b.Helper()
	db := sqlitetest.MustOpenFile(b)
	model := instantModel(func(_ context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
		if req.System == agent.SummaryPrompt {
			// A summary of a fixed size, as a real model writes one.
			return conch.ModelResponse{Text: benchSummary, StopReason: conch.StopEnd}, nil
		}
		return conch.ModelResponse{Text: "re: " + req.Messages[len(req.Messages)-1].Text, StopReason: conch.StopEnd}, nil
	})
	// As conch up wires them: the turn's bookkeeping queued (sqlite.Queued).
	ao.Model, ao.Store, ao.Facts = model, db.Queued(nil), db
	ao.Meter = usage.NewMeter(usage.Options{Store: db.Queued(nil), Audit: db})
	if ao.ContextWindow > 0 {
		ao.Context = db.Queued(nil)
	}
	ag, err := agent.New(ao)
	if err != nil {
		b.Fatal(err)
	}
	ch := fake.NewChannel(cli)
	gw, err := New(Options{Store: db, Agent: ag, Channels: []conch.Channel{ch}, Facts: db, Events: db,
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
// reply being sent, one at a time, and reports p50/p99 in ms over its own
// samples (500 per iteration). Every 20 messages go to a new conversation,
// so the figure is the gateway's overhead rather than the cost of an ever
// longer history.
func BenchmarkMessageLatency(b *testing.B) {
	const samples = 500
	gw, ch, stop := benchEnv(b)
	defer stop()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N*samples)
	b.ResetTimer()
	for it := range b.N {
		for i := range samples {
			key := conch.ConversationKey{Channel: cli, ID: fmt.Sprint("bench", it, "-", i/20)}
			start := time.Now()
			if err := gw.HandleInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: fmt.Sprint("m", i)}); err != nil {
				b.Fatal(err)
			}
			if err := ch.WaitReplies(ctx, len(lat)+1); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.StopTimer()
	reportPercentiles(b, "", lat)
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
		if err := ch.WaitReplies(ctx, want); err != nil {
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

func msgIndex(text string) int {
	var it, c, m int
	fmt.Sscanf(text, "re: it%d c%d m%d", &it, &c, &m)
	return m
}

// reportPercentiles reports the p50 and p99 of lat in milliseconds (with
// nanosecond precision in the float) as "<prefix>p50-ms" and "<prefix>p99-ms".
func reportPercentiles(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	b.ReportMetric(ms(lat[len(lat)/2]), prefix+"p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), prefix+"p99-ms")
}

// instantModel answers at once with what its func returns. Unlike
// fake.Model it keeps nothing: fake.Model clones and keeps every request
// (for tests to look at), which at turn 1,000 of a conversation is a copy
// of hundreds of messages per turn and a heap that grows all run long —
// the harness's cost, not the gateway's.
type instantModel func(context.Context, conch.ModelRequest) (conch.ModelResponse, error)

func (instantModel) Name() string { return "instant" }

func (m instantModel) Generate(ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
	return m(ctx, req)
}

// benchSummary is the instant model's summary of a compaction (about 250 tokens).
var benchSummary = strings.Repeat("The person asked about failing tests in the build log; the first failure was explained. ", 12)

// defaultWindow is the context window the benchmarks run with: what conch
// up assumes for a model whose window it does not know
// (llm.DefaultContextWindow; model.context_window = 0 by default), so the
// agent manages the context as it does by default and compacts at 70 %.
const defaultWindow = 32768

// BenchmarkLongConversation measures one message's round trip at turn 10
// and at turn 1,000 of a conversation, with the instant model, the real
// file store and the context managed as by default. Each figure is taken in
// its own loop: turn 10 in samples fresh conversations each driven through
// nine turns first; turn 1,000 as the turns after 1,000 of one conversation.
// A turn must cost the same whatever the conversation's length: the history
// is not re-read from the start each turn.
func BenchmarkLongConversation(b *testing.B) {
	const samples, long = 200, 1000
	gw, ch, stop := benchEnvWith(b, agent.Options{ContextWindow: defaultWindow})
	defer stop()
	ctx := context.Background()
	sent := 0
	// A message of realistic length: about 40 tokens, its answer as long.
	text := func(conv string, n int) string {
		return fmt.Sprintf("%s message %d: please look at the build log again and tell me which test failed first and why", conv, n)
	}
	turn := func(key conch.ConversationKey, n int) time.Duration {
		start := time.Now()
		if err := gw.HandleInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: text(key.ID, n)}); err != nil {
			b.Fatal(err)
		}
		sent++
		if err := ch.WaitReplies(ctx, sent); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	var last conch.ConversationKey
	for it := range b.N {
		short := make([]time.Duration, 0, samples)
		for s := range samples {
			key := conch.ConversationKey{Channel: cli, ID: fmt.Sprint("short", it, "-", s)}
			for n := 1; n < 10; n++ {
				turn(key, n)
			}
			short = append(short, turn(key, 10))
		}
		key := conch.ConversationKey{Channel: cli, ID: fmt.Sprint("long", it)}
		last = key
		for n := 1; n <= long; n++ {
			turn(key, n)
		}
		lng := make([]time.Duration, 0, samples)
		for n := range samples {
			lng = append(lng, turn(key, long+1+n))
		}
		reportPercentiles(b, "turn10-", short)
		reportPercentiles(b, "turn1000-", lng)
	}
	st, err := gw.opts.Store.(interface {
		ContextStatus(context.Context, conch.ConversationKey) (conch.ContextStatus, error)
	}).ContextStatus(ctx, last)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Compactions), "compactions")
}

// The real store overlaps a message's fsync with its turn.
var _ StagedStore = (*sqlite.DB)(nil)
