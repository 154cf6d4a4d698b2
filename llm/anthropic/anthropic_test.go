package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/llm/anthropic"
	"conch/llm/internal/llmtest"
)

func newModel(tb testing.TB, baseURL string, timeout time.Duration) conch.Model {
	tb.Helper()
	m, err := anthropic.New(anthropic.Config{BaseURL: baseURL, APIKey: llmtest.APIKey, Model: "test-model", Timeout: timeout})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return m
}

func TestContract(t *testing.T) { llmtest.Run(t, fakellm.Anthropic, newModel) }

func BenchmarkGenerate(b *testing.B) { llmtest.Bench(b, fakellm.Anthropic, newModel) }

func BenchmarkGenerateStream(b *testing.B) { llmtest.BenchStream(b, fakellm.Anthropic, newModel) }

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  anthropic.Config
		want string // "" means valid
	}{
		{"default URL", anthropic.Config{APIKey: "k", Model: "claude-sonnet-4-5"}, ""},
		{"no key", anthropic.Config{Model: "m"}, "APIKey is required"},
		{"no model", anthropic.Config{APIKey: "k"}, "Model is required"},
		{"version in URL", anthropic.Config{BaseURL: "https://api.anthropic.com/v1", APIKey: "k", Model: "m"}, "must not end in /v1"},
		{"not a URL", anthropic.Config{BaseURL: "api.anthropic.com", APIKey: "k", Model: "m"}, "BaseURL"},
		{"negative max tokens", anthropic.Config{APIKey: "k", Model: "m", MaxTokens: -1}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := anthropic.New(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got error %v, want none", err)
			case tc.want == "" && m.Name() != "anthropic/"+tc.cfg.Model:
				t.Errorf("name: got %q", m.Name())
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWireDetails(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Text("ok"))
	m := newModel(t, s.BaseURL(fakellm.Anthropic), 0)
	req := conch.ModelRequest{
		Messages: []conch.Message{
			{Role: conch.RoleUser, Text: "tidy up"},
			{Role: conch.RoleAssistant, Text: "", ToolCalls: []conch.ToolCall{{ID: "toolu_1", Name: "bash", Arguments: json.RawMessage(`{"cmd":"rm -r tmp"}`)}}},
			{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "toolu_1", Content: ""}},
			{Role: conch.RoleUser, Text: "also empty the bin"},
		},
		Tools: []conch.ToolSpec{{Name: "bash", Parameters: json.RawMessage(
			`{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"],"additionalProperties":false,"$defs":{"x":{"type":"string"}}}`)}},
	}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	got, _ := s.Last()
	if len(got.Messages) != 3 {
		t.Fatalf("messages: got %d %+v, want user, assistant, user", len(got.Messages), got.Messages)
	}
	// The tool result and the next user text share ONE user message, result first.
	if m := got.Messages[2]; m.Role != "user" || len(m.ToolResults) != 1 || m.Text != "also empty the bin" {
		t.Errorf("merged user message: got %+v", m)
	}
	body := string(got.Body)
	if strings.Contains(body, `"text":""`) {
		t.Errorf("an empty text block was sent (the API refuses them): %s", body)
	}
	if !strings.Contains(body, `"max_tokens":8192`) {
		t.Errorf("default max_tokens not sent: %s", body)
	}
	var schema map[string]any
	if err := json.Unmarshal(got.Tools[0].Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["additionalProperties"] != false || schema["$defs"] == nil || schema["type"] != "object" || schema["required"] == nil {
		t.Errorf("schema lost keywords on the way: %s", got.Tools[0].Parameters)
	}
}

// The SDK refuses non-streaming calls whose max_tokens it expects to take
// over ten minutes unless a request timeout is set; the Model sets one.
func TestLargeMaxTokensWithoutStreaming(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Text("ok"))
	req := conch.ModelRequest{MaxTokens: 64000, Messages: []conch.Message{{Role: conch.RoleUser, Text: "hi"}}}
	if _, err := newModel(t, s.BaseURL(fakellm.Anthropic), 0).Generate(context.Background(), req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
}

func TestUsageCountsCachedInput(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Raw(200, "application/json", `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
		"content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":5,"output_tokens":3}}`))
	resp, err := newModel(t, s.BaseURL(fakellm.Anthropic), 0).Generate(context.Background(),
		conch.ModelRequest{Messages: []conch.Message{{Role: conch.RoleUser, Text: "hi"}}})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if want := (conch.Usage{InputTokens: 115, CachedTokens: 100, OutputTokens: 3}); resp.Usage != want || resp.Text != "hi" {
		t.Errorf("got usage %+v text %q, want %+v \"hi\"", resp.Usage, resp.Text, want)
	}
}
