package fakellm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"
)

// Hand-written requests in each API's wire format, as the SDKs send them.
const (
	openAIRequest = `{"model":"gpt-test","max_completion_tokens":100,"messages":[
		{"role":"system","content":"be brief <memory>tea</memory>"},
		{"role":"user","content":[{"type":"text","text":"list files"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"a.txt"}],
		"tools":[{"type":"function","function":{"name":"bash","description":"run","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}}]}`
	anthropicRequest = `{"model":"claude-test","max_tokens":100,"system":[{"type":"text","text":"be brief <memory>tea</memory>"}],"messages":[
		{"role":"user","content":"list files"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"bash","input":{"cmd":"ls"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a.txt"}],"is_error":false}]}],
		"tools":[{"name":"bash","description":"run","input_schema":{"type":"object","properties":{"cmd":{"type":"string"}}}}]}`
	geminiRequest = `{"systemInstruction":{"role":"user","parts":[{"text":"be brief <memory>tea</memory>"}]},"generationConfig":{"maxOutputTokens":100},"contents":[
		{"role":"user","parts":[{"text":"list files"}]},
		{"role":"model","parts":[{"functionCall":{"name":"bash","args":{"cmd":"ls"}},"thoughtSignature":"c2ln"}]},
		{"role":"user","parts":[{"functionResponse":{"name":"bash","response":{"output":"a.txt"}}}]}],
		"tools":[{"functionDeclarations":[{"name":"bash","description":"run","parametersJsonSchema":{"type":"object","properties":{"cmd":{"type":"string"}}}}]}]}`
)

// endpoint is the path and body of a request to provider p.
func endpoint(p fakellm.Provider) (path, body string) {
	switch p {
	case fakellm.OpenAI:
		return "/chat/completions", openAIRequest
	case fakellm.Anthropic:
		return "/v1/messages", anthropicRequest
	}
	return "/v1beta/models/gemini-test:generateContent", geminiRequest
}

var providers = []fakellm.Provider{fakellm.OpenAI, fakellm.Anthropic, fakellm.Gemini}

// post sends body to the server's endpoint for p and returns status, header
// and decoded JSON body.
// It never fails the test itself, so it is safe in any goroutine.
func post(ctx context.Context, s *fakellm.Server, p fakellm.Provider, body string) (int, http.Header, map[string]any, error) {
	path, _ := endpoint(p)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.BaseURL(p)+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	switch p {
	case fakellm.OpenAI:
		req.Header.Set("Authorization", "Bearer k")
	case fakellm.Anthropic:
		req.Header.Set("X-Api-Key", "k")
	case fakellm.Gemini:
		req.Header.Set("X-Goog-Api-Key", "k")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, resp.Header, nil, fmt.Errorf("answer is not JSON: %w: %q", err, raw)
	}
	return resp.StatusCode, resp.Header, out, nil
}

// at walks a decoded JSON value along keys and indexes.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func TestDecodesEachProvider(t *testing.T) {
	for _, p := range providers {
		t.Run(string(p), func(t *testing.T) {
			s := fakellm.New(t)
			s.Push(fakellm.Text("ok"))
			_, body := endpoint(p)
			if status, _, _, err := post(context.Background(), s, p, body); err != nil || status != 200 {
				t.Fatalf("post: status %d, error %v", status, err)
			}
			r, ok := s.Last()
			if !ok {
				t.Fatal("no request recorded")
			}
			if r.Provider != p || !strings.HasSuffix(r.Model, "-test") || r.MaxTokens != 100 {
				t.Errorf("got provider %q model %q max tokens %d, want %q *-test 100", r.Provider, r.Model, r.MaxTokens, p)
			}
			if r.System != "be brief <memory>tea</memory>" {
				t.Errorf("system: got %q", r.System)
			}
			if len(r.Messages) != 3 {
				t.Fatalf("messages: got %d: %+v, want 3", len(r.Messages), r.Messages)
			}
			if m := r.Messages[0]; m.Role != "user" || m.Text != "list files" {
				t.Errorf("message 0: got %+v, want user \"list files\"", m)
			}
			if m := r.Messages[1]; m.Role != "assistant" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != "bash" || !bytes.Contains(m.ToolCalls[0].Args, []byte(`"ls"`)) {
				t.Errorf("message 1: got %+v, want an assistant call bash(ls)", m)
			}
			if res := r.ToolResults(); len(res) != 1 || res[0].Content != "a.txt" || res[0].IsError {
				t.Errorf("tool results: got %+v, want one a.txt", res)
			}
			if tool, ok := r.Tool("bash"); !ok || tool.Description != "run" || !bytes.Contains(tool.Parameters, []byte(`"cmd"`)) {
				t.Errorf("tool: got %+v, want bash with its schema", tool)
			}
			if p == fakellm.Gemini && r.Messages[1].ToolCalls[0].Signature != "c2ln" {
				t.Errorf("gemini signature: got %q, want c2ln", r.Messages[1].ToolCalls[0].Signature)
			}
			if r.APIKey != "k" {
				t.Errorf("api key: got %q, want k", r.APIKey)
			}
		})
	}
}

func TestResponseShapes(t *testing.T) {
	tests := []struct {
		p     fakellm.Provider
		reply fakellm.Reply
		check map[string][]any // want value → path
	}{
		{fakellm.OpenAI, fakellm.Text("hi").Usage(7, 2), map[string][]any{
			"chat.completion": {"object"}, "stop": {"choices", 0, "finish_reason"}, "hi": {"choices", 0, "message", "content"},
			"assistant": {"choices", 0, "message", "role"}, "7": {"usage", "prompt_tokens"}, "9": {"usage", "total_tokens"},
		}},
		{fakellm.OpenAI, fakellm.ToolCall("bash", `{"cmd":"ls"}`), map[string][]any{
			"tool_calls": {"choices", 0, "finish_reason"}, "function": {"choices", 0, "message", "tool_calls", 0, "type"},
			`{"cmd":"ls"}`: {"choices", 0, "message", "tool_calls", 0, "function", "arguments"}, "<nil>": {"choices", 0, "message", "content"},
		}},
		{fakellm.OpenAI, fakellm.Text("cut").MaxTokens(), map[string][]any{"length": {"choices", 0, "finish_reason"}}},
		{fakellm.Anthropic, fakellm.Text("hi").Usage(7, 2), map[string][]any{
			"message": {"type"}, "end_turn": {"stop_reason"}, "text": {"content", 0, "type"}, "hi": {"content", 0, "text"},
			"7": {"usage", "input_tokens"}, "2": {"usage", "output_tokens"},
		}},
		{fakellm.Anthropic, fakellm.ToolCall("bash", `{"cmd":"ls"}`).Text("let me see"), map[string][]any{
			"tool_use": {"stop_reason"}, "let me see": {"content", 0, "text"}, "bash": {"content", 1, "name"}, "ls": {"content", 1, "input", "cmd"},
		}},
		{fakellm.Anthropic, fakellm.Text("cut").MaxTokens(), map[string][]any{"max_tokens": {"stop_reason"}}},
		{fakellm.Gemini, fakellm.Text("hi").Usage(7, 2), map[string][]any{
			"STOP": {"candidates", 0, "finishReason"}, "model": {"candidates", 0, "content", "role"}, "hi": {"candidates", 0, "content", "parts", 0, "text"},
			"7": {"usageMetadata", "promptTokenCount"}, "9": {"usageMetadata", "totalTokenCount"},
		}},
		{fakellm.Gemini, fakellm.ToolCall("bash", `{"cmd":"ls"}`), map[string][]any{
			"STOP": {"candidates", 0, "finishReason"}, "bash": {"candidates", 0, "content", "parts", 0, "functionCall", "name"},
			"ls": {"candidates", 0, "content", "parts", 0, "functionCall", "args", "cmd"}, "<nil>": {"candidates", 0, "content", "parts", 0, "functionCall", "id"},
		}},
		{fakellm.Gemini, fakellm.Text("cut").MaxTokens(), map[string][]any{"MAX_TOKENS": {"candidates", 0, "finishReason"}}},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%s_%d", tc.p, i), func(t *testing.T) {
			s := fakellm.New(t)
			s.Push(tc.reply)
			_, body := endpoint(tc.p)
			status, _, out, err := post(context.Background(), s, tc.p, body)
			if err != nil || status != 200 {
				t.Fatalf("post: status %d, error %v", status, err)
			}
			for want, path := range tc.check {
				if got := fmt.Sprint(at(out, path...)); got != want {
					t.Errorf("%v: got %s, want %s", path, got, want)
				}
			}
		})
	}
}

func TestErrorShapes(t *testing.T) {
	tests := []struct {
		p      fakellm.Provider
		reply  fakellm.Reply
		status int
		header map[string]string
		check  map[string][]any
	}{
		{fakellm.OpenAI, fakellm.Error(429, "slow down").RetryAfter(1500 * time.Millisecond), 429, map[string]string{"Retry-After": "2"},
			map[string][]any{"slow down": {"error", "message"}, "rate_limit_exceeded": {"error", "code"}, "requests": {"error", "type"}}},
		{fakellm.OpenAI, fakellm.ContextTooLong(), 400, nil,
			map[string][]any{"context_length_exceeded": {"error", "code"}, "invalid_request_error": {"error", "type"}}},
		{fakellm.OpenAI, fakellm.Error(400, "x").Code("custom_code"), 400, nil, map[string][]any{"custom_code": {"error", "code"}}},
		{fakellm.Anthropic, fakellm.Error(429, "slow down").RetryAfter(3 * time.Second), 429, map[string]string{"Retry-After": "3"},
			map[string][]any{"error": {"type"}, "rate_limit_error": {"error", "type"}, "slow down": {"error", "message"}}},
		{fakellm.Anthropic, fakellm.Error(529, "Overloaded"), 529, nil, map[string][]any{"overloaded_error": {"error", "type"}}},
		{fakellm.Anthropic, fakellm.ContextTooLong(), 400, nil, map[string][]any{"invalid_request_error": {"error", "type"}}},
		{fakellm.Gemini, fakellm.Error(429, "quota").RetryAfter(30 * time.Second), 429, map[string]string{"Retry-After": ""},
			map[string][]any{"429": {"error", "code"}, "RESOURCE_EXHAUSTED": {"error", "status"}, "30s": {"error", "details", 0, "retryDelay"}}},
		{fakellm.Gemini, fakellm.Error(503, "busy").Header("Retry-After", "7"), 503, map[string]string{"Retry-After": "7"},
			map[string][]any{"UNAVAILABLE": {"error", "status"}}},
		{fakellm.Gemini, fakellm.ContextTooLong(), 400, nil, map[string][]any{"INVALID_ARGUMENT": {"error", "status"}}},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%s_%d", tc.p, i), func(t *testing.T) {
			s := fakellm.New(t)
			s.Push(tc.reply)
			_, body := endpoint(tc.p)
			status, header, out, err := post(context.Background(), s, tc.p, body)
			if err != nil || status != tc.status {
				t.Fatalf("post: status %d, error %v; want %d", status, err, tc.status)
			}
			for k, v := range tc.header {
				if got := header.Get(k); got != v {
					t.Errorf("header %s: got %q, want %q", k, got, v)
				}
			}
			for want, path := range tc.check {
				if got := fmt.Sprint(at(out, path...)); got != want {
					t.Errorf("%v: got %s, want %s", path, got, want)
				}
			}
		})
	}
}

func TestScriptThenHandlerThenExhausted(t *testing.T) {
	s := fakellm.New(t, fakellm.ExhaustionOK())
	s.Push(fakellm.Text("one"), fakellm.Text("two"))
	_, body := endpoint(fakellm.Anthropic)
	texts := func() string {
		status, _, out, err := post(context.Background(), s, fakellm.Anthropic, body)
		if err != nil {
			t.Fatal(err)
		}
		if status != 200 {
			return fmt.Sprintf("%d %v", status, at(out, "error", "message"))
		}
		return fmt.Sprint(at(out, "content", 0, "text"))
	}
	for _, want := range []string{"one", "two"} {
		if got := texts(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if got := texts(); !strings.HasPrefix(got, "500 fakellm: script exhausted") {
		t.Errorf("exhausted: got %q, want a 500 naming the problem", got)
	}
	s.Handle(func(r fakellm.Request) fakellm.Reply { return fakellm.Text("dynamic " + r.LastUserText()) })
	if got := texts(); got != "dynamic list files" {
		t.Errorf("handler: got %q, want %q", got, "dynamic list files")
	}
	s.Push(fakellm.Text("scripted again"))
	if got := texts(); got != "scripted again" {
		t.Errorf("script before handler: got %q", got)
	}
	if got, want := s.Count(), 5; got != want || len(s.Requests()) != want {
		t.Errorf("count: got %d (%d recorded), want %d", got, len(s.Requests()), want)
	}
}

// recordingTB notes failures instead of failing, to test that the server
// fails the test.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

func TestMistakesFailTheTest(t *testing.T) {
	tests := []struct {
		name  string
		push  []fakellm.Reply
		wantE string
	}{
		{"exhausted", nil, "script exhausted"},
		{"args not an object", []fakellm.Reply{fakellm.ToolCall("bash", `["ls"]`)}, "not a JSON object"},
		{"bad status", []fakellm.Reply{fakellm.Error(200, "fine")}, "not an HTTP error status"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			s := fakellm.New(rec)
			s.Push(tc.push...)
			_, body := endpoint(fakellm.OpenAI)
			status, _, out, err := post(context.Background(), s, fakellm.OpenAI, body)
			if err != nil || status != 500 {
				t.Fatalf("got status %d error %v, want 500", status, err)
			}
			if msg := fmt.Sprint(at(out, "error", "message")); !strings.Contains(msg, tc.wantE) {
				t.Errorf("answer: got %q, want it to contain %q", msg, tc.wantE)
			}
			if f := rec.failures(); len(f) != 1 || !strings.Contains(f[0], tc.wantE) {
				t.Errorf("test failures: got %q, want one containing %q", f, tc.wantE)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	s := fakellm.New(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"unknown path", http.MethodPost, "/v2/other", "{}", 404, "no endpoint"},
		{"wrong method", http.MethodGet, "/v1/chat/completions", "", 404, "no endpoint"},
		{"bad json", http.MethodPost, "/v1/messages", "{", 400, "cannot decode"},
		{"unknown role", http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[{"role":"wizard","content":"x"}]}`, 400, "unknown role"},
		{"gemini stream without sse", http.MethodPost, "/v1beta/models/g:streamGenerateContent", `{"contents":[]}`, 400, "server-sent events"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, s.URL()+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(raw), tc.want) {
				t.Errorf("got %d %s, want %d containing %q", resp.StatusCode, raw, tc.status, tc.want)
			}
		})
	}
	if n := s.Count(); n != 0 {
		t.Errorf("refused requests consumed the script: count %d, want 0", n)
	}
}

func TestDelayHangAndDrop(t *testing.T) {
	_, body := endpoint(fakellm.OpenAI)

	t.Run("delay answers", func(t *testing.T) {
		s := fakellm.New(t)
		s.Push(fakellm.Text("late").Delay(20 * time.Millisecond))
		status, _, out, err := post(context.Background(), s, fakellm.OpenAI, body)
		if err != nil || status != 200 || at(out, "choices", 0, "message", "content") != "late" {
			t.Errorf("got %d %v %v, want 200 late", status, out, err)
		}
	})
	t.Run("hang ends with the client", func(t *testing.T) {
		s := fakellm.New(t)
		s.Push(fakellm.Hang(), fakellm.Text("next"))
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			if s.Wait(ctx, 1) == nil {
				cancel()
			}
		}()
		if _, _, _, err := post(ctx, s, fakellm.OpenAI, body); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		// The server is free for the next request.
		if status, _, out, err := post(context.Background(), s, fakellm.OpenAI, body); err != nil || status != 200 || at(out, "choices", 0, "message", "content") != "next" {
			t.Errorf("after the hang: got %d %v %v", status, out, err)
		}
	})
	t.Run("close ends a hang", func(t *testing.T) {
		s := fakellm.New(t)
		s.Push(fakellm.Hang())
		done := make(chan error, 1)
		go func() {
			_, _, _, err := post(context.Background(), s, fakellm.OpenAI, body)
			done <- err
		}()
		if err := s.Wait(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := <-done; err == nil {
			t.Errorf("a hung request got an answer after Close, want an error")
		}
	})
	t.Run("drop", func(t *testing.T) {
		s := fakellm.New(t)
		s.Push(fakellm.Drop())
		if _, _, _, err := post(context.Background(), s, fakellm.OpenAI, body); err == nil || !strings.Contains(err.Error(), "EOF") {
			t.Errorf("got %v, want an EOF", err)
		}
	})
}

func TestWaitTimesOut(t *testing.T) {
	s := fakellm.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.Wait(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := fakellm.New(t)
	const n = 32
	for range n {
		s.Push(fakellm.Text("ok"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		p := providers[i%len(providers)]
		_, body := endpoint(p)
		wg.Go(func() {
			status, _, _, err := post(context.Background(), s, p, body)
			if err == nil && status != 200 {
				err = fmt.Errorf("status %d", status)
			}
			errs <- err
			_ = s.Requests()
			_ = s.Pending()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(s.Requests()); got != n || s.Pending() != 0 {
		t.Errorf("got %d requests and %d pending, want %d and 0", got, s.Pending(), n)
	}
}

func TestWithoutRecording(t *testing.T) {
	s := fakellm.New(t, fakellm.WithoutRecording())
	s.Push(fakellm.Text("ok"))
	_, body := endpoint(fakellm.Gemini)
	if _, _, _, err := post(context.Background(), s, fakellm.Gemini, body); err != nil {
		t.Fatal(err)
	}
	if s.Count() != 1 || len(s.Requests()) != 0 {
		t.Errorf("got count %d and %d recorded, want 1 and 0", s.Count(), len(s.Requests()))
	}
}

// BenchmarkServer measures one OpenAI round trip through the fake against a
// baseline server that answers a constant body: the fake's own cost is the
// difference.
func BenchmarkServer(b *testing.B) {
	_, body := endpoint(fakellm.OpenAI)
	run := func(b *testing.B, url string) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			resp, err := client.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("baseline", func(b *testing.B) {
		const answer = `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
		}))
		defer srv.Close()
		run(b, srv.URL+"/v1/chat/completions")
	})
	b.Run("fakellm", func(b *testing.B) {
		s := fakellm.New(b, fakellm.WithoutRecording())
		s.Handle(func(fakellm.Request) fakellm.Reply { return fakellm.Text("ok") })
		run(b, s.BaseURL(fakellm.OpenAI)+"/chat/completions")
	})
}
