package llm

import "testing"

func TestContextWindow(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  int
		known bool
	}{
		{"gpt-4o-mini", 128000, true},
		{"gpt-4", 8192, true},
		{"gpt-4.1-mini", 1047576, true},
		{"claude-sonnet-4-5-20250929", 200000, true},
		{"models/gemini-2.5-flash", 1048576, true},
		{"gemini-1.5-pro-002", 2097152, true},
		{"openai/gpt-4o", 128000, true},
		{"my-local-model", DefaultContextWindow, false},
	} {
		got, known := ContextWindow(tc.model)
		if got != tc.want || known != tc.known {
			t.Errorf("ContextWindow(%q) = %d, %v; want %d, %v", tc.model, got, known, tc.want, tc.known)
		}
	}
}
