package gemini_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/llm/gemini"
	"conch/llm/internal/llmtest"
)

func newModel(tb testing.TB, baseURL string, timeout time.Duration) conch.Model {
	tb.Helper()
	m, err := gemini.New(gemini.Config{BaseURL: baseURL, APIKey: llmtest.APIKey, Model: "test-model", Timeout: timeout})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return m
}

func TestContract(t *testing.T) { llmtest.Run(t, fakellm.Gemini, newModel) }

func BenchmarkGenerate(b *testing.B) { llmtest.Bench(b, fakellm.Gemini, newModel) }

func BenchmarkGenerateStream(b *testing.B) { llmtest.BenchStream(b, fakellm.Gemini, newModel) }

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  gemini.Config
		want string // "" means valid
	}{
		{"default URL", gemini.Config{APIKey: "k", Model: "gemini-2.5-flash"}, ""},
		{"no key", gemini.Config{Model: "m"}, "APIKey is required"},
		{"no model", gemini.Config{APIKey: "k"}, "Model is required"},
		{"version in URL", gemini.Config{BaseURL: "https://generativelanguage.googleapis.com/v1beta", APIKey: "k", Model: "m"}, "API version"},
		{"not a URL", gemini.Config{BaseURL: "::", APIKey: "k", Model: "m"}, "BaseURL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := gemini.New(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got error %v, want none", err)
			case tc.want == "" && m.Name() != "gemini/"+tc.cfg.Model:
				t.Errorf("name: got %q", m.Name())
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Gemini answers a bad key with 400 INVALID_ARGUMENT, not 401.
func TestInvalidKeyIsAuth(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Error(400, "API key not valid. Please pass a valid API key."))
	_, err := newModel(t, s.BaseURL(fakellm.Gemini), 0).Generate(context.Background(), userRequest("hi"))
	if got := conch.KindOf(err); got != conch.KindAuth {
		t.Errorf("kind: got %q, want %q; error %v", got, conch.KindAuth, err)
	}
}

// When the API gives call ids, they go back as given, with the thought
// signature, on both the call and the result.
func TestAPICallIDsRoundTrip(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.ToolCalls(fakellm.Call{ID: "fc-7", Name: "bash", Args: json.RawMessage(`{"cmd":"ls"}`)}), fakellm.Text("done"))
	m := newModel(t, s.BaseURL(fakellm.Gemini), 0)
	req := userRequest("ls")
	req.Tools = []conch.ToolSpec{{Name: "bash"}}
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if len(resp.ToolCalls) != 1 || !strings.HasPrefix(resp.ToolCalls[0].ID, "fc-7") {
		t.Fatalf("calls: got %+v, want one whose id starts with fc-7", resp.ToolCalls)
	}
	req.Messages = append(req.Messages,
		conch.Message{Role: conch.RoleAssistant, ToolCalls: resp.ToolCalls},
		conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: resp.ToolCalls[0].ID, Content: "a.txt"}},
	)
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatalf("Generate 2: %v", err)
	}
	first, second := s.Requests()[0], s.Requests()[1]
	call := second.Messages[1].ToolCalls[0]
	if call.ID != "fc-7" || second.ToolResults()[0].CallID != "fc-7" || second.ToolResults()[0].Name != "bash" {
		t.Errorf("ids sent: call %q result %+v, want fc-7 on both and name bash", call.ID, second.ToolResults()[0])
	}
	sig, err := base64.StdEncoding.DecodeString(call.Signature)
	if err != nil || !strings.HasPrefix(string(sig), "fakellm-thought-") {
		t.Errorf("signature sent back: got %q (%v), want the one the fake issued", call.Signature, err)
	}
	if tool, _ := first.Tool("bash"); string(tool.Parameters) != `{"properties":{},"type":"object"}` {
		t.Errorf("schema of a tool without parameters: got %s", tool.Parameters)
	}
}

func TestAnswersWithoutContent(t *testing.T) {
	tests := []struct {
		name string
		body string
		text string
		kind conch.ErrorKind
	}{
		{"blocked prompt", `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":5}}`, "", conch.KindBadRequest},
		{"thought parts skipped", `{"candidates":[{"content":{"role":"model","parts":[{"text":"pondering","thought":true},{"text":"answer"}]},"finishReason":"STOP"}]}`, "answer", ""},
		{"safety stop", `{"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"SAFETY"}]}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fakellm.New(t)
			s.Push(fakellm.Raw(200, "application/json", tc.body))
			resp, err := newModel(t, s.BaseURL(fakellm.Gemini), 0).Generate(context.Background(), userRequest("hi"))
			if tc.kind != "" {
				if got := conch.KindOf(err); got != tc.kind {
					t.Errorf("kind: got %q (%v), want %q", got, err, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if resp.Text != tc.text {
				t.Errorf("text: got %q, want %q", resp.Text, tc.text)
			}
			if tc.name == "safety stop" && resp.StopReason != conch.StopOther {
				t.Errorf("stop: got %q, want %q", resp.StopReason, conch.StopOther)
			}
		})
	}
}

func TestResultForUnknownCallIsRefused(t *testing.T) {
	s := fakellm.New(t)
	req := userRequest("hi")
	req.Messages = append(req.Messages, conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "nope", Content: "x"}})
	_, err := newModel(t, s.BaseURL(fakellm.Gemini), 0).Generate(context.Background(), req)
	if got := conch.KindOf(err); got != conch.KindBadRequest || !strings.Contains(err.Error(), "nope") {
		t.Errorf("got %q %v, want bad_request naming the call", got, err)
	}
	if s.Count() != 0 {
		t.Errorf("a request was sent")
	}
}

func userRequest(text string) conch.ModelRequest {
	return conch.ModelRequest{Messages: []conch.Message{{Role: conch.RoleUser, Text: text}}}
}

// A history written by another provider (a fallback answered the step)
// reaches Gemini 3 with the documented stand-in signature on its calls;
// older models get none, and Gemini's own calls keep theirs.
func TestForeignCallsGetStandInSignature(t *testing.T) {
	for _, tc := range []struct {
		model, id, want string
	}{
		{"gemini-3-pro-preview", "toolu_01abc", base64.StdEncoding.EncodeToString([]byte("skip_thought_signature_validator"))},
		{"gemini-2.5-flash", "toolu_01abc", ""},
		{"gemini-3-pro-preview", "call_1#ts=" + base64.RawURLEncoding.EncodeToString([]byte("own")), base64.StdEncoding.EncodeToString([]byte("own"))},
	} {
		s := fakellm.New(t)
		s.Push(fakellm.Text("ok"))
		m, err := gemini.New(gemini.Config{BaseURL: s.BaseURL(fakellm.Gemini), APIKey: llmtest.APIKey, Model: tc.model})
		if err != nil {
			t.Fatal(err)
		}
		req := conch.ModelRequest{Messages: []conch.Message{
			{Role: conch.RoleUser, Text: "list"},
			{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: tc.id, Name: "ls", Arguments: []byte(`{}`)}}},
			{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: tc.id, Name: "ls", Content: "a b"}},
		}}
		if _, err := m.Generate(context.Background(), req); err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		got, _ := s.Last()
		var calls []fakellm.Call
		for _, msg := range got.Messages {
			calls = append(calls, msg.ToolCalls...)
		}
		if len(calls) != 1 || calls[0].Signature != tc.want {
			t.Errorf("%s, id %s: got calls %+v, want signature %q", tc.model, tc.id, calls, tc.want)
		}
	}
}
