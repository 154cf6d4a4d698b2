// Package llmtest is the contract suite every conch.Model provider passes:
// the real SDK client against the wire-exact fake server
// (internal/testenv/fakellm). It is imported only by tests.
package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
)

// APIKey is the key the suite's models must be built with.
const APIKey = "test-key"

// NewModel builds the provider under test for baseURL with APIKey and the
// given per-call timeout (0 = the provider's default).
type NewModel func(tb testing.TB, baseURL string, timeout time.Duration) conch.Model

// bashSchema is the JSON Schema of the suite's main tool.
const bashSchema = `{"type":"object","properties":{"cmd":{"type":"string","description":"the command line"}},"required":["cmd"]}`

// tools returns the tools offered in the suite's requests.
func tools() []conch.ToolSpec {
	return []conch.ToolSpec{
		{Name: "bash", Description: "Run a shell command.", Parameters: json.RawMessage(bashSchema)},
		{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	}
}

const system = "You are conch.\n<memory>\nThe user likes tea.\n</memory>"

// Generator is one way to call a model: Generate, or GenerateStream
// checking what it hands out.
type Generator func(tb testing.TB, m conch.Model, ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error)

// Generate calls m.Generate.
func Generate(_ testing.TB, m conch.Model, ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
	return m.Generate(ctx, req)
}

// Stream calls m.GenerateStream and checks the contract of its deltas: never
// empty, never handed out concurrently, and (when the call succeeds) joined
// they are the response's text.
func Stream(tb testing.TB, m conch.Model, ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
	sm, ok := m.(conch.StreamingModel)
	if !ok {
		tb.Errorf("%s is not a conch.StreamingModel", m.Name())
		return conch.ModelResponse{}, errors.New("not a StreamingModel")
	}
	var text strings.Builder
	var busy atomic.Bool
	resp, err := sm.GenerateStream(ctx, req, func(delta string) {
		if !busy.CompareAndSwap(false, true) {
			tb.Errorf("onText called concurrently")
		}
		defer busy.Store(false)
		if delta == "" {
			tb.Errorf("onText called with an empty delta")
		}
		text.WriteString(delta)
	})
	if err == nil && text.String() != resp.Text {
		tb.Errorf("deltas joined: got %q, want the response's text %q", text.String(), resp.Text)
	}
	return resp, err
}

// Run runs the contract suite for provider p: every case through Generate
// and again through GenerateStream (same answers), then the cases only a
// stream has.
func Run(t *testing.T, p fakellm.Provider, newModel NewModel) {
	t.Run("Generate", func(t *testing.T) { run(t, p, newModel, Generate) })
	t.Run("Stream", func(t *testing.T) { run(t, p, newModel, Stream) })
	t.Run("StreamOnly", func(t *testing.T) { runStream(t, p, newModel) })
}

func run(t *testing.T, p fakellm.Provider, newModel NewModel, gen Generator) {
	model := func(tb testing.TB, s *fakellm.Server) conch.Model {
		return newModel(tb, s.BaseURL(p), 0)
	}

	runImages(t, p, model, gen)

	// Sequential first: it changes the environment.
	t.Run("IgnoresEnvironment", func(t *testing.T) {
		for _, k := range []string{"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"} {
			t.Setenv(k, "http://127.0.0.1:9/nowhere")
		}
		for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"} {
			t.Setenv(k, "env-key")
		}
		t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Env: leaked")
		t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Env: leaked")
		s := fakellm.New(t)
		s.Push(fakellm.Text("ok"))
		if _, err := gen(t, model(t, s), context.Background(), userRequest("hi")); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		req := last(t, s)
		if req.APIKey != APIKey {
			t.Errorf("API key sent: got %q, want %q", req.APIKey, APIKey)
		}
		if v := req.Header.Get("X-Env"); v != "" {
			t.Errorf("header from the environment sent: X-Env: %s", v)
		}
	})

	t.Run("Text", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("hi there").Usage(12, 3))
		m := model(t, s)
		req := userRequest("hello")
		req.System = system
		req.MaxTokens = 256
		resp, err := gen(t, m, context.Background(), req)
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if resp.Text != "hi there" || resp.StopReason != conch.StopEnd || len(resp.ToolCalls) != 0 {
			t.Errorf("response: got text %q stop %q calls %d, want %q %q 0", resp.Text, resp.StopReason, len(resp.ToolCalls), "hi there", conch.StopEnd)
		}
		if want := (conch.Usage{InputTokens: 12, OutputTokens: 3}); resp.Usage != want {
			t.Errorf("usage: got %+v, want %+v", resp.Usage, want)
		}
		if resp.Model == "" || resp.Duration <= 0 {
			t.Errorf("model %q duration %v: want both set", resp.Model, resp.Duration)
		}
		got := last(t, s)
		if got.System != system {
			t.Errorf("system prompt sent: got %q, want %q", got.System, system)
		}
		if !strings.Contains(got.System, "<memory>") {
			t.Errorf("system prompt lost its <memory> block: %q", got.System)
		}
		if len(got.Messages) != 1 || got.Messages[0].Role != "user" || got.Messages[0].Text != "hello" {
			t.Errorf("messages sent: got %+v, want one user message \"hello\"", got.Messages)
		}
		if got.MaxTokens != 256 {
			t.Errorf("max tokens sent: got %d, want 256", got.MaxTokens)
		}
		if got.APIKey != APIKey {
			t.Errorf("API key sent: got %q, want %q", got.APIKey, APIKey)
		}
		if len(got.Tools) != 0 {
			t.Errorf("tools sent: got %d, want none", len(got.Tools))
		}
	})

	t.Run("UsageCachedSummed", func(t *testing.T) {
		// Input counts the whole prompt, cached part included, in every
		// provider's form; three calls add up exactly.
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("one").Usage(1200, 30).Cached(1024),
			fakellm.ToolCall("read_file", `{"path":"a"}`).Usage(2000, 17).Cached(0),
			fakellm.Text("three").Usage(3500, 250).Cached(3072))
		m := model(t, s)
		var sum conch.Usage
		for i := range 3 {
			resp, err := gen(t, m, context.Background(), userRequest(fmt.Sprint("call ", i)))
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			sum.InputTokens += resp.Usage.InputTokens
			sum.CachedTokens += resp.Usage.CachedTokens
			sum.OutputTokens += resp.Usage.OutputTokens
			sum.Estimated = sum.Estimated || resp.Usage.Estimated
		}
		if want := (conch.Usage{InputTokens: 6700, CachedTokens: 4096, OutputTokens: 297}); sum != want {
			t.Errorf("usage summed: got %+v, want %+v", sum, want)
		}
	})

	t.Run("MaxTokens", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("cut sho").MaxTokens())
		resp, err := gen(t, model(t, s), context.Background(), userRequest("write a novel"))
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if resp.StopReason != conch.StopMaxTokens || resp.Text != "cut sho" {
			t.Errorf("got stop %q text %q, want %q %q", resp.StopReason, resp.Text, conch.StopMaxTokens, "cut sho")
		}
	})

	t.Run("ToolRoundTrip", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.ToolCall("bash", `{"cmd":"ls -l"}`).Text("Let me look."), fakellm.Text("You have one file."))
		m := model(t, s)
		req := userRequest("what is here?")
		req.System = system
		req.Tools = tools()
		resp, err := gen(t, m, context.Background(), req)
		if err != nil {
			t.Fatalf("Generate 1: %v", err)
		}
		if resp.StopReason != conch.StopToolUse || len(resp.ToolCalls) != 1 {
			t.Fatalf("response 1: got stop %q and %d calls, want %q and 1", resp.StopReason, len(resp.ToolCalls), conch.StopToolUse)
		}
		call := resp.ToolCalls[0]
		if call.Name != "bash" || call.ID == "" || !jsonEqual(call.Arguments, []byte(`{"cmd":"ls -l"}`)) {
			t.Errorf("tool call: got %s %q(%s), want an id and bash({\"cmd\":\"ls -l\"})", call.ID, call.Name, call.Arguments)
		}
		if resp.Text != "Let me look." {
			t.Errorf("text beside the call: got %q, want %q", resp.Text, "Let me look.")
		}
		first := last(t, s)
		tool, ok := first.Tool("bash")
		if !ok || len(first.Tools) != 2 {
			t.Fatalf("tools sent: got %+v, want bash and read", first.Tools)
		}
		if tool.Description != "Run a shell command." || !jsonEqual(tool.Parameters, []byte(bashSchema)) {
			t.Errorf("bash schema sent: got %q %s, want %q %s", tool.Description, tool.Parameters, "Run a shell command.", bashSchema)
		}

		// The result carries no tool name: providers that need it (Gemini)
		// find it from the call in the history.
		req.Messages = append(req.Messages,
			conch.Message{Role: conch.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls},
			conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: call.ID, Content: "notes.txt"}},
		)
		resp2, err := gen(t, m, context.Background(), req)
		if err != nil {
			t.Fatalf("Generate 2: %v", err)
		}
		if resp2.Text != "You have one file." || resp2.StopReason != conch.StopEnd {
			t.Errorf("response 2: got %q %q, want %q %q", resp2.Text, resp2.StopReason, "You have one file.", conch.StopEnd)
		}
		second := last(t, s)
		if len(second.Messages) != 3 {
			t.Fatalf("messages sent: got %d (%+v), want user, assistant, tool result", len(second.Messages), second.Messages)
		}
		asst := second.Messages[1]
		if asst.Role != "assistant" || asst.Text != "Let me look." || len(asst.ToolCalls) != 1 {
			t.Fatalf("assistant message sent: got %+v, want the text and one call", asst)
		}
		sent := asst.ToolCalls[0]
		if sent.Name != "bash" || !jsonEqual(sent.Args, []byte(`{"cmd":"ls -l"}`)) {
			t.Errorf("call replayed: got %q(%s), want bash({\"cmd\":\"ls -l\"})", sent.Name, sent.Args)
		}
		results := second.ToolResults()
		if len(results) != 1 || results[0].Content != "notes.txt" || results[0].IsError {
			t.Fatalf("tool results sent: got %+v, want one \"notes.txt\"", results)
		}
		if p == fakellm.Gemini {
			// The fake's Gemini calls carry no id, as the real API's often don't.
			if sent.ID != "" || results[0].CallID != "" || results[0].Name != "bash" {
				t.Errorf("gemini call/result: got call id %q, result id %q name %q, want no ids and name bash", sent.ID, results[0].CallID, results[0].Name)
			}
			if sent.Signature == "" {
				t.Errorf("gemini thoughtSignature not sent back with the call")
			}
		} else if sent.ID != call.ID || results[0].CallID != call.ID {
			t.Errorf("ids: got call %q result %q, want both %q", sent.ID, results[0].CallID, call.ID)
		}
		if second.Messages[2].Role == "assistant" {
			t.Errorf("tool result sent with role assistant")
		}
	})

	t.Run("ParallelCallsAndFailedResult", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.ToolCalls(
			fakellm.Call{Name: "bash", Args: json.RawMessage(`{"cmd":"ls"}`)},
			fakellm.Call{Name: "read", Args: json.RawMessage(`{"path":"a.txt"}`)},
		), fakellm.Text("a.txt is missing"))
		m := model(t, s)
		req := userRequest("show a.txt")
		req.Tools = tools()
		resp, err := gen(t, m, context.Background(), req)
		if err != nil {
			t.Fatalf("Generate 1: %v", err)
		}
		if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID == resp.ToolCalls[1].ID {
			t.Fatalf("calls: got %+v, want two with distinct ids", resp.ToolCalls)
		}
		req.Messages = append(req.Messages,
			conch.Message{Role: conch.RoleAssistant, ToolCalls: resp.ToolCalls},
			conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: resp.ToolCalls[0].ID, Name: "bash", Content: "b.txt"}},
			conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: resp.ToolCalls[1].ID, Name: "read", Content: "no such file", IsError: true}},
		)
		if _, err := gen(t, m, context.Background(), req); err != nil {
			t.Fatalf("Generate 2: %v", err)
		}
		got := last(t, s)
		results := got.ToolResults()
		if len(results) != 2 || results[0].Content != "b.txt" || !strings.Contains(results[1].Content, "no such file") {
			t.Fatalf("tool results sent: got %+v, want b.txt and the failure", results)
		}
		carriers := 0
		for _, msg := range got.Messages {
			if len(msg.ToolResults) > 0 {
				carriers++
			}
		}
		wantCarriers := 1 // Anthropic and Gemini: all results of a turn in ONE message
		if p == fakellm.OpenAI {
			wantCarriers = 2 // one "tool" message per result
		}
		if carriers != wantCarriers {
			t.Errorf("messages carrying tool results: got %d, want %d (%+v)", carriers, wantCarriers, got.Messages)
		}
		if p != fakellm.OpenAI && (results[0].IsError || !results[1].IsError) {
			t.Errorf("error flags sent: got %v %v, want false true", results[0].IsError, results[1].IsError)
		}
	})

	// A history written by another provider (the operator changed models):
	// a Gemini id carrying a thought signature, an OpenAI id.
	t.Run("ForeignHistory", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("ok"))
		req := userRequest("go on")
		req.Tools = tools()
		req.Messages = append(req.Messages,
			conch.Message{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{
				{ID: "gensyn_q2w3e4#ts=c2ln", Name: "bash", Arguments: json.RawMessage(`{"cmd":"ls"}`)},
				{ID: "call_9", Name: "read", Arguments: json.RawMessage(`{"path":"a"}`)},
			}},
			conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "gensyn_q2w3e4#ts=c2ln", Name: "bash", Content: "a"}},
			conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "call_9", Name: "read", Content: "hello"}},
		)
		if _, err := gen(t, model(t, s), context.Background(), req); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		got := last(t, s)
		calls, results := got.Messages[1].ToolCalls, got.ToolResults()
		if len(calls) != 2 || len(results) != 2 {
			t.Fatalf("got %d calls and %d results, want 2 and 2", len(calls), len(results))
		}
		if p == fakellm.Gemini {
			if calls[0].ID != "" || calls[0].Signature != "c2ln" || calls[1].ID != "call_9" || results[1].CallID != "call_9" {
				t.Errorf("gemini ids: got calls %+v results %+v", calls, results)
			}
			return
		}
		for i := range calls {
			id := calls[i].ID
			if id != results[i].CallID || id == "" || len(id) > 40 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
				t.Errorf("call %d: id %q, result id %q: want equal, non-empty, at most 40 of [A-Za-z0-9_-]", i, id, results[i].CallID)
			}
		}
		if calls[1].ID != "call_9" {
			t.Errorf("a valid id was rewritten: got %q, want call_9", calls[1].ID)
		}
	})

	errorCases := []struct {
		name       string
		reply      fakellm.Reply
		kind       conch.ErrorKind
		status     int
		retryAfter time.Duration
		msg        string
	}{
		{"429RetryAfter", fakellm.Error(429, "Rate limit reached, slow down").RetryAfter(3 * time.Second), conch.KindTransient, 429, 3 * time.Second, "slow down"},
		{"429RetryAfterMs", fakellm.Error(429, "slow").Header("retry-after-ms", "1500"), conch.KindTransient, 429, 1500 * time.Millisecond, "slow"},
		{"500", fakellm.Error(500, "internal failure"), conch.KindTransient, 500, 0, "internal failure"},
		{"503", fakellm.Error(503, "overloaded"), conch.KindTransient, 503, 0, "overloaded"},
		{"529", fakellm.Error(529, "Overloaded"), conch.KindTransient, 529, 0, "Overloaded"},
		{"408", fakellm.Error(408, "timeout"), conch.KindTransient, 408, 0, "timeout"},
		{"401", fakellm.Error(401, "invalid x-api-key"), conch.KindAuth, 401, 0, "invalid x-api-key"},
		{"403", fakellm.Error(403, "forbidden"), conch.KindAuth, 403, 0, "forbidden"},
		{"ContextTooLong", fakellm.ContextTooLong(), conch.KindContextTooLong, 400, 0, ""},
		{"413", fakellm.Error(413, "request exceeds the maximum size"), conch.KindContextTooLong, 413, 0, "maximum size"},
		{"400", fakellm.Error(400, "tools.0.name: bad name"), conch.KindBadRequest, 400, 0, "bad name"},
		{"404", fakellm.Error(404, "model not found"), conch.KindBadRequest, 404, 0, "model not found"},
		{"502HTML", fakellm.Raw(502, "text/html", "<html><body>502 Bad Gateway</body></html>"), conch.KindTransient, 502, 0, "Bad Gateway"},
		{"400Text", fakellm.Raw(400, "text/plain", "malformed request"), conch.KindBadRequest, 400, 0, "malformed request"},
		{"Drop", fakellm.Drop(), conch.KindTransient, 0, 0, ""},
	}
	for _, tc := range errorCases {
		t.Run("Error"+tc.name, func(t *testing.T) {
			t.Parallel()
			s := fakellm.New(t)
			s.Push(tc.reply)
			_, err := gen(t, model(t, s), context.Background(), userRequest("hi"))
			me := modelError(t, err)
			if me.Kind != tc.kind || conch.KindOf(err) != tc.kind {
				t.Errorf("kind: got %q (KindOf %q), want %q; error: %v", me.Kind, conch.KindOf(err), tc.kind, err)
			}
			if me.Status != tc.status {
				t.Errorf("status: got %d, want %d", me.Status, tc.status)
			}
			if me.RetryAfter != tc.retryAfter {
				t.Errorf("retry after: got %v, want %v", me.RetryAfter, tc.retryAfter)
			}
			if !strings.Contains(me.Message, tc.msg) {
				t.Errorf("message: got %q, want it to contain %q", me.Message, tc.msg)
			}
			if me.Err == nil {
				t.Errorf("ModelError.Err is nil, want the cause")
			}
			if n := s.Count(); n != 1 {
				t.Errorf("requests sent: got %d, want 1 (the SDK must not retry)", n)
			}
		})
	}

	t.Run("RetryAfterHTTPDate", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Error(503, "busy").Header("Retry-After", time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat)))
		_, err := gen(t, model(t, s), context.Background(), userRequest("hi"))
		me := modelError(t, err)
		// An HTTP date has whole seconds; allow for that and for the call.
		if me.RetryAfter < 25*time.Second || me.RetryAfter > 31*time.Second {
			t.Errorf("retry after: got %v, want about 30s", me.RetryAfter)
		}
	})

	t.Run("CancelSlowResponse", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("too late").Delay(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			if s.Wait(ctx, 1) == nil {
				cancel()
			}
		}()
		_, err := gen(t, model(t, s), ctx, userRequest("hi"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want an error wrapping context.Canceled", err)
		}
		var me *conch.ModelError
		if errors.As(err, &me) {
			t.Errorf("a cancelled call came back as a ModelError %+v, want a plain context error", me)
		}
	})

	t.Run("CallerDeadline", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Hang())
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := gen(t, model(t, s), ctx, userRequest("hi"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want an error wrapping context.DeadlineExceeded", err)
		}
		if conch.KindOf(err) == conch.KindTransient {
			t.Errorf("the caller's own deadline was classified transient")
		}
	})

	t.Run("ModelTimeout", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Hang())
		m := newModel(t, s.BaseURL(p), 50*time.Millisecond)
		_, err := gen(t, m, context.Background(), userRequest("hi"))
		me := modelError(t, err)
		if me.Kind != conch.KindTransient || me.Status != 0 {
			t.Errorf("got kind %q status %d, want transient and no status", me.Kind, me.Status)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the model's own timeout wraps context.DeadlineExceeded; callers would take it for theirs")
		}
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		base := s.BaseURL(p)
		s.Close()
		_, err := gen(t, newModel(t, base, 0), context.Background(), userRequest("hi"))
		me := modelError(t, err)
		if me.Kind != conch.KindTransient || me.Status != 0 {
			t.Errorf("got kind %q status %d, want transient and no status; error: %v", me.Kind, me.Status, err)
		}
	})

	t.Run("BadToolSchema", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		req := userRequest("hi")
		req.Tools = []conch.ToolSpec{{Name: "broken", Parameters: json.RawMessage(`[1,2]`)}}
		_, err := gen(t, model(t, s), context.Background(), req)
		me := modelError(t, err)
		if me.Kind != conch.KindBadRequest || !strings.Contains(me.Message, "broken") {
			t.Errorf("got %q %q, want bad_request naming the tool", me.Kind, me.Message)
		}
		if n := s.Count(); n != 0 {
			t.Errorf("requests sent: got %d, want 0", n)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Handle(func(r fakellm.Request) fakellm.Reply { return fakellm.Text("echo: " + r.LastUserText()) })
		m := model(t, s)
		const n = 8
		errs := make(chan error, n)
		for i := range n {
			go func() {
				text := strings.Repeat("x", i+1)
				resp, err := gen(t, m, context.Background(), userRequest(text))
				if err == nil && resp.Text != "echo: "+text {
					err = errors.New("got " + resp.Text + ", want echo: " + text)
				}
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

func userRequest(text string) conch.ModelRequest {
	return conch.ModelRequest{Messages: []conch.Message{{Role: conch.RoleUser, Text: text}}}
}

func last(t *testing.T, s *fakellm.Server) fakellm.Request {
	t.Helper()
	r, ok := s.Last()
	if !ok {
		t.Fatal("the fake server received no request")
	}
	return r
}

func modelError(t *testing.T, err error) *conch.ModelError {
	t.Helper()
	var me *conch.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("got error %v (%T), want a *conch.ModelError", err, err)
	}
	return me
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// Bench measures one Generate through the provider's SDK against the fake
// (a text answer to a short conversation with two tools offered) and
// reports the p50 round trip.
func Bench(b *testing.B, p fakellm.Provider, newModel NewModel) {
	s := fakellm.New(b, fakellm.WithoutRecording())
	s.Handle(func(fakellm.Request) fakellm.Reply { return fakellm.Text("ok") })
	m := newModel(b, s.BaseURL(p), 0)
	req := userRequest("hello")
	req.System = system
	req.Tools = tools()
	var totals []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := m.Generate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		totals = append(totals, time.Since(start))
	}
	b.ReportMetric(p50(totals), "p50-round-trip-µs")
}
