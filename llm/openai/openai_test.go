package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/llm/internal/llmtest"
	"conch/llm/openai"
)

func newModel(tb testing.TB, baseURL string, timeout time.Duration) conch.Model {
	tb.Helper()
	m, err := openai.New(openai.Config{BaseURL: baseURL, APIKey: llmtest.APIKey, Model: "test-model", Timeout: timeout})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return m
}

func TestContract(t *testing.T) { llmtest.Run(t, fakellm.OpenAI, newModel) }

func BenchmarkGenerate(b *testing.B) { llmtest.Bench(b, fakellm.OpenAI, newModel) }

func BenchmarkGenerateStream(b *testing.B) { llmtest.BenchStream(b, fakellm.OpenAI, newModel) }

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  openai.Config
		want string // "" means valid
	}{
		{"official", openai.Config{APIKey: "k", Model: "gpt-4.1"}, ""},
		{"ollama without key", openai.Config{BaseURL: "http://localhost:11434/v1", Model: "qwen3"}, ""},
		{"no model", openai.Config{APIKey: "k"}, "Model is required"},
		{"official without key", openai.Config{Model: "gpt-4.1"}, "APIKey is required"},
		{"not a URL", openai.Config{BaseURL: "localhost:11434", Model: "m"}, "BaseURL"},
		{"wrong scheme", openai.Config{BaseURL: "ftp://host/v1", Model: "m"}, "BaseURL"},
		{"negative timeout", openai.Config{APIKey: "k", Model: "m", Timeout: -time.Second}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := openai.New(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got error %v, want none", err)
			case tc.want == "" && m.Name() != "openai/"+tc.cfg.Model:
				t.Errorf("name: got %q", m.Name())
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCompatibleServerQuirks feeds answers real compatible servers give.
func TestCompatibleServerQuirks(t *testing.T) {
	completion := func(finish, message string) string {
		return `{"id":"x","object":"chat.completion","created":1,"model":"qwen3","choices":[{"index":0,"finish_reason":"` + finish + `","message":` + message + `}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`
	}
	tests := []struct {
		name   string
		body   string
		stop   conch.StopReason
		calls  int
		kind   conch.ErrorKind
		status int
	}{
		// Older Ollama: "stop" beside tool calls, no call id, empty arguments.
		{"stop with tool calls", completion("stop", `{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"now","arguments":""}}]}`), conch.StopToolUse, 1, "", 0},
		{"content filter", completion("content_filter", `{"role":"assistant","content":""}`), conch.StopOther, 0, "", 0},
		{"refusal", completion("stop", `{"role":"assistant","content":null,"refusal":"I can't help with that."}`), conch.StopEnd, 0, "", 0},
		// OpenRouter: an upstream failure inside a 200.
		{"error in 200", `{"error":{"code":502,"message":"upstream provider error"}}`, "", 0, conch.KindTransient, 502},
		{"rate limit in 200", `{"error":{"code":429,"message":"rate limited"}}`, "", 0, conch.KindTransient, 429},
		{"no choices", `{"id":"x","object":"chat.completion","choices":[]}`, "", 0, conch.KindTransient, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fakellm.New(t)
			s.Push(fakellm.Raw(200, "application/json", tc.body))
			resp, err := newModel(t, s.BaseURL(fakellm.OpenAI), 0).Generate(context.Background(), userRequest("hi"))
			if tc.kind != "" {
				var me *conch.ModelError
				if !errors.As(err, &me) || me.Kind != tc.kind || me.Status != tc.status {
					t.Fatalf("got %v, want a %q ModelError with status %d", err, tc.kind, tc.status)
				}
				return
			}
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if resp.StopReason != tc.stop || len(resp.ToolCalls) != tc.calls {
				t.Fatalf("got stop %q and %d calls, want %q and %d", resp.StopReason, len(resp.ToolCalls), tc.stop, tc.calls)
			}
			for _, c := range resp.ToolCalls {
				if c.ID == "" || string(c.Arguments) != "{}" {
					t.Errorf("call: got id %q args %s, want a synthesised id and {}", c.ID, c.Arguments)
				}
			}
			if tc.name == "refusal" && resp.Text != "I can't help with that." {
				t.Errorf("refusal text: got %q", resp.Text)
			}
		})
	}
}

func TestInsufficientQuotaIsNotTransient(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Error(429, "You exceeded your current quota, please check your plan and billing details.").Code("insufficient_quota"))
	_, err := newModel(t, s.BaseURL(fakellm.OpenAI), 0).Generate(context.Background(), userRequest("hi"))
	if got := conch.KindOf(err); got != conch.KindAuth {
		t.Errorf("kind: got %q, want %q (waiting does not refill a quota)", got, conch.KindAuth)
	}
}

func TestWireDetails(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Text("ok"))
	m, err := openai.New(openai.Config{BaseURL: s.BaseURL(fakellm.OpenAI), Model: "qwen3", MaxTokens: 300})
	if err != nil {
		t.Fatal(err)
	}
	req := userRequest("run it")
	req.Messages = append(req.Messages,
		conch.Message{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"cmd":"false"}`)}}},
		conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "call_1", Content: "exit status 1", IsError: true}},
	)
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	got, _ := s.Last()
	// A compatible server gets max_tokens; only api.openai.com gets max_completion_tokens.
	if !strings.Contains(string(got.Body), `"max_tokens":300`) || strings.Contains(string(got.Body), "max_completion_tokens") {
		t.Errorf("max tokens field: body %s, want max_tokens 300", got.Body)
	}
	if got.APIKey != "" {
		t.Errorf("a key was sent without one configured: %q", got.APIKey)
	}
	res := got.ToolResults()
	if len(res) != 1 || res[0].Content != "Error: exit status 1" {
		t.Errorf("failed tool result: got %+v, want content \"Error: exit status 1\"", res)
	}
	if len(got.Messages) != 3 || got.Messages[1].Text != "" {
		t.Errorf("assistant message with only calls: got %+v, want no text", got.Messages)
	}
}

func userRequest(text string) conch.ModelRequest {
	return conch.ModelRequest{Messages: []conch.Message{{Role: conch.RoleUser, Text: text}}}
}
