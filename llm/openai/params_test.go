package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"conch"
)

// The official API refuses max_tokens for reasoning models; it gets
// max_completion_tokens. (Compatible servers are tested on the wire.)
func TestOfficialAPIGetsMaxCompletionTokens(t *testing.T) {
	m, err := New(Config{APIKey: "k", Model: "gpt-4.1"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.params(conch.ModelRequest{MaxTokens: 500, Messages: []conch.Message{{Role: conch.RoleUser, Text: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"max_completion_tokens":500`) || strings.Contains(string(body), `"max_tokens"`) {
		t.Errorf("body %s: want max_completion_tokens 500 and no max_tokens", body)
	}
}
