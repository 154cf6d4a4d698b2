package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/llm/internal/llmerr"
)

// deltas records what GenerateStream hands out, with when.
type deltas struct {
	mu    sync.Mutex
	texts []string
	times []time.Time
	first chan struct{} // closed at the first delta
}

func newDeltas() *deltas { return &deltas{first: make(chan struct{})} }

func (d *deltas) add(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.texts) == 0 {
		close(d.first)
	}
	d.texts = append(d.texts, s)
	d.times = append(d.times, time.Now())
}

func (d *deltas) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.texts)
}

func streaming(t *testing.T, m conch.Model) conch.StreamingModel {
	t.Helper()
	sm, ok := m.(conch.StreamingModel)
	if !ok {
		t.Fatalf("%s is not a conch.StreamingModel", m.Name())
	}
	return sm
}

// runStream runs the cases only a stream has.
func runStream(t *testing.T, p fakellm.Provider, newModel NewModel) {
	model := func(tb testing.TB, s *fakellm.Server) conch.StreamingModel {
		sm, ok := newModel(tb, s.BaseURL(p), 0).(conch.StreamingModel)
		if !ok {
			tb.Fatalf("the %s model is not a conch.StreamingModel", p)
		}
		return sm
	}

	t.Run("DeltasAsWritten", func(t *testing.T) {
		t.Parallel()
		const gap = 40 * time.Millisecond
		s := fakellm.New(t)
		s.Push(fakellm.Text("one two three four").ChunkDelay(gap).Usage(7, 4))
		d := newDeltas()
		resp, err := model(t, s).GenerateStream(context.Background(), userRequest("count"), d.add)
		done := time.Now()
		if err != nil {
			t.Fatalf("GenerateStream: %v", err)
		}
		if got, want := d.got(), []string{"one ", "two ", "three ", "four"}; !slices.Equal(got, want) {
			t.Errorf("deltas: got %q, want %q", got, want)
		}
		if resp.Text != "one two three four" || resp.StopReason != conch.StopEnd || resp.Usage != (conch.Usage{InputTokens: 7, OutputTokens: 4}) {
			t.Errorf("response: got %q %q %+v", resp.Text, resp.StopReason, resp.Usage)
		}
		if resp.Model == "" || resp.Duration <= 0 {
			t.Errorf("model %q duration %v: want both set", resp.Model, resp.Duration)
		}
		// Three gaps between four chunks: the first delta came long before the end.
		if early := done.Sub(d.times[0]); early < 2*gap {
			t.Errorf("the first delta came %v before the answer ended, want at least %v: text is not handed out as it arrives", early, 2*gap)
		}
		if got := last(t, s); !got.Stream {
			t.Errorf("the request did not ask for a stream")
		}
	})

	t.Run("ChunksExactly", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		pieces := []string{"Grüße", ", wörld", " — ", "日本語", "!"}
		s.Push(fakellm.Text("").Chunks(pieces...).MaxTokens())
		d := newDeltas()
		resp, err := model(t, s).GenerateStream(context.Background(), userRequest("hi"), d.add)
		if err != nil {
			t.Fatalf("GenerateStream: %v", err)
		}
		if got := d.got(); !slices.Equal(got, pieces) {
			t.Errorf("deltas: got %q, want %q", got, pieces)
		}
		if resp.StopReason != conch.StopMaxTokens || resp.Text != strings.Join(pieces, "") {
			t.Errorf("response: got %q %q", resp.Text, resp.StopReason)
		}
	})

	// Tool calls assembled from streamed arguments are what Generate returns.
	t.Run("ToolCallsAsGenerate", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		reply := fakellm.ToolCalls(
			fakellm.Call{Name: "bash", Args: json.RawMessage(`{"cmd":"grep -r 'naïve' . | head -n 20","timeout":30}`)},
			fakellm.Call{Name: "read", Args: json.RawMessage(`{"path":"docs/日本.md"}`)},
		).Text("Looking twice.").Usage(20, 9)
		s.Push(reply, reply)
		m := model(t, s)
		req := userRequest("look")
		req.Tools = tools()
		want, err := m.Generate(context.Background(), req)
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		d := newDeltas()
		got, err := m.GenerateStream(context.Background(), req, d.add)
		if err != nil {
			t.Fatalf("GenerateStream: %v", err)
		}
		if strings.Join(d.got(), "") != "Looking twice." {
			t.Errorf("deltas: got %q", d.got())
		}
		if got.Text != want.Text || got.StopReason != want.StopReason || got.Usage != want.Usage || got.Model != want.Model || len(got.ToolCalls) != len(want.ToolCalls) {
			t.Fatalf("stream: got %+v, want %+v", got, want)
		}
		for i := range want.ToolCalls {
			g, w := got.ToolCalls[i], want.ToolCalls[i]
			if g.Name != w.Name || !jsonEqual(g.Arguments, w.Arguments) || g.ID == "" {
				t.Errorf("call %d: got %s %s(%s), want %s(%s)", i, g.ID, g.Name, g.Arguments, w.Name, w.Arguments)
			}
			if p == fakellm.Gemini && strings.Contains(w.ID, "#ts=") != strings.Contains(g.ID, "#ts=") {
				t.Errorf("call %d: thought signature: got id %q, Generate gave %q", i, g.ID, w.ID)
			}
		}
		// The calls go back as the provider wants them.
		req.Messages = append(req.Messages,
			conch.Message{Role: conch.RoleAssistant, Text: got.Text, ToolCalls: got.ToolCalls},
			conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: got.ToolCalls[0].ID, Content: "x"}},
			conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: got.ToolCalls[1].ID, Content: "y"}},
		)
		s.Push(fakellm.Text("ok"))
		if _, err := m.GenerateStream(context.Background(), req, func(string) {}); err != nil {
			t.Fatalf("GenerateStream 2: %v", err)
		}
		sent := last(t, s).Messages[1].ToolCalls
		if len(sent) != 2 || !jsonEqual(sent[0].Args, reply0Args) {
			t.Fatalf("calls sent back: got %+v", sent)
		}
		if p == fakellm.Gemini && sent[0].Signature == "" {
			t.Errorf("gemini thoughtSignature not sent back")
		}
		if p != fakellm.Gemini && sent[0].ID != got.ToolCalls[0].ID {
			t.Errorf("call id sent back: got %q, want %q", sent[0].ID, got.ToolCalls[0].ID)
		}
	})

	midStream := []struct {
		name  string
		err   fakellm.Reply
		kind  conch.ErrorKind
		msg   string
		after int
	}{
		{"Overloaded", fakellm.Error(529, "Overloaded"), conch.KindTransient, "Overloaded", 2},
		{"ServerError", fakellm.Error(500, "internal failure"), conch.KindTransient, "internal failure", 1},
		{"RateLimit", fakellm.Error(429, "slow down"), conch.KindTransient, "slow down", 2},
		{"ContextTooLong", fakellm.ContextTooLong(), conch.KindContextTooLong, "", 0},
		{"BadRequest", fakellm.Error(400, "tools.0: bad"), conch.KindBadRequest, "bad", 3},
	}
	for _, tc := range midStream {
		t.Run("MidStreamError"+tc.name, func(t *testing.T) {
			t.Parallel()
			s := fakellm.New(t)
			s.Push(fakellm.Text("alpha beta gamma delta").FailAfter(tc.after, tc.err))
			d := newDeltas()
			_, err := model(t, s).GenerateStream(context.Background(), userRequest("hi"), d.add)
			me := modelError(t, err)
			if me.Kind != tc.kind {
				t.Errorf("kind: got %q, want %q; error: %v", me.Kind, tc.kind, err)
			}
			if !strings.Contains(me.Message, tc.msg) || me.Err == nil {
				t.Errorf("message: got %q (cause %v), want it to contain %q and a cause", me.Message, me.Err, tc.msg)
			}
			if got, want := strings.Join(d.got(), ""), strings.Join(strings.SplitAfter("alpha beta gamma delta", " ")[:tc.after], ""); got != want {
				t.Errorf("text handed out before the error: got %q, want %q", got, want)
			}
			if n := s.Count(); n != 1 {
				t.Errorf("requests sent: got %d, want 1 (no retry)", n)
			}
		})
	}

	ends := []struct {
		name  string
		reply fakellm.Reply
	}{
		{"CutText", fakellm.Text("alpha beta gamma").CutAfter(1)},
		{"CutToolArgs", fakellm.ToolCall("bash", `{"cmd":"ls -l /workspace"}`).Text("Looking.").CutAfter(2)},
		{"EndedWithoutFinal", fakellm.Text("alpha beta gamma").EndAfter(2)},
		{"EndedAfterAllContent", fakellm.ToolCall("bash", `{"cmd":"ls"}`).EndAfter(100)},
		{"CutBeforeContent", fakellm.Text("alpha").CutAfter(0)},
	}
	for _, tc := range ends {
		t.Run("Stream"+tc.name, func(t *testing.T) {
			t.Parallel()
			s := fakellm.New(t)
			s.Push(tc.reply)
			resp, err := model(t, s).GenerateStream(context.Background(), userRequest("hi"), func(string) {})
			if err == nil {
				t.Fatalf("got a response %+v, want an error: the stream never finished", resp)
			}
			me := modelError(t, err)
			if me.Kind != conch.KindTransient || me.Status != 0 {
				t.Errorf("got kind %q status %d, want transient without a status; error: %v", me.Kind, me.Status, err)
			}
			if strings.HasPrefix(tc.name, "Ended") && !errors.Is(err, llmerr.ErrTruncated) {
				t.Errorf("got %v, want it to wrap llmerr.ErrTruncated", err)
			}
		})
	}

	t.Run("CancelMidStream", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("first then never").ChunkDelay(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d := newDeltas()
		go func() {
			<-d.first
			cancel()
		}()
		_, err := model(t, s).GenerateStream(ctx, userRequest("hi"), d.add)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want an error wrapping context.Canceled", err)
		}
		var me *conch.ModelError
		if errors.As(err, &me) {
			t.Errorf("a cancelled stream came back as a ModelError %+v", me)
		}
		if got := d.got(); len(got) != 1 || got[0] != "first " {
			t.Errorf("deltas: got %q, want just the first", got)
		}
	})

	t.Run("ModelTimeoutMidStream", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("first then never").ChunkDelay(time.Hour))
		m := streaming(t, newModel(t, s.BaseURL(p), 300*time.Millisecond))
		_, err := m.GenerateStream(context.Background(), userRequest("hi"), func(string) {})
		me := modelError(t, err)
		if me.Kind != conch.KindTransient || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got kind %q (%v), want transient and not the caller's deadline", me.Kind, err)
		}
	})
}

var reply0Args = []byte(`{"cmd":"grep -r 'naïve' . | head -n 20","timeout":30}`)

// BenchStream measures GenerateStream through the provider's SDK against the
// fake: a 27-word answer streamed a word a chunk to a short conversation
// with two tools offered. It reports the p50 of the first delta's latency
// and of the whole round trip.
func BenchStream(b *testing.B, p fakellm.Provider, newModel NewModel) {
	s := fakellm.New(b, fakellm.WithoutRecording())
	text := strings.TrimSpace(strings.Repeat("the quick brown fox jumps over the lazy dog ", 3)) // 27 words
	s.Handle(func(fakellm.Request) fakellm.Reply { return fakellm.Text(text) })
	m, ok := newModel(b, s.BaseURL(p), 0).(conch.StreamingModel)
	if !ok {
		b.Fatalf("the %s model is not a conch.StreamingModel", p)
	}
	req := userRequest("hello")
	req.System = system
	req.Tools = tools()
	var firsts, totals []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		var first time.Duration
		resp, err := m.GenerateStream(context.Background(), req, func(string) {
			if first == 0 {
				first = time.Since(start)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		if resp.Text != text {
			b.Fatalf("text: got %q", resp.Text)
		}
		firsts = append(firsts, first)
		totals = append(totals, time.Since(start))
	}
	b.ReportMetric(p50(firsts), "p50-first-delta-µs")
	b.ReportMetric(p50(totals), "p50-round-trip-µs")
}

func p50(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / float64(time.Microsecond)
}
