package llm

import "testing"

func TestVision(t *testing.T) {
	for name, want := range map[string]bool{
		"gpt-4o": true, "gpt-4o-mini": true, "gpt-4.1-nano": true, "gpt-5-mini": true, "o3-mini": false, "o3": true,
		"gpt-4": false, "gpt-3.5-turbo": false, "claude-sonnet-4-5": true, "claude-3-5-haiku-latest": true,
		"models/gemini-2.5-flash": true, "openai/llava:13b": true, "deepseek-chat": false, "qwen2.5-vl-7b": true, "qwen2.5-coder": false,
	} {
		if got, known := Vision(name); got != want || !known {
			t.Errorf("Vision(%q) = %v (known %v), want %v", name, got, known, want)
		}
	}
	if v, known := Vision("my-local-model"); v || known {
		t.Errorf("an unknown model: vision %v, known %v; want false, false", v, known)
	}
}
