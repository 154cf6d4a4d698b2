package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"conch"
)

var (
	web = conch.ConversationKey{Channel: conch.ChannelWeb, ID: "c1"}
	mx  = conch.ConversationKey{Channel: conch.ChannelMatrix, ID: "!r:x"}
	t0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func ev(key conch.ConversationKey, turn conch.TurnID, after time.Duration, d conch.EventData) conch.Event {
	return conch.Event{Key: key, Turn: turn, At: t0.Add(after), Data: d}
}

func TestObserve(t *testing.T) {
	c := New(Options{Terminals: func() int { return 3 }, Sandboxes: fakeAdmin{}, Tools: []string{"bash", "read_file"}})
	code := 0
	for _, e := range []conch.Event{
		ev(web, 1, 0, conch.MessageEvent{Role: conch.RoleUser, Text: "hi"}),
		ev(web, 1, 0, conch.TurnState{Status: conch.TurnPending, Queued: 1}),
		ev(web, 2, 0, conch.TurnState{Status: conch.TurnPending, Queued: 2}),
		ev(web, 1, time.Second, conch.TurnState{Status: conch.TurnRunning}),
		ev(web, 1, 3*time.Second, conch.ContextUse{InputTokens: 100, OutputTokens: 20}), // model call 2s
		ev(web, 1, 3*time.Second, conch.ToolStarted{CallID: "a", Name: "bash"}),
		ev(web, 1, 4*time.Second, conch.ToolFinished{CallID: "a", Name: "bash", Duration: time.Second, ExitCode: &code}),
		ev(web, 1, 4*time.Second, conch.RetryEvent{Attempt: 1, Max: 5, Delay: time.Second, Reason: "transient (HTTP 503)"}),
		ev(web, 1, 5500*time.Millisecond, conch.ContextUse{InputTokens: 150, OutputTokens: 30}), // 0.5s after the retry delay
		ev(web, 1, 6*time.Second, conch.MessageEvent{Role: conch.RoleAssistant, Text: "hello"}),
		ev(web, 1, 6*time.Second, conch.TurnState{Status: conch.TurnDone}),
		ev(mx, 0, 0, conch.NoticeEvent{Text: "queued"}),
		ev(mx, 3, 0, conch.ToolFinished{CallID: "b", Name: "read_file", IsError: true, Duration: time.Millisecond}),
	} {
		c.Observe(e)
	}
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"messages in", testutil.ToFloat64(c.messages.WithLabelValues("web", "in")), 1},
		{"messages out", testutil.ToFloat64(c.messages.WithLabelValues("web", "out")), 1},
		{"notices", testutil.ToFloat64(c.notices.WithLabelValues("matrix")), 1},
		{"queue (turn 2 waits)", testutil.ToFloat64(c.queue), 1},
		{"running", testutil.ToFloat64(c.running), 0},
		{"turns done", testutil.ToFloat64(c.turns.WithLabelValues("web", "done")), 1},
		{"tokens in", testutil.ToFloat64(c.tokens.WithLabelValues("input")), 250},
		{"tool ok", testutil.ToFloat64(c.toolCalls.WithLabelValues("bash", "ok")), 1},
		{"tool error", testutil.ToFloat64(c.toolCalls.WithLabelValues("read_file", "error")), 1},
		{"model errors", testutil.ToFloat64(c.modelErrs.WithLabelValues("transient")), 1},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s: got %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	for _, want := range []string{
		`conch_turn_duration_seconds_sum{channel="web",status="done"} 5`,
		`conch_model_call_duration_seconds_sum 2.5`,
		`conch_model_call_duration_seconds_count 2`,
		`conch_tool_duration_seconds_count{tool="bash"} 1`,
		`conch_sandboxes{kind="conversation",state="running"} 2`,
		`conch_sandboxes{kind="pool",state="running"} 1`,
		`conch_terminals 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	for _, want := range []string{"\ngo_goroutines ", "\ngo_memstats_heap_inuse_bytes ", "\nprocess_open_fds ", "\nprocess_resident_memory_bytes "} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks the standard %q", strings.TrimSpace(want))
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "conch_") &&
			!strings.HasPrefix(line, "go_") && !strings.HasPrefix(line, "process_") {
			t.Errorf("metric not named conch_* (nor the standard go_*, process_*): %s", line)
		}
	}
}

func TestErrorClass(t *testing.T) {
	for in, want := range map[string]string{
		"transient (HTTP 429)": "transient", "model auth (HTTP 401): bad key": "auth", "context_too_long": "context_too_long",
		"HTTP 429 too many": "rate_limited", "i/o timeout": "timeout", "something odd": "other",
	} {
		if got := errorClass(in); got != want {
			t.Errorf("errorClass(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRunFollowsTheHub checks Run subscribes to every conversation and
// subscribes again after being cut off.
func TestRunFollowsTheHub(t *testing.T) {
	h := &hub{}
	c := New(Options{Events: h})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	h.send(t, ev(web, 1, 0, conch.MessageEvent{Role: conch.RoleUser}))
	h.cut()
	h.send(t, ev(mx, 1, 0, conch.MessageEvent{Role: conch.RoleUser}))
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(c.messages.WithLabelValues("matrix", "in")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("event after resubscribe not counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := testutil.ToFloat64(c.resubscribe); got != 1 {
		t.Errorf("resubscribes %v, want 1", got)
	}
	cancel()
	<-done
	if !h.allZero() {
		t.Error("Run subscribed to one conversation, want all (zero key) live (-1)")
	}
}

type hub struct {
	mu   sync.Mutex
	ch   chan conch.Event
	keys []conch.ConversationKey
	afts []int64
}

func (h *hub) Subscribe(ctx context.Context, key conch.ConversationKey, after int64) (<-chan conch.Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan conch.Event, 10)
	h.ch = ch
	h.keys, h.afts = append(h.keys, key), append(h.afts, after)
	go func() {
		<-ctx.Done()
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.ch == ch {
			close(ch)
			h.ch = nil
		}
	}()
	return ch, nil
}

func (h *hub) LastSeq(context.Context, conch.ConversationKey) (int64, error) { return 0, nil }

func (h *hub) send(t *testing.T, e conch.Event) {
	for range 500 {
		h.mu.Lock()
		ch := h.ch
		h.mu.Unlock()
		if ch != nil {
			ch <- e
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no subscriber")
}

func (h *hub) cut() {
	h.mu.Lock()
	close(h.ch)
	h.ch = nil
	h.mu.Unlock()
}

func (h *hub) allZero() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, k := range h.keys {
		if !k.IsZero() || h.afts[i] != -1 {
			return false
		}
	}
	return len(h.keys) >= 2
}

type fakeAdmin struct{ conch.SandboxAdmin }

func (fakeAdmin) Sandboxes(context.Context) ([]conch.SandboxInfo, error) {
	return []conch.SandboxInfo{{State: "running"}, {State: "running"}, {State: "running", Pool: true}, {State: "exited", Orphan: true}}, nil
}

// Tool names come from the model: only the tools conch offers are label
// values; anything else the model makes up is counted as "other", so a model
// cannot grow /metrics without bound.
func TestToolLabelsAreBounded(t *testing.T) {
	c := New(Options{Tools: []string{"bash"}})
	c.SetTools([]string{"bash", "read_file"})
	for i := range 500 {
		c.Observe(ev(web, 1, 0, conch.ToolFinished{CallID: "x", Name: "made_up_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "_" + time.Duration(i).String()}))
	}
	c.Observe(ev(web, 1, 0, conch.ToolFinished{CallID: "b", Name: "bash"}))
	c.Observe(ev(web, 1, 0, conch.ToolFinished{CallID: "r", Name: "read_file", IsError: true}))
	if n := testutil.CollectAndCount(c.toolCalls); n != 3 {
		t.Errorf("tool call series: got %d, want 3 (bash, read_file, other)", n)
	}
	if n := testutil.CollectAndCount(c.toolDur); n != 3 {
		t.Errorf("tool duration series: got %d, want 3", n)
	}
	if got := testutil.ToFloat64(c.toolCalls.WithLabelValues("other", "ok")); got != 500 {
		t.Errorf("other: got %v, want 500", got)
	}
	if got := testutil.ToFloat64(c.toolCalls.WithLabelValues("read_file", "error")); got != 1 {
		t.Errorf("read_file errors: got %v, want 1", got)
	}
}

// Usage is labelled by configured model only: any other name is "other".
func TestModelUsageBoundedLabels(t *testing.T) {
	c := New(Options{Models: []string{"openai/gpt-4o", "anthropic/claude-sonnet-4-5"}})
	for _, d := range []conch.ModelUsage{
		{Model: "openai/gpt-4o", InputTokens: 1000, CachedTokens: 600, OutputTokens: 50, CostUSD: 0.25},
		{Model: "anthropic/claude-sonnet-4-5", Fallback: true, InputTokens: 300, OutputTokens: 7, CostUSD: 0.5},
		{Model: "openai/gpt-4o-2024-08-06", InputTokens: 5, OutputTokens: 5},
		{Model: "made-up/" + strings.Repeat("x", 300), InputTokens: 5, OutputTokens: 5},
	} {
		c.Observe(ev(web, 1, 0, d))
	}
	for _, ck := range []struct {
		name      string
		got, want float64
	}{
		{"gpt-4o cached", testutil.ToFloat64(c.usageToks.WithLabelValues("openai/gpt-4o", "cached")), 600},
		{"gpt-4o cost", testutil.ToFloat64(c.usageCost.WithLabelValues("openai/gpt-4o")), 0.25},
		{"fallback calls", testutil.ToFloat64(c.usageCalls.WithLabelValues("anthropic/claude-sonnet-4-5", "true")), 1},
		{"other input", testutil.ToFloat64(c.usageToks.WithLabelValues("other", "input")), 10},
	} {
		if ck.got != ck.want {
			t.Errorf("%s: got %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	if n := testutil.CollectAndCount(c.usageCost); n != 3 {
		t.Errorf("cost series: got %d, want 3 (two models and other)", n)
	}
}
